"""An empty address list replaces the held one (4.9.8 ignores it): the client is left with none.
expect-fail: test_an_empty_list_is_ignored
expect-not: test_a_changed_list_replaces_the_old
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def update_addr_list(self, addrs):
        if not addrs:
            changed = bool(self.addr_list)
            self.addr_list, self.chosen = [], None
            return changed
        return super().update_addr_list(addrs)
