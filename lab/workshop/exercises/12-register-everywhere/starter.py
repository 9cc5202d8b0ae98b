"""Exercise 12: a broker's registration with every NameServer (BrokerOuterAPI.registerBrokerAll).

Every broker of the lab builds BrokerOuterAPI(channels, namesrv_addrs) and calls
register_broker_all every 30 s (and when its topics change), unregister_broker_all when it shuts
down gracefully. `await channels.invoke(address, command, timeout)` sends one request and returns
the reply; it raises RemotingError when the NameServer refuses, or does not answer within
`timeout` seconds. The names you need are in lab.workshop.interfaces; the rules in the brief
(`nslab workshop show 12`).

Check: nslab workshop check 12
"""

from lab.workshop.interfaces import (LAB_SERIALIZE_TYPE, BrokerRegisterResult, RemotingError, RequestCode,
                                     ResponseCode, crc32, encode_register_body, request)


class BrokerOuterAPI:
    def __init__(self, channels, namesrv_addrs):
        self.channels = channels
        self.namesrv_addrs = list(namesrv_addrs)

    async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout):
        body = encode_register_body(topic_config_table, data_version, [], LAB_SERIALIZE_TYPE, compressed=compressed)
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "haServerAddr": broker.ha_server_addr,
                  "brokerId": broker.broker_id, "compressed": compressed, "bodyCrc32": crc32(body)}
        # The naive broker: one NameServer after the other, and the first that fails ends it.
        # TODO: every NameServer at once, each bounded by `timeout`; a failure costs only its own
        # NameServer; the result of one that answered SUCCESS, or None.
        result = None
        for address in self.namesrv_addrs:
            reply = await self.channels.invoke(address, request(RequestCode.REGISTER_BROKER, header, body), timeout)
            result = BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr"))
        return result

    async def unregister_broker_all(self, broker):
        # TODO: UNREGISTER_BROKER to every NameServer, one after the other, at most 3 s each.
        pass
