"""register_broker returns None: the NameServer cannot answer the broker.
expect-fail: test_registration_fills_every_table
"""

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def register_broker(self, *args):
        super().register_broker(*args)
