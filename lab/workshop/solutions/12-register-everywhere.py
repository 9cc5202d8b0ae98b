"""Reference solution for exercise 12: BrokerOuterAPI.registerBrokerAll / unregisterBrokerAll (4.9.8)."""

import trio

from lab.workshop.interfaces import (LAB_SERIALIZE_TYPE, BrokerRegisterResult, RemotingError, RequestCode,
                                     ResponseCode, crc32, encode_register_body, request)

UNREGISTER_TIMEOUT = 3.0


class BrokerOuterAPI:
    def __init__(self, channels, namesrv_addrs):
        self.channels = channels
        self.namesrv_addrs = list(namesrv_addrs)

    async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout):
        body = encode_register_body(topic_config_table, data_version, [], LAB_SERIALIZE_TYPE, compressed=compressed)
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "haServerAddr": broker.ha_server_addr,
                  "brokerId": broker.broker_id, "compressed": compressed, "bodyCrc32": crc32(body)}
        results = []

        async def register(address):
            try:  # a failure costs only this NameServer: 4.9.8 logs it and counts the latch down
                reply = await self.channels.invoke(address, request(RequestCode.REGISTER_BROKER, header, body), timeout)
            except RemotingError:
                return
            if reply.code == ResponseCode.SUCCESS:
                results.append(BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr")))

        # Every NameServer at once (4.9.8: an executor and a CountDownLatch), each bounded by the timeout.
        async with trio.open_nursery() as nursery:
            for address in self.namesrv_addrs:
                nursery.start_soon(register, address)
        return results[0] if results else None

    async def unregister_broker_all(self, broker):
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "brokerId": broker.broker_id}
        for address in self.namesrv_addrs:  # one after the other, 3 s each
            try:
                await self.channels.invoke(address, request(RequestCode.UNREGISTER_BROKER, header), UNREGISTER_TIMEOUT)
            except RemotingError:
                pass
