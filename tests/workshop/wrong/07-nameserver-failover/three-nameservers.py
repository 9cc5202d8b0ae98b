"""Assumes three NameServers.
expect-fail: test_failover_tries_every_one
"""


def failover_order(addr_list, namesrv_index):
    return [addr_list[(abs(namesrv_index) + k) % len(addr_list)] for k in range(1, 4)]
