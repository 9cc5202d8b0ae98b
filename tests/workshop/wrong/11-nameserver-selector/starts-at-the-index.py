"""Fails over starting at namesrv_index itself: the NameServer that just failed comes first again.
expect-fail: test_failover_is_one_round_after_the_index
expect-not: test_sticky_while_its_channel_is_open
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def candidates(self):
        for _ in range(len(self.addr_list)):
            addr = self.addr_list[abs(self.namesrv_index) % len(self.addr_list)]
            self.namesrv_index += 1
            self.chosen = addr
            yield addr
