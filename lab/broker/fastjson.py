"""JSON text as RocketMQ 4.9.8's RemotingSerializable.encode writes it: fastjson 1.2.69's
JSON.toJSONString with its default features. Pure functions.

What that means on the wire, and what the admin bodies (lab/broker/admin.py) rely on:
- a bean's fields in alphabetical order (SortField), null fields left out, enums by name;
- a map in its Java iteration order: for a HashMap / HashSet / ConcurrentHashMap that is bucket
  order — hash, spread, masked by the table size — then insertion order within a bucket;
- map keys that are not strings written as they are: numbers unquoted, a bean key (MessageQueue in
  ConsumeStats' and TopicStatsTable's offsetTable) as a JSON object — `{{"brokerName":…}:{…}}`,
  not valid JSON, but what every RocketMQ tool parses;
- strings with `"`, `\\` and control characters escaped, other text as raw UTF-8 (plain
  toJSONString, not the browser-compatible escaping of route data);
- a double as Java's Double.toString: `0.0`, `12.5`, `1.0E-4`.

Build values with `Bean` (a Java object: fields sorted, None dropped) and `JMap` (a Java map:
(key, value) pairs in the order given — put them through `hash_order` first).
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, TypeVar

from nameserver.java_order import capacity_for, hashmap_order, string_hash
from nameserver.protocol.fastjson import quote_plain  # the NameServer's bodies escape text alike

K = TypeVar("K")


class Bean(dict):
    """A Java object: written with its fields sorted and None fields left out."""


class JMap(list):
    """A Java map: (key, value) pairs, written in the order given."""


# --- Java hash codes and map order (nameserver/java_order.py models HashMap) -------------------------

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


# --- writing ----------------------------------------------------------------------------------------

def java_double(x: float) -> str:
    """Double.toString: plain decimals in [1e-3, 1e7), else d.dddE±n; always a fraction digit."""
    if math.isnan(x) or math.isinf(x):
        return "null"  # fastjson writes a non-finite double as null
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(float(x))
        return text if "e" not in text else f"{x:.17f}".rstrip("0")
    mantissa, _, exponent = f"{x:.16e}".partition("e")
    digits = repr(float(f"{float(mantissa):.15g}"))  # shortest mantissa that reads back
    return f"{digits}E{int(exponent)}"


def _write(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(java_double(value))
    elif isinstance(value, str):
        out.append(quote_plain(value))
    elif isinstance(value, JMap):
        out.append("{")
        for i, (k, v) in enumerate(value):
            if i:
                out.append(",")
            _write(k, out)  # a string key quoted, a number bare, a bean as an object
            out.append(":")
            _write(v, out)
        out.append("}")
    elif isinstance(value, dict):  # a Bean, or any dict taken as one
        out.append("{")
        first = True
        for k in sorted(value):
            if value[k] is None:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(quote_plain(k))
            out.append(":")
            _write(value[k], out)
        out.append("}")
    elif isinstance(value, (list, tuple, set, frozenset)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _write(v, out)
        out.append("]")
    else:
        raise TypeError(f"no fastjson form for {type(value).__name__}")


def dumps(value: object) -> str:
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def encode(value: object) -> bytes:
    """RemotingSerializable.encode: the JSON text in UTF-8."""
    return dumps(value).encode()
