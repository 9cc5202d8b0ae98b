"""Every NameServer at once, but returns as soon as one answers SUCCESS and cancels the rest: a
slower NameServer never gets the registration (4.9.8 waits for every call, each bounded).
expect-fail: test_registrations_follow_4_9_8_with_any_replies
expect-text: is seen through to its answer or its timeout
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

        async def register(address, nursery):
            try:
                reply = await self.channels.invoke(address, command, timeout)
            except RemotingError:
                return
            if reply.code == ResponseCode.SUCCESS:
                results.append(BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr")))
                nursery.cancel_scope.cancel()  # got one: enough

        async with trio.open_nursery() as nursery:
            for address in self.namesrv_addrs:
                nursery.start_soon(register, address, nursery)
        return results[0] if results else None
