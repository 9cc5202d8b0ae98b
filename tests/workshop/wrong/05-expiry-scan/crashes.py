"""Divides by the number of silent brokers: raises inside every NameServer's scan.
expect-text: your code raised
expect-text: ZeroDivisionError
expect-text: crashes.py", line 10
expect-not-text: ExceptionGroup
"""


def expired_brokers(broker_live_table, expired_time, now):
    share = 1 / len([a for a, live in broker_live_table.items() if live.last_update_timestamp + expired_time < now])
    return [addr for addr in broker_live_table if share]
