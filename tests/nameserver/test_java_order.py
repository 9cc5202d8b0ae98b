"""Java's HashMap/HashSet iteration order (nameserver/java_order.py).

Expected values come from Java's definitions, worked by hand where short, and the orders marked
"JDK" were printed by java.util.HashMap/HashSet on OpenJDK 17 (the helper was also checked against
400 random insert/remove sequences there, String and Long keys, initial capacities 1-1024, clones).
"""

from __future__ import annotations

import pytest

from nameserver.java_order import (capacity_for, grown_capacity, hashmap_order, hashset_order, long_hash,
                                   presized_capacity, spread, string_hash, table_size_for)


def signed(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize("s, expected", [
    ("", 0),
    ("a", 97),
    ("ab", 97 * 31 + 98),
    ("Aa", 65 * 31 + 97),  # 2112, the classic collision with "BB"
    ("BB", 66 * 31 + 66),
    ("broker-a", 372697965),
    ("broker-b", 372697966),  # the last char differs by one, so does the hash
    ("TopicTest", -1902610879),  # overflows int: Java wraps
    ("主题", 0x4E3B * 31 + 0x9898),  # UTF-16 code units
    ("😀", 0xD83D * 31 + 0xDE00),  # beyond the BMP: its surrogate pair
])
def test_string_hash_is_java_string_hashcode(s, expected):
    assert signed(string_hash(s)) == expected


def test_long_hash_folds_the_high_word():
    assert [long_hash(v) for v in (0, 1, 16, 1 << 32, -1)] == [0, 1, 16, 1, 0]


def test_spread_folds_the_high_half():
    # "broker-a" is 0x1636EB6D: 0xEB6D ^ 0x1636 = 0xFD5B, bucket 11 of 16.
    assert spread(0x1636EB6D) == 0x1636FD5B
    assert spread(0x1636EB6D) & 15 == 11


@pytest.mark.parametrize("size, initial, expected", [
    (0, 16, 16), (12, 16, 16), (13, 16, 32), (24, 16, 32), (25, 16, 64),  # threshold 0.75 x length
    (768, 1024, 1024), (769, 1024, 2048),  # topicQueueTable: new HashMap(1024)
    (24, 32, 32), (25, 32, 64),  # clusterAddrTable: new HashMap(32)
    (1, 5, 8),  # tableSizeFor rounds an odd initial capacity up
])
def test_capacity_grows_by_load_factor(size, initial, expected):
    assert capacity_for(size, initial) == expected


def test_capacity_helpers():
    assert [table_size_for(n) for n in (0, 1, 2, 3, 16, 17)] == [1, 1, 2, 4, 16, 32]
    assert grown_capacity(32, 2) == 32  # never shrinks
    # putAll into a table-less map / clone(): tableSizeFor((int)(s / 0.75 + 1))
    assert [presized_capacity(n) for n in (1, 2, 3, 11, 12)] == [2, 4, 8, 16, 32]


def test_hashmap_order_is_by_bucket():
    # JDK: broker-a/b/c inserted in that order iterate as broker-b (bucket 8), broker-c (9), broker-a (11).
    assert hashmap_order(["broker-a", "broker-b", "broker-c"]) == ["broker-b", "broker-c", "broker-a"]
    # JDK, new HashMap(32): "C2" then "C1" iterate C1 (bucket 14), C2 (15).
    assert hashmap_order(["C2", "C1"], 32) == ["C1", "C2"]


def test_a_shared_bucket_keeps_insertion_order():
    # JDK: "Aa" and "BB" share hashCode 2112; a HashSet iterates them as added.
    assert hashset_order(["Aa", "BB"]) == ["Aa", "BB"]
    assert hashset_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert hashset_order(["BB", "Aa", "BB"]) == ["BB", "Aa"]  # add ignores a duplicate


def test_the_order_depends_on_the_capacity_the_map_once_had():
    # JDK: {C1, broker-a} iterates broker-a, C1 in 16 buckets (11 < 14); after the map held 13
    # entries (32 buckets) and lost 11, it iterates C1 (14), broker-a (27).
    assert hashmap_order(["C1", "broker-a"]) == ["broker-a", "C1"]
    assert hashmap_order(["C1", "broker-a"], capacity_for(13)) == ["C1", "broker-a"]


def test_long_keys_and_clone():
    # JDK: 16, 1, 0 put into a HashMap<Long, String> iterate 16, 0 (bucket 0, in insertion
    # order), 1.
    assert hashmap_order([16, 1, 0], None, long_hash) == [16, 0, 1]
    # JDK: {0, 1, 8} iterates 0, 1, 8, but its clone() is presized to 8 buckets: 0, 8, 1.
    source = hashmap_order([0, 1, 8], None, long_hash)
    assert source == [0, 1, 8]
    assert hashmap_order(source, presized_capacity(3), long_hash) == [0, 8, 1]


def test_non_ascii_keys():
    # JDK: a HashSet of "TopicTest" (bucket 9) and "主题" (bucket 7) iterates 主题 first.
    assert hashset_order(["TopicTest", "主题"]) == ["主题", "TopicTest"]
