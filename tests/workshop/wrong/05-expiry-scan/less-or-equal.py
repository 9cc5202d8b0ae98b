"""Expires a broker heard exactly expired_time ago.
expect-fail: test_expiry_boundary
expect-not: test_expiry_only_the_silent
"""


def expired_brokers(broker_live_table, expired_time, now):
    return [addr for addr, live in broker_live_table.items() if live.last_update_timestamp + expired_time <= now]
