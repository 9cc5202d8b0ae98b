"""Every scan drops every broker, silent or not.
expect-fail: test_expiry_only_the_silent
expect-fail: a live broker is never dropped
"""


def expired_brokers(broker_live_table, expired_time, now):
    return list(broker_live_table)
