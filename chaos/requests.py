"""Faults on one kind of RocketMQ request, not on the whole link. Pure: no I/O; `now` and the RNG
are passed in.

A request fault sits on a link as a toxic does and acts on the requests of one code that cross it
(and on their replies): `drop` the request (its sender times out), `drop-reply` (it is handled, its
answer never comes), `delay` it or (`reply`) its answer, `duplicate` it, `answer` it at once
with a response code and remark instead of forwarding it (SYSTEM_BUSY, as a broker under load
does), or make it `slow` to process: it holds its NameServer's route table for `delay`, and every
route-table request to that node waits behind it (RouteInfoManager's read-write lock). A
`dialect` fault rewrites the JSON route bodies in its replies with `keys` quoted (`{"0":"addr"}`,
what 4.9.4+ sends a client of version >= 401) or unquoted (`{0:"addr"}`, fastjson's legacy form),
whatever the client's version: a client that parses only one of them fails (rocketmq-spec §3.3). Each may be limited to the first `count` requests or to a time (`for`). Both networks carry
whole commands past `judge`: the simulated one as objects, the socket relays by cutting their
byte streams into frames (FrameCutter), so a fault means the same in both.
"""

from __future__ import annotations

import random
import re
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from nameserver.protocol import RequestCode, ResponseCode
from nameserver.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE
from nameserver.protocol.frames import FRAME_MAX_LENGTH
from nameserver.protocol.headers import ProtocolError, decode_header

KINDS = ("drop", "drop-reply", "delay", "reply", "duplicate", "answer", "slow", "dialect")
KEYS = ("quoted", "unquoted")  # a dialect fault's brokerAddrs keys
# The requests a NameServer serves under RouteInfoManager's read-write lock: while a `slow` request
# holds it (REGISTER_BROKER of a 10,000-topic broker, say), these wait for it, as route reads do.
ROUTE_TABLE_CODES = frozenset({
    RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER, RequestCode.GET_ROUTEINFO_BY_TOPIC,
    RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.DELETE_TOPIC_IN_NAMESRV,
    RequestCode.GET_TOPICS_BY_CLUSTER, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, RequestCode.GET_UNIT_TOPIC_LIST,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
})


def code_number(text: object, names: type = RequestCode) -> int:
    """A request (or response) code by RocketMQ's name (`REGISTER_BROKER`) or number (`103`)."""
    word = str(text).strip()
    if word.lstrip("-").isdigit():
        return int(word)
    try:
        return int(names[word.upper()])
    except KeyError:
        raise ValueError(f"unknown {'request' if names is RequestCode else 'response'} code {word!r}: "
                         f"a number or a name such as {next(iter(names)).name}") from None


def code_name(code: int, names: type = RequestCode) -> str:
    try:
        return names(code).name
    except ValueError:
        return str(code)


@dataclass(frozen=True, slots=True)
class RequestFault:
    kind: str  # one of KINDS
    code: int  # the request code it acts on
    delay: float = 0.0  # delay, reply: seconds
    jitter: float = 0.0  # delay, reply: uniform +-
    answer: int = ResponseCode.SYSTEM_BUSY  # answer: the response code
    remark: str = ""  # answer: the response's remark
    count: int | None = None  # only the first `count` requests
    duration: float | None = None  # only for this many seconds after it is added
    keys: str = "quoted"  # dialect: how brokerAddrs keys are written (KEYS)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown request fault {self.kind!r}: use one of {', '.join(KINDS)}")
        if self.kind in ("delay", "reply", "slow") and self.delay <= 0:
            raise ValueError(f"{self.kind} needs delay= (e.g. delay=5s)")
        if self.kind == "dialect" and self.keys not in KEYS:
            raise ValueError(f"keys must be quoted or unquoted, not {self.keys!r}")
        if self.count is not None and self.count < 1:
            raise ValueError(f"count must be >= 1, not {self.count}")

    def describe(self) -> str:
        words = [self.kind, code_name(self.code)]
        if self.kind in ("delay", "reply", "slow"):
            words.append(f"{self.delay:g}s" + (f"±{self.jitter:g}s" if self.jitter else ""))
        if self.kind == "answer":
            words.append(code_name(self.answer, ResponseCode) + (f" {self.remark!r}" if self.remark else ""))
        if self.kind == "dialect":
            words.append(f"{self.keys} keys")
        if self.count is not None:
            words.append(f"×{self.count}")
        if self.duration is not None:
            words.append(f"for {self.duration:g}s")
        return " ".join(words)

    def to_table(self) -> dict:
        """The fault as a scenario's timeline keys (chaos/faults.py reads them back)."""
        table: dict = {"kind": self.kind, "code": code_name(self.code)}
        if self.kind in ("delay", "reply", "slow"):
            table.update(delay=f"{self.delay!r}s", jitter=f"{self.jitter!r}s")
        if self.kind == "answer":
            table.update(answer=code_name(self.answer, ResponseCode), remark=self.remark)
        if self.kind == "dialect":
            table["keys"] = self.keys
        if self.count is not None:
            table["count"] = self.count
        if self.duration is not None:
            table["for"] = f"{self.duration!r}s"
        return table


