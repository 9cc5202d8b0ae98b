"""The scan removes the expired brokers but returns None: the NameServer cannot close their channels.
expect-fail: test_scan_expires_the_silent_only
expect-text: your code broke its contract
expect-text: scan_not_active_broker() returned None
"""

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def scan_not_active_broker(self, now):
        super().scan_not_active_broker(now)
