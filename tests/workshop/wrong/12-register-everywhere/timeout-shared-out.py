"""Every NameServer at once, but the timeout split between them (timeout / n each): with three
NameServers a registration gives up on a healthy but busy one after 2 s.
expect-fail: test_every_call_is_bounded_by_the_timeout
"""

from _reference_12 import Reference


class BrokerOuterAPI(Reference):
    async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout):
        return await super().register_broker_all(broker, topic_config_table, data_version, compressed=compressed,
                                                 timeout=timeout / max(1, len(self.namesrv_addrs)))
