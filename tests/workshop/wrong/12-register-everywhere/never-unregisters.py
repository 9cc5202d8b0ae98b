"""Shuts down without a word to the NameServers.
expect-fail: test_unregisters_from_each_in_turn
expect-not: test_registers_with_every_nameserver
"""

from _reference_12 import Reference


class BrokerOuterAPI(Reference):
    async def unregister_broker_all(self, broker):
        pass
