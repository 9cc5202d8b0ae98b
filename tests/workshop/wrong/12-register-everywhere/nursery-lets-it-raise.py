"""Every NameServer at once, but a refusal escapes the nursery and ends the registration.
expect-fail: test_a_failing_nameserver_costs_only_itself
expect-text: RemotingError: connect to ns-0 failed: connection refused
expect-text: nursery-lets-it-raise.py
expect-not-text: sub-exception
"""

import trio

from lab.workshop.interfaces import (LAB_SERIALIZE_TYPE, BrokerRegisterResult, RequestCode, ResponseCode, crc32,
                                     encode_register_body, request)

from _reference_12 import Reference


class BrokerOuterAPI(Reference):
    async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout):
        body = encode_register_body(topic_config_table, data_version, [], LAB_SERIALIZE_TYPE, compressed=compressed)
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "haServerAddr": broker.ha_server_addr,
                  "brokerId": broker.broker_id, "compressed": compressed, "bodyCrc32": crc32(body)}
        results = []

        async def register(address):
            reply = await self.channels.invoke(address, request(RequestCode.REGISTER_BROKER, header, body), timeout)
            if reply.code == ResponseCode.SUCCESS:
                results.append(BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr")))

        async with trio.open_nursery() as nursery:
            for address in self.namesrv_addrs:
                nursery.start_soon(register, address)
        return results[0] if results else None
