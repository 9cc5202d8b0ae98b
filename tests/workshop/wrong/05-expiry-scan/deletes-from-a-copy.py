"""Removes the brokers itself (iterating a copy, so nothing raises): the caller finds them gone.
expect-fail: test_expiry_leaves_the_table_alone
expect-not: test_expiry_is_a_parameter
"""


def expired_brokers(broker_live_table, expired_time, now):
    gone = []
    for addr in list(broker_live_table):
        if broker_live_table[addr].last_update_timestamp + expired_time < now:
            del broker_live_table[addr]
            gone.append(addr)
    return gone
