"""Reshuffles at every address-list update, changed or not.
expect-fail: test_a_changed_list_replaces_the_old
expect-not: test_sticky_while_its_channel_is_open
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def update_addr_list(self, addrs):
        shuffled = list(addrs)
        self.rng.shuffle(shuffled)
        self.addr_list = shuffled
        if self.chosen not in shuffled:
            self.chosen = None
        return True
