"""Every NameServer at once, but the first failure cancels the others (a nursery cancelled on an
error): one dead NameServer takes every other registration with it.
expect-fail: test_a_failing_nameserver_costs_only_itself
expect-not: test_registers_with_every_nameserver
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

        async def register(address, nursery):
            try:
                reply = await self.channels.invoke(address, command, timeout)
            except RemotingError:
                nursery.cancel_scope.cancel()
                return
            if reply.code == ResponseCode.SUCCESS:
                results.append(BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr")))

        async with trio.open_nursery() as nursery:
            for address in self.namesrv_addrs:
                nursery.start_soon(register, address, nursery)
        return results[0] if results else None
