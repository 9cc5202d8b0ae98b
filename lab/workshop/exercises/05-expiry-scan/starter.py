"""Exercise 5: the NameServer's expiry scan (RouteInfoManager.scanNotActiveBroker's decision).

Every scanNotActiveBrokerInterval (10 s) the NameServer asks this function which brokers to drop.
broker_live_table maps a broker address to its BrokerLiveInfo; `last_update_timestamp` is when
its last heartbeat (registration) arrived, in seconds. Return the addresses to remove; do not
change the table (the caller removes them and closes their connections).

Check: nslab workshop check 5
"""


def expired_brokers(broker_live_table, expired_time, now):
    # TODO: which brokers have been silent for longer than expired_time?
    return []  # the naive scan: nothing ever expires
