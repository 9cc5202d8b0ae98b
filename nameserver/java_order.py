"""The order in which a Java (8+) HashMap or HashSet iterates, for the places it reaches the wire.

RocketMQ 4.9.8 keeps the NameServer's tables in HashMaps and serialises them with plain fastjson,
which writes a map in its iteration order (only MapSortField, used for route data alone, sorts).
Topic lists go out through a fresh HashSet. So a Java NameServer's topic lists, cluster info and KV
tables come out in hash order, and "the first cluster holding a broker name" is the first in hash
order. nslab keeps plain dicts (insertion order) and derives Java's order from them when it answers.

How a HashMap iterates (OpenJDK 8-21, java.util.HashMap):
- hash(key) = h ^ (h >>> 16), h = key.hashCode(); the bucket is hash & (capacity - 1);
- iteration walks buckets 0..capacity-1, and within a bucket follows its chain;
- a new key is appended to its bucket's chain; replacing a value keeps the key's place; a removal
  unlinks it; a resize splits every chain into two, each keeping its relative order;
- so within a bucket, keys stay in insertion order: Java's order is the insertion order (a
  Python dict's order) stably sorted by bucket index -- given the table's current capacity;
- the capacity starts at tableSizeFor(initialCapacity) (16 by default), doubles whenever the size
  exceeds 0.75 x capacity, and never shrinks: it depends on the largest size the map ever had.

Not emulated (see README, "Choices where nslab departs"): a bucket of 9+ keys. Java then resizes a
table smaller than 64 instead, or turns the bucket into a tree whose iteration order differs. With
String.hashCode and a load of at most 0.75 that needs deliberately colliding names.
"""

from __future__ import annotations

from operator import mul
from typing import Callable, Hashable, Iterable

DEFAULT_CAPACITY = 16
_MASK32 = 0xFFFFFFFF

_string_hashes: dict[str, int] = {}
_powers_of_31: dict[int, tuple[int, ...]] = {}


def _powers(n: int) -> tuple[int, ...]:
    """31**(n-1), ..., 31, 1, each mod 2**32."""
    powers = _powers_of_31.get(n)
    if powers is None:
        powers = tuple(pow(31, n - 1 - i, 1 << 32) for i in range(n))
        if n <= 1024:
            _powers_of_31[n] = powers
    return powers


def _compute_string_hash(s: str) -> int:
    # h = 31*h + c over the code units is the sum of c_i * 31**(n-1-i) mod 2**32: for ASCII,
    # map(mul) sums it in C, several times faster than a loop over the characters.
    if s.isascii():
        data = s.encode("ascii")
        return sum(map(mul, data, _powers(len(data)))) & _MASK32
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _MASK32
    return h


def string_hash(s: str) -> int:
    """java.lang.String.hashCode() as an unsigned 32-bit int: h = 31*h + c over UTF-16 code
    units (a character beyond the BMP counts as its surrogate pair). Memoised: topic lists hash
    every topic name on every request."""
    h = _string_hashes.get(s)
    if h is None:
        h = _compute_string_hash(s)
        if len(_string_hashes) < 1_000_000:
            _string_hashes[s] = h
    return h


def string_hash_once(s: str) -> int:
    """string_hash, leaving the memo as it is: for names hashed once (a registration's topics,
    whose order is computed on their way in), which would otherwise stay in memory twice."""
    h = _string_hashes.get(s)
    return _compute_string_hash(s) if h is None else h


def long_hash(v: int) -> int:
    """java.lang.Long.hashCode(): (int)(v ^ (v >>> 32)), unsigned 32-bit."""
    v &= 0xFFFFFFFFFFFFFFFF
    return (v ^ (v >> 32)) & _MASK32


def spread(h: int) -> int:
    """HashMap.hash(): the high 16 bits folded into the low ones."""
    return (h ^ (h >> 16)) & _MASK32


def table_size_for(cap: int) -> int:
    """HashMap.tableSizeFor: the smallest power of two >= cap (at least 1)."""
    n = 1
    while n < cap:
        n <<= 1
    return n


def grown_capacity(capacity: int, size: int) -> int:
    """The table length once a map of `capacity` buckets has grown to `size` entries, inserted one
    by one (putVal: resize when ++size > threshold, threshold = 0.75 x capacity)."""
    while size > capacity * 3 // 4:
        capacity <<= 1
    return capacity


def capacity_for(size: int, initial: int = DEFAULT_CAPACITY) -> int:
    """The table length of `new HashMap(initial)` (or `new HashSet()`) after `size` insertions."""
    return grown_capacity(table_size_for(initial), size)


