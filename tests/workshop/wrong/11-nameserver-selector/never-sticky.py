"""Never keeps a NameServer: every request fails over to the next one.
expect-fail: test_sticky_while_its_channel_is_open
expect-not: test_failover_is_one_round_after_the_index
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def is_sticky(self, channel_ok):
        return False
