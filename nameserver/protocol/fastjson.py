"""JSON as fastjson 1.2 writes and reads it.

Two quirks matter on the wire. fastjson writes a Map with non-String keys with the keys *unquoted*
(`{0:"10.0.0.5:10911"}`), which is not JSON; RocketMQ 4.9.4+ switches to quoted keys, sorted maps
and \\uXXXX escapes (BrowserCompatible) for new clients. And readers must accept both.
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring, encode_basestring_ascii


def dumps(obj: object, *, standard: bool = True) -> str:
    """Serialise like fastjson: keys sorted, null map values omitted, no spaces.

    standard=False is fastjson's default (integer map keys unquoted, UTF-8 as is);
    standard=True is the BrowserCompatible form (keys quoted, non-ASCII escaped).
    """
    out: list[str] = []
    _write(obj, out, encode_basestring_ascii if standard else encode_basestring, standard)
    return "".join(out)


def _write(obj: object, out: list[str], quote, standard: bool) -> None:
    if isinstance(obj, str):
        out.append(quote(obj))
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif obj is None:
        out.append("null")
    elif isinstance(obj, (int, float)):
        out.append(repr(obj) if isinstance(obj, float) else str(obj))
    elif isinstance(obj, dict):
        out.append("{")
        first = True
        for key in sorted(obj):
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
    elif isinstance(obj, (list, tuple)):
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
