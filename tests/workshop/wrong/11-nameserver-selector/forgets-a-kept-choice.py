"""Forgets its chosen NameServer whenever the list changes, even when it is still listed (4.9.8
forgets it only when it is gone): every change of the list moves the client off a NameServer
that works.
expect-fail: test_follows_4_9_8_on_generated_sequences
expect-text: a NameServer still listed stays chosen
expect-not: test_a_dropped_choice_is_forgotten
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def update_addr_list(self, addrs):
        changed = super().update_addr_list(addrs)
        if changed:
            self.chosen = None
        return changed
