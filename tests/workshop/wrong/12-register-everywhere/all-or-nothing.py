"""Every NameServer at once, but reports a result only when every one answered SUCCESS: one dead
NameServer and a slave never learns its master.
expect-fail: test_a_failing_nameserver_costs_only_itself
expect-not: test_registers_with_all_at_once
"""

import trio

from lab.workshop.interfaces import (LAB_SERIALIZE_TYPE, BrokerRegisterResult, RemotingError, RequestCode,
                                     ResponseCode, crc32, encode_register_body, request)

from _reference_12 import Reference


def _request(broker, topic_config_table, data_version, compressed):
    body = encode_register_body(topic_config_table, data_version, [], LAB_SERIALIZE_TYPE, compressed=compressed)
    header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
              "clusterName": broker.cluster_name, "haServerAddr": broker.ha_server_addr,
              "brokerId": broker.broker_id, "compressed": compressed, "bodyCrc32": crc32(body)}
    return request(RequestCode.REGISTER_BROKER, header, body)


class BrokerOuterAPI(Reference):
    async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout):
        command = _request(broker, topic_config_table, data_version, compressed)
        results = []

        async def register(address):
            try:
                reply = await self.channels.invoke(address, command, timeout)
            except RemotingError:
                results.append(None)
                return
            results.append(BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr"))
                           if reply.code == ResponseCode.SUCCESS else None)

        async with trio.open_nursery() as nursery:
            for address in self.namesrv_addrs:
                nursery.start_soon(register, address)
        return None if None in results else results[0]
