"""Keeps talking to a NameServer the new address list no longer names.
expect-fail: test_a_dropped_choice_is_forgotten
expect-not: test_a_changed_list_replaces_the_old
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def update_addr_list(self, addrs):
        chosen = self.chosen
        changed = super().update_addr_list(addrs)
        self.chosen = chosen
        return changed
