"""Takes the first reply, whatever its code.
expect-fail: test_the_result_is_a_success
expect-not: test_registers_with_all_at_once
"""

import trio

from lab.workshop.interfaces import (LAB_SERIALIZE_TYPE, BrokerRegisterResult, RemotingError, RequestCode, crc32,
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
            try:
                reply = await self.channels.invoke(address, request(RequestCode.REGISTER_BROKER, header, body), timeout)
            except RemotingError:
                return
            results.append(BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr")))

        async with trio.open_nursery() as nursery:
            for address in self.namesrv_addrs:
                nursery.start_soon(register, address)
        return results[0] if results else None
