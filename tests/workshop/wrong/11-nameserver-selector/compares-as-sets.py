"""Compares the new list with the old as sets: [a, a, b] after [a, b] is no change, where 4.9.8
(another size) takes it.
expect-fail: test_follows_4_9_8_on_generated_sequences
expect-text: is a change: update_addr_list returns True
expect-not: test_a_changed_list_replaces_the_old
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def update_addr_list(self, addrs):
        if not addrs or set(addrs) == set(self.addr_list):
            return False
        shuffled = list(addrs)
        self.rng.shuffle(shuffled)
        self.addr_list = shuffled
        if self.chosen not in shuffled:
            self.chosen = None
        return True
