"""The Java maps in the bodies a broker or a client writes (the admin bodies, a consumer's running
info), in the order a JVM iterates them.

A HashMap / HashSet / ConcurrentHashMap iterates in bucket order — hash, spread, masked by the
table size — then insertion order within a bucket (nameserver/java_order.py models HashMap). These
give that order for their keys; nameserver/protocol/fastjson.py writes the result (a JMap)
as fastjson does.
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

from nameserver.java_order import capacity_for, hashmap_order, string_hash
from nameserver.protocol.fastjson import JMap

K = TypeVar("K")


def message_queue_hash(topic: str, broker_name: str, queue_id: int) -> int:
    """MessageQueue.hashCode: 31-based over brokerName, queueId, topic (unsigned 32-bit, as
    java_order's hashes are)."""
    return (31 * (31 * (31 + string_hash(broker_name)) + queue_id) + string_hash(topic)) & 0xFFFFFFFF


def hash_order(keys: Iterable[K], hash_of: Callable[[K], int] = string_hash, *,
               initial_capacity: int = 16) -> list[K]:
    """The iteration order of a java.util.HashMap (or HashSet) of `initial_capacity` after putting
    `keys` in this order. ConcurrentHashMap's order is the same for the sizes the lab meets."""
    keys = list(dict.fromkeys(keys))
    return hashmap_order(keys, capacity_for(len(keys), initial_capacity), hash_of)


def hash_map(items: Iterable[tuple[K, object]], hash_of: Callable[[K], int] = string_hash, *,
             initial_capacity: int = 16) -> JMap:
    """A HashMap of these (key, value) puts, in its iteration order."""
    table = dict(items)
    return JMap((k, table[k]) for k in hash_order(table, hash_of, initial_capacity=initial_capacity))
