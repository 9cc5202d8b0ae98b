"""Failover goes round and round the list instead of one round (4.9.8 throws after one round).
expect-fail: test_follows_4_9_8_on_generated_sequences
expect-text: one round: at most
expect-not: test_failover_is_one_round_after_the_index
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def candidates(self):
        while self.addr_list:
            self.namesrv_index += 1
            addr = self.addr_list[abs(self.namesrv_index) % len(self.addr_list)]
            self.chosen = addr
            yield addr
