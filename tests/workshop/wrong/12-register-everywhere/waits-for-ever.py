"""Every NameServer at once, but no bound on a call: a NameServer that swallows packets holds every
later registration back until it expires the broker and closes the channel (~95 s here, under
ns-1's 120 s expiry: the scenario survives it, the unit test does not).
expect-fail: test_every_call_is_bounded_by_the_timeout
expect-not: test_a_failing_nameserver_costs_only_itself
"""

from _reference_12 import Reference


class BrokerOuterAPI(Reference):
    async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout):
        return await super().register_broker_all(broker, topic_config_table, data_version, compressed=compressed,
                                                 timeout=10 ** 9)
