"""Draws a new namesrv_index with every new list (4.9.8 draws it once, when the client starts).
expect-fail: test_follows_4_9_8_on_generated_sequences
expect-text: namesrv_index changes only when a NameServer is tried
expect-not: test_the_index_starts_at_random
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def update_addr_list(self, addrs):
        changed = super().update_addr_list(addrs)
        if changed:
            self.namesrv_index = self.rng.randrange(999)
        return changed
