"""Python's % on a negative index: a round, but not from where RocketMQ's abs() starts.
expect-fail: test_failover_negative_index
expect-not: test_failover_tries_every_one
"""


def failover_order(addr_list, namesrv_index):
    n = len(addr_list)
    return [addr_list[(namesrv_index + k) % n] for k in range(1, n + 1)]