def presized_capacity(size: int) -> int:
    """The table length of a map filled by putAll into an empty, table-less map: HashMap(Map),
    HashMap.clone(), putAll on a fresh map (putMapEntries: tableSizeFor((int)(s / 0.75f + 1)))."""
    return table_size_for(int(size / 0.75 + 1.0))


def hashmap_order(keys: Iterable[Hashable], capacity: int | None = None,
                  hash: Callable[[Hashable], int] = string_hash) -> list:
    """The iteration order of a Java HashMap whose keys were inserted in the order given (each key
    once; removed keys left out), with `capacity` buckets (default: as grown by these insertions
    into a default-sized map). Keys are Strings unless `hash` says otherwise (long_hash)."""
    keys = list(keys)
    if len(keys) < 2:  # the common route: one broker name, one address
        return keys
    if capacity is None:
        capacity = capacity_for(len(keys))
    mask = capacity - 1
    # sorted() is stable: keys sharing a bucket keep their insertion order.
    return sorted(keys, key=lambda k: spread(hash(k)) & mask)


def hashset_order(items: Iterable[Hashable], hash: Callable[[Hashable], int] = string_hash) -> list:
    """What a fresh `new HashSet<>()` iterates after add/addAll of `items` in the order given
    (duplicates ignored, as add ignores them): how RocketMQ's TopicList and route broker-name sets
    come out."""
    return hashmap_order(dict.fromkeys(items), None, hash)


# --- ConcurrentHashMap ------------------------------------------------------------------------------
#
# 4.9.8 decodes a registration's topicConfigTable into a `new ConcurrentHashMap()` (fastjson's map
# for a ConcurrentMap field; the compressed decoder fills the field's own) and walks it to fill
# topicQueueTable; a Java 9+ Properties (getNamesrvConfig's text) is one too. It differs from a
# HashMap where keys share a bucket:
# - spread(h) = (h ^ (h >>> 16)) & 0x7fffffff, bucket = spread & (n - 1), iteration walks buckets
#   0..n-1; a new key is appended to its bucket's chain;
# - it grows when the count, after an insertion, reaches sizeCtl = 0.75 n (a HashMap: exceeds);
# - growing splits each chain at its last run of keys going the same way (lastRun): that run
#   keeps its order, and every key before it is pushed onto the front of its half, so those
#   come out reversed.


def concurrent_hashmap_order(keys: Iterable[Hashable], capacity: int = DEFAULT_CAPACITY,
                             hash: Callable[[Hashable], int] = string_hash) -> list:
    """The iteration order of a ConcurrentHashMap whose table starts at `capacity` buckets after
    put of `keys` in the order given (each key once)."""
    keys = list(keys)
    if len(keys) < 2:
        return keys
    # A node is one int, spread hash << 32 | position in keys: a first registration of 10,000
    # topics goes through here, and tuples per node cost twice as much. A bucket is None, one
    # node, or a list of them.
    n = capacity
    size_ctl = n - (n >> 2)
    table: list = [None] * n
    for pos, key in enumerate(keys):
        h = hash(key)
        node = ((h ^ (h >> 16)) & 0x7FFFFFFF) << 32 | pos
        index = (node >> 32) & (n - 1)
        bucket = table[index]
        if bucket is None:
            table[index] = node
        elif type(bucket) is int:
            table[index] = [bucket, node]
        else:
            bucket.append(node)
        while pos + 1 >= size_ctl:  # addCount: the count has reached sizeCtl
            table = _transfer(table, n)
            n <<= 1
            size_ctl = n - (n >> 2)
    out = []
    for bucket in table:
        if bucket is None:
            continue
        if type(bucket) is int:
            out.append(keys[bucket & 0xFFFFFFFF])
        else:
            out.extend(keys[node & 0xFFFFFFFF] for node in bucket)
    return out


def _transfer(table: list, n: int) -> list:
    """ConcurrentHashMap.transfer from n to 2n buckets."""
    grown: list = [None] * (2 * n)
    bit = n << 32
    for index, bucket in enumerate(table):
        if bucket is None:
            continue
        if type(bucket) is int:
            grown[index + n if bucket & bit else index] = bucket
            continue
        run_bit, last_run = bucket[0] & bit, 0
        for i in range(1, len(bucket)):
            if bucket[i] & bit != run_bit:
                run_bit, last_run = bucket[i] & bit, i
        lo = [node for node in bucket[:last_run] if not node & bit]
        hi = [node for node in bucket[:last_run] if node & bit]
        lo.reverse()  # each was pushed onto the front of its half
        hi.reverse()
        (hi if run_bit else lo).extend(bucket[last_run:])
        if lo:
            grown[index] = lo
        if hi:
            grown[index + n] = hi
    return grown