class Verdict(NamedTuple):
    """What happens to one command: `deliver` it (`copies` times, `delay` seconds late), `drop` it,
    or `answer` it (the link answers in the peer's stead); `fault` is what acted on it, and `why`
    says so when it is not that fault's kind ("wait": for a route table a slow request holds)."""

    action: str
    delay: float = 0.0
    copies: int = 1
    fault: RequestFault | None = None
    why: str | None = None


PASS = Verdict("deliver")


@dataclass(slots=True)
class _Installed:
    fault: RequestFault
    until: float | None
    left: int | None


@dataclass(slots=True)
class RequestFaults:
    """The request faults on every link: (src, dst) -> {(kind, code): fault}; "*" on either side
    means every link out of src or into dst. A request src -> dst meets the faults of (src, dst),
    (src, "*") and ("*", dst); one of each kind and code, the most specific winning."""

    on: dict[tuple[str, str], dict[tuple[str, int], _Installed]] = field(default_factory=dict)
    # node -> (when its route table is free again, the slow fault holding it)
    locked: dict[str, tuple[float, RequestFault]] = field(default_factory=dict)

    # Whether any fault is on or any table held: read for every command the networks carry, so a
    # plain attribute, kept up to date by what changes them, not a method.
    active: bool = False
    # Whether any fault was ever set: until then every command sent on an open connection arrives,
    # in order, as on TCP, which lets a simulated client skip resending what arrived (see
    # _SimEnd.delivers_everything).
    ever: bool = False

    def __bool__(self) -> bool:
        return self.active

    def _update(self) -> None:
        self.active = bool(self.on) or bool(self.locked)

    def add(self, src: str, dst: str, fault: RequestFault, now: float) -> None:
        until = None if fault.duration is None else now + fault.duration
        self.on.setdefault((src, dst), {})[(fault.kind, fault.code)] = _Installed(fault, until, fault.count)
        self.active = self.ever = True

    def clear(self) -> None:
        self.on.clear()
        self.locked.clear()
        self.active = False

    def _matching(self, src: str, dst: str, code: int, now: float) -> list[_Installed]:
        found: dict[str, _Installed] = {}
        for key in ((src, "*"), ("*", dst), (src, dst)):  # the most specific last, so it wins
            faults = self.on.get(key)
            if not faults:
                continue
            for fault_key, installed in list(faults.items()):
                if (installed.until is not None and now >= installed.until) or installed.left == 0:
                    del faults[fault_key]  # spent: gone, so a link without faults is fast again
                    if not faults:
                        del self.on[key]
                        self._update()
                elif fault_key[1] == code:
                    found[fault_key[0]] = installed
        return list(found.values())

    def judge(self, src: str, dst: str, code: int, flag: int, now: float,
              rng: random.Random) -> tuple[Verdict, RequestFault | None]:
        """A request src -> dst: what happens to it, and the fault its reply meets (None: none).
        A fault limited by count spends one for each request it acts on."""
        matching = self._matching(src, dst, code, now)
        free_at, holder = self.locked.get(dst, (now, None))
        if holder is not None and free_at <= now:
            del self.locked[dst]  # let go
            self._update()
        waits = free_at - now if code in ROUTE_TABLE_CODES and free_at > now else 0.0
        if not matching:
            return (PASS if not waits else Verdict("deliver", waits, 1, holder, "wait")), None
        for installed in matching:
            if installed.left is not None:
                installed.left -= 1
        faults = {i.fault.kind: i.fault for i in matching}
        for kind in ("drop", "answer"):  # they end the request here, whatever else is set
            if kind in faults:
                if kind == "answer" and flag & FLAG_ONEWAY:
                    return Verdict("drop", fault=faults[kind]), None  # a oneway request gets no answer
                return Verdict(kind, fault=faults[kind]), None
        delay = _delay(faults.get("delay"), rng) + waits
        slow = faults.get("slow")
        if slow is not None:  # it takes the table once the one before lets go, and holds it
            delay += _delay(slow, rng)
            self.locked[dst] = (now + delay, slow)
        acting = slow or faults.get("delay") or faults.get("duplicate")
        verdict = Verdict("deliver", delay, 2 if "duplicate" in faults else 1,
                          acting or (holder if waits else None), None if acting or not waits else "wait")
        reply = None if flag & FLAG_ONEWAY else \
            (faults.get("drop-reply") or faults.get("reply") or faults.get("dialect"))
        return verdict, reply


