"""Ignores expired_time: 120 s, hard-coded.
expect-fail: test_expiry_is_a_parameter
expect-not: test_expiry_every_silent_one_at_once
"""


def expired_brokers(broker_live_table, expired_time, now):
    return [addr for addr, live in broker_live_table.items() if live.last_update_timestamp + 120 < now]
