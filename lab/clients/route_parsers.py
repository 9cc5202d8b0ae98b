"""How clients in other languages read a JSON route body: which brokerAddrs dialect they accept
(rocketmq-spec §3.3). A NameServer writes the keys of `brokerAddrs` (a Java Map<Long, String>)
unquoted, fastjson's legacy `{0:"addr"}`, for a client of version < 401, and quoted, `{"0":"addr"}`
(standard JSON), from 4.9.4 on for a client of version >= 401.

  fastjson  Java clients: both forms. The lab's default (its clients then speak msgpack).
  strict    a standard JSON parser (Go's encoding/json, Python's json): quoted keys only; the
            legacy form is not JSON at all (apache/rocketmq#3369).
  go-v2     rocketmq-client-go v2's own brokerAddrs parser: it splits the object on "," and the
            first ":" and parses the key as an integer, ignoring the error: a quoted key becomes
            id 0, so every address is id 0 and the last wins — a slave taken for the master
            (apache/rocketmq#4471, rocketmq-client-go#845).

A client with a parser other than fastjson asks for routes as a JSON client of its version does.
"""

from __future__ import annotations

import json
import re

from nameserver import bodies
from nameserver.bodies import BodyError
from nameserver.protocol import SerializeType
from nameserver.protocol.codes import CURRENT_VERSION

# The version each sends: a strict client is a current one (it gets quoted keys); go-v2 says 317.
VERSION = {"strict": CURRENT_VERSION, "go-v2": 317}

_BROKER_ADDRS = re.compile(rb'"brokerAddrs":\{([^{}]*)\}')


def load_route(body: bytes, parser: str) -> object:
    """A GET_ROUTEINFO_BY_TOPIC body as `parser` reads it; BodyError when it cannot."""
    if parser == "fastjson":
        return bodies.load(body, SerializeType.JSON)
    if parser == "go-v2":
        body = _BROKER_ADDRS.sub(lambda m: b'"brokerAddrs":' + json.dumps(go_broker_addrs(m.group(1))).encode(), body)
    try:
        return json.loads(body)
    except ValueError as e:
        raise BodyError(f"not standard JSON ({parser} parser): {e}") from None


def go_broker_addrs(text: bytes) -> dict[str, str]:
    """The inside of a brokerAddrs object as rocketmq-client-go v2 reads it: {id: address}."""
    addrs: dict[str, str] = {}
    for entry in text.decode().split(","):
        key, _, value = entry.partition(":")
        try:
            broker_id = int(key.strip())
        except ValueError:
            broker_id = 0  # strconv.ParseInt's error ignored: a quoted key is id 0
        addrs[str(broker_id)] = value.strip().strip('"')
    return addrs
