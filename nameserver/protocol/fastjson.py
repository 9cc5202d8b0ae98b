"""JSON as fastjson 1.2 writes and reads it.

Two quirks matter on the wire. fastjson writes a Map with non-String keys with the keys *unquoted*
(`{0:"10.0.0.5:10911"}`), which is not JSON; RocketMQ 4.9.4+ switches to quoted keys, sorted maps
and \\uXXXX escapes (BrowserCompatible) for new clients. And readers must accept both.

The one writer for every body nslab sends, the NameServer's and the broker's admin bodies
(lab/broker/admin.py): a dict (or Bean) is a Java bean, its fields sorted and null fields left out;
a JavaMap a Java map in its iteration order; a JMap a map whose keys need not be hashable (a
MessageQueue bean as the key of ConsumeStats' offsetTable, written as a JSON object:
`{{"brokerName":…}:{…}}`, not JSON, but what every RocketMQ tool parses); a float as Java's
Double.toString (`0.0`, `12.5`, `1.0E-4`).
"""

from __future__ import annotations

import json
import math
import re


class JavaMap(dict):
    """A Java Map whose entries are already in the Java map's iteration order (see
    nameserver/java_order.py). fastjson's default features sort a bean's fields (SortField) but
    write a map as it iterates; only MapSortField (part of `standard`) sorts maps too. A plain
    dict stands for a bean, or for a map whose order nslab does not emulate, and is always sorted."""

    __slots__ = ()


class Bean(dict):
    """A Java object: its fields sorted, None fields left out (what a plain dict is too; the name
    says which a broker's admin body means)."""

    __slots__ = ()


class JMap(list):
    """A Java map as (key, value) pairs in its iteration order, for keys a dict cannot hold (a bean):
    each key written as a value is (a string quoted, a number bare, a bean as an object), and a None
    value as null."""

    __slots__ = ()


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


# fastjson 1.2.x SerializeWriter.writeStringWithDoubleQuote, IOUtils.specicalFlags_doubleQuotes and
# replaceChars. Hex digits are upper case (IOUtils.DIGITS); Python's json writes lower case.
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
# Default features: the short escapes above, \uXXXX for the other C0 controls, for U+007F..U+00A0
# and for U+2028; everything else, non-ASCII included, as is (UTF-8 on the wire). '/' as is.
# (The U+007F..U+00A0 and U+2028 rules are read from fastjson 1.2.x sources, not checked against
# 1.2.69 itself; they touch only those rare characters.)
_PLAIN_SPECIAL = re.compile('["\\\\\x00-\x1f\x7f-\xa0\u2028]')
# BrowserCompatible: the short escapes plus '/' -> '\\/', \uXXXX for every other char < 32 or
# >= 127 (a character beyond the BMP as its two surrogates, as Java holds it).
_BROWSER_SPECIAL = re.compile('["\\\\/\x00-\x1f\x7f-\U0010ffff]')


def _unicode_escape(ch: str) -> str:
    code = ord(ch)
    if code > 0xFFFF:  # a UTF-16 surrogate pair in Java
        code -= 0x10000
        return f"\\u{0xD800 | code >> 10:04X}\\u{0xDC00 | code & 0x3FF:04X}"
    return f"\\u{code:04X}"


def _plain_escape(m: re.Match) -> str:
    ch = m.group(0)
    return _SHORT.get(ch) or _unicode_escape(ch)


def _browser_escape(m: re.Match) -> str:
    ch = m.group(0)
    if ch == "/":
        return "\\/"
    return _SHORT.get(ch) or _unicode_escape(ch)


def quote_plain(s: str) -> str:
    """A string as fastjson writes it with its default features."""
    return '"' + _PLAIN_SPECIAL.sub(_plain_escape, s) + '"'


def quote_browser_compatible(s: str) -> str:
    """A string as fastjson writes it with SerializerFeature.BrowserCompatible."""
    return '"' + _BROWSER_SPECIAL.sub(_browser_escape, s) + '"'


def dumps(obj: object, *, standard: bool = True) -> str:
    """Serialise like fastjson: bean fields sorted, null map values omitted, no spaces.

    standard=False is fastjson's default (RemotingSerializable.encode): integer map keys unquoted,
    text as is (UTF-8 on the wire), a JavaMap in its own order.
    standard=True is what 4.9.4+ uses for route data only (BrowserCompatible, QuoteFieldNames,
    MapSortField): keys quoted, non-ASCII escaped, every map sorted.
    """
    out: list[str] = []
    _write(obj, out, quote_browser_compatible if standard else quote_plain, standard)
    return "".join(out)


def encode(obj: object) -> bytes:
    """RemotingSerializable.encode: fastjson's default text (standard=False) in UTF-8."""
    return dumps(obj, standard=False).encode()


def _write(obj: object, out: list[str], quote, standard: bool) -> None:
    if isinstance(obj, str):
        out.append(quote(obj))
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif obj is None:
        out.append("null")
    elif isinstance(obj, int):
        out.append(str(obj))
    elif isinstance(obj, float):
        out.append(java_double(obj))
    elif isinstance(obj, JMap):
        out.append("{")
        for i, (key, value) in enumerate(obj):
            if i:
                out.append(",")
            _write(key, out, quote, standard)
            out.append(":")
            _write(value, out, quote, standard)
        out.append("}")
    elif isinstance(obj, dict):
        out.append("{")
        first = True
        for key in obj if type(obj) is JavaMap and not standard else sorted(obj):
            value = obj[key]
            if value is None:
                continue
            if not first:
                out.append(",")
            first = False
            if isinstance(key, str):
                out.append(quote(key))
            elif standard:
                out.append(f'"{key}"')
            else:
                out.append(str(key))
            out.append(":")
            _write(value, out, quote, standard)
        out.append("}")
    elif isinstance(obj, (list, tuple)):  # not a set: it has no order; a HashSet comes as a list in Java's
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _write(item, out, quote, standard)
        out.append("]")
    else:
        raise TypeError(f"cannot serialise {type(obj).__name__}")


# A JSON string (skipped as is) or a bare integer used as an object key.
_BARE_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|(?<=[{,])(\s*)(-?\d+)(\s*)(?=:)')


def _quote_bare_key(m: re.Match) -> str:
    if m.group(2) is None:
        return m.group(0)
    return f'{m.group(1)}"{m.group(2)}"{m.group(3)}'


def loads(data: bytes | str) -> object:
    """Parse JSON, also fastjson's legacy form with unquoted integer keys."""
    try:
        return json.loads(data)
    except ValueError:
        pass
    text = data.decode() if isinstance(data, (bytes, bytearray)) else data
    return json.loads(_BARE_KEY.sub(_quote_bare_key, text))
