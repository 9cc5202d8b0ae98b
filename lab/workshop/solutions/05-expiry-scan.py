"""Reference solution for exercise 5."""


def expired_brokers(broker_live_table, expired_time, now):
    # Strictly older than the expiry: a broker heard exactly 120 s ago survives this scan.
    return [addr for addr, live in broker_live_table.items() if live.last_update_timestamp + expired_time < now]
