"""Compares sorted lists: [a, b, b] after [a, a, b] is a change (a reshuffle), where 4.9.8 (same
size, no NameServer not listed before) keeps its list.
expect-fail: test_follows_4_9_8_on_generated_sequences
expect-text: are no change: update_addr_list returns False
expect-not: test_a_changed_list_replaces_the_old
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def update_addr_list(self, addrs):
        if not addrs or sorted(addrs) == sorted(self.addr_list):
            return False
        shuffled = list(addrs)
        self.rng.shuffle(shuffled)
        self.addr_list = shuffled
        if self.chosen not in shuffled:
            self.chosen = None
        return True
