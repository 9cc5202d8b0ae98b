"""Every NameServer in its own task, but each started 100 ms after the one before ("to spread the
load"): not at once, and the last NameServer of a long list hears every heartbeat late.
expect-fail: test_registers_with_all_at_once
expect-not: test_a_failing_nameserver_costs_only_itself
"""

import trio

from lab.workshop.interfaces import (LAB_SERIALIZE_TYPE, BrokerRegisterResult, RemotingError, RequestCode,
                                     ResponseCode, crc32, encode_register_body, request)

from _reference_12 import Reference


class BrokerOuterAPI(Reference):
    async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout):
        body = encode_register_body(topic_config_table, data_version, [], LAB_SERIALIZE_TYPE, compressed=compressed)
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "haServerAddr": broker.ha_server_addr,
                  "brokerId": broker.broker_id, "compressed": compressed, "bodyCrc32": crc32(body)}
        results = []

        async def register(address, delay):
            await trio.sleep(delay)
            try:
                reply = await self.channels.invoke(address, request(RequestCode.REGISTER_BROKER, header, body), timeout)
            except RemotingError:
                return
            if reply.code == ResponseCode.SUCCESS:
                results.append(BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr")))

        async with trio.open_nursery() as nursery:
            for i, address in enumerate(self.namesrv_addrs):
                nursery.start_soon(register, address, 0.1 * i)
        return results[0] if results else None
