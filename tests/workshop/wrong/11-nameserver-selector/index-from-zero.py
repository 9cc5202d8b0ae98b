"""Every client starts its index at 0.
expect-fail: test_the_index_starts_at_random
expect-not: test_a_dropped_choice_is_forgotten
"""

from _reference_11 import Reference


class NamesrvSelector(Reference):
    def __init__(self, rng):
        super().__init__(rng)
        self.namesrv_index = 0
