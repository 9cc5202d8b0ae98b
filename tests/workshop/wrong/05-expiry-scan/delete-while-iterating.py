"""Removes the brokers itself, from the table it is iterating.
expect-fail: test_expiry_leaves_the_table_alone
expect-text: dictionary changed size during iteration
expect-text: delete-while-iterating.py
"""


def expired_brokers(broker_live_table, expired_time, now):
    gone = []
    for addr, live in broker_live_table.items():
        if live.last_update_timestamp + expired_time < now:
            del broker_live_table[addr]
            gone.append(addr)
    return gone