def _delay(fault: RequestFault | None, rng: random.Random) -> float:
    if fault is None:
        return 0.0
    return max(0.0, fault.delay + (rng.uniform(-fault.jitter, fault.jitter) if fault.jitter else 0.0))


def judge_reply(fault: RequestFault, rng: random.Random) -> Verdict:
    """The reply to a request that met `fault` (drop-reply, reply or dialect)."""
    if fault.kind == "drop-reply":
        return Verdict("drop", fault=fault)
    if fault.kind == "dialect":
        return Verdict("rewrite", fault=fault)
    return Verdict("deliver", _delay(fault, rng), 1, fault)


_BROKER_ADDRS = re.compile(rb'"brokerAddrs":\{[^{}]*\}')
_UNQUOTED_KEY = re.compile(rb'(?<=[{,])(-?\d+):')
_QUOTED_KEY = re.compile(rb'(?<=[{,])"(-?\d+)":')


def rewrite_keys(body: bytes, keys: str) -> bytes:
    """A JSON route (or cluster) body with every brokerAddrs object's keys written `keys`."""
    if keys == "quoted":
        return _BROKER_ADDRS.sub(lambda m: _UNQUOTED_KEY.sub(rb'"\1":', m.group(0)), body)
    return _BROKER_ADDRS.sub(lambda m: _QUOTED_KEY.sub(rb"\1:", m.group(0)), body)


def is_reply(flag: int) -> bool:
    return bool(flag & FLAG_RESPONSE)


# --- frames on a byte stream, for the socket relays ---------------------------------------------------

_WORDS = struct.Struct(">ii")


class Frame(NamedTuple):
    """A whole remoting frame as it crossed the wire, and what its header says."""

    data: bytes
    code: int
    flag: int
    opaque: int
    serialize_type: int


class FrameCutter:
    """Bytes in, pieces out: whole frames (Frame) when asked to cut, the bytes as they came
    otherwise. It always knows where the frames begin, so it can start cutting at the next one
    whenever a fault appears, and passes bytes through unbuffered while there is none. A stream
    that is not remoting frames (a length or header that does not parse) is passed as it comes
    from then on."""

    def __init__(self):
        self._buffer = bytearray()  # while cutting: the next frame, not yet whole
        self._left = 0  # bytes of the current frame, passed uncut, still to come
        self._partial = b""  # a frame's first bytes (fewer than 8), passed uncut
        self.raw = False  # not a remoting stream: never cut

    def feed(self, data: bytes, cut: bool) -> list[Frame | bytes]:
        if self.raw:
            return [data] if data else []
        pieces: list[Frame | bytes] = []
        if self._partial:  # its length is in the bytes that went before and these
            need = 8 - len(self._partial)
            if len(data) < need:
                self._partial += data
                return [data] if data else []
            length, word = _WORDS.unpack(self._partial + data[:need])
            if not _plausible(length, word & 0xFFFFFF):
                self.raw = True
                return [data]
            self._left, self._partial = length + 4 - len(self._partial), b""
        if self._left:  # the rest of a frame begun uncut
            head, data = data[:self._left], data[self._left:]
            self._left -= len(head)
            pieces.append(head)
        if not cut and not self._buffer:
            return pieces + self._pass(data)
        buf = self._buffer
        buf += data
        while len(buf) >= 8:
            length, word = _WORDS.unpack_from(buf, 0)
            header_length = word & 0xFFFFFF
            if not _plausible(length, header_length):
                return self._give_up(pieces)
            if not cut:
                data = bytes(buf)
                buf.clear()
                return pieces + self._pass(data)
            if len(buf) < 8 + header_length:
                break
            try:
                cmd = decode_header(word >> 24, bytes(buf[8:8 + header_length]))
            except ProtocolError:
                return self._give_up(pieces)
            if len(buf) < length + 4:
                break
            pieces.append(Frame(bytes(buf[:length + 4]), cmd.code, cmd.flag, cmd.opaque, word >> 24))
            del buf[:length + 4]
        return pieces

    def _pass(self, data: bytes) -> list[bytes]:
        """`data` on as it is (it begins a frame), noting where its frames end."""
        if not data:
            return []
        pos, size = 0, len(data)
        while size - pos >= 8:
            length, word = _WORDS.unpack_from(data, pos)
            if not _plausible(length, word & 0xFFFFFF):
                self.raw = True
                return [data]
            pos += length + 4
        if pos >= size:
            self._left = pos - size
        else:
            self._partial = data[pos:]
        return [data]

    def _give_up(self, pieces: list) -> list:
        self.raw = True
        if self._buffer:
            pieces.append(bytes(self._buffer))
            self._buffer.clear()
        return pieces


def _plausible(length: int, header_length: int) -> bool:
    return 4 <= length and length + 4 <= FRAME_MAX_LENGTH and header_length <= length - 4
