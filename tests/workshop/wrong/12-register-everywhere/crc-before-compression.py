"""Compressed registrations carry the CRC32 of the body before compression: the NameServer checks
bodyCrc32 against the bytes it received (4.9.8: the encoded, compressed body) and rejects them.
expect-fail: test_registrations_follow_4_9_8_with_any_replies
expect-text: bodyCrc32 is the CRC32 of the body sent
expect-not: test_the_request_says_who_and_what
"""

import trio

from lab.workshop.interfaces import (LAB_SERIALIZE_TYPE, BrokerRegisterResult, RemotingError, RequestCode,
                                     ResponseCode, crc32, encode_register_body, request)

from _reference_12 import Reference


class BrokerOuterAPI(Reference):
    async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout):
        plain = encode_register_body(topic_config_table, data_version, [], LAB_SERIALIZE_TYPE, compressed=False)
        body = encode_register_body(topic_config_table, data_version, [], LAB_SERIALIZE_TYPE, compressed=compressed)
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "haServerAddr": broker.ha_server_addr,
                  "brokerId": broker.broker_id, "compressed": compressed, "bodyCrc32": crc32(plain)}
        results = []

        async def register(address):
            try:
                reply = await self.channels.invoke(address, request(RequestCode.REGISTER_BROKER, header, body), timeout)
            except RemotingError:
                return
            if reply.code == ResponseCode.SUCCESS:
                results.append(BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr")))

        async with trio.open_nursery() as nursery:
            for address in self.namesrv_addrs:
                nursery.start_soon(register, address)
        return results[0] if results else None
