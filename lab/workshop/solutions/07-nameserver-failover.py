"""Reference solution for exercise 7."""


def failover_order(addr_list, namesrv_index):
    n = len(addr_list)
    return [addr_list[abs(namesrv_index + k) % n] for k in range(1, n + 1)]
