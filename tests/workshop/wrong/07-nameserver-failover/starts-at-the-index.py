"""One round, but from namesrv_index itself: the failed NameServer is tried first again.
expect-fail: test_failover_starts_after_the_index
expect-not: test_failover_tries_every_one
"""


def failover_order(addr_list, namesrv_index):
    n = len(addr_list)
    return [addr_list[abs(namesrv_index + k) % n] for k in range(n)]
