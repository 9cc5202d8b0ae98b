"""Expires the first silent broker it finds, one per scan.
expect-fail: test_expiry_every_silent_one_at_once
expect-not: test_expiry_is_a_parameter
"""


def expired_brokers(broker_live_table, expired_time, now):
    for addr, live in broker_live_table.items():
        if live.last_update_timestamp + expired_time < now:
            return [addr]
    return []
