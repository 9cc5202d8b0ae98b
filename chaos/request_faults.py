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
whatever the client's version: a client that parses only one of them fails (rocketmq-spec §3.3).
Each may be limited to the first `count` requests or to a time (`for`). Both networks carry
whole commands past `judge`: the simulated one as objects, the socket relays by cutting their
byte streams into frames, so a fault means the same in both. The protocol's codes, frames and
replies are the WireCodec's (chaos/wire_codec.py), which the network is given: nothing here
knows RocketMQ.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from .wire_codec import WireCodec

KINDS = ("drop", "drop-reply", "delay", "reply", "duplicate", "answer", "slow", "dialect")
KEYS = ("quoted", "unquoted")  # a dialect fault's brokerAddrs keys


@dataclass(frozen=True, slots=True)
class RequestFault:
    kind: str  # one of KINDS
    code: int  # the request code it acts on
    delay: float = 0.0  # delay, reply: seconds
    jitter: float = 0.0  # delay, reply: uniform +-
    answer: int | None = None  # answer: the response code (None: the codec's default_answer)
    remark: str = ""  # answer: the response's remark
    count: int | None = None  # only the first `count` requests
    duration: float | None = None  # only for this many seconds after it is added
    keys: str = "quoted"  # dialect: how brokerAddrs keys are written (KEYS)
    # The protocol it speaks, to name its codes; a network gives a fault without one its own.
    codec: WireCodec | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown request fault {self.kind!r}: use one of {', '.join(KINDS)}")
        if self.kind in ("delay", "reply", "slow") and self.delay <= 0:
            raise ValueError(f"{self.kind} needs delay= (e.g. delay=5s)")
        if self.kind == "dialect" and self.keys not in KEYS:
            raise ValueError(f"keys must be quoted or unquoted, not {self.keys!r}")
        if self.count is not None and self.count < 1:
            raise ValueError(f"count must be >= 1, not {self.count}")

    def with_codec(self, codec: WireCodec) -> RequestFault:
        return self if self.codec is codec else replace(self, codec=codec)

    def code_name(self) -> str:
        return self.codec.request_name(self.code) if self.codec is not None else str(self.code)

    def answer_code(self) -> int | None:
        """The response code an `answer` fault gives: its own, or its codec's default."""
        if self.answer is None and self.codec is not None:
            return self.codec.default_answer
        return self.answer

    def answer_name(self) -> str:
        code = self.answer_code()
        return self.codec.response_name(code) if self.codec is not None and code is not None else str(code)

    def describe(self) -> str:
        words = [self.kind, self.code_name()]
        if self.kind in ("delay", "reply", "slow"):
            words.append(f"{self.delay:g}s" + (f"±{self.jitter:g}s" if self.jitter else ""))
        if self.kind == "answer":
            words.append(self.answer_name() + (f" {self.remark!r}" if self.remark else ""))
        if self.kind == "dialect":
            words.append(f"{self.keys} keys")
        if self.count is not None:
            words.append(f"×{self.count}")
        if self.duration is not None:
            words.append(f"for {self.duration:g}s")
        return " ".join(words)

    def to_table(self) -> dict:
        """The fault as a scenario's timeline keys (chaos/faults.py reads them back)."""
        table: dict = {"kind": self.kind, "code": self.code_name()}
        if self.kind in ("delay", "reply", "slow"):
            table.update(delay=f"{self.delay!r}s", jitter=f"{self.jitter!r}s")
        if self.kind == "answer":
            table.update(answer=self.answer_name(), remark=self.remark)
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

    def judge(self, src: str, dst: str, code: int, flag: int, now: float, rng: random.Random,
              codec: WireCodec) -> tuple[Verdict, RequestFault | None]:
        """A request src -> dst: what happens to it, and the fault its reply meets (None: none).
        A fault limited by count spends one for each request it acts on."""
        matching = self._matching(src, dst, code, now)
        free_at, holder = self.locked.get(dst, (now, None))
        if holder is not None and free_at <= now:
            del self.locked[dst]  # let go
            self._update()
        waits = free_at - now if code in codec.table_codes and free_at > now else 0.0
        if not matching:
            return (PASS if not waits else Verdict("deliver", waits, 1, holder, "wait")), None
        for installed in matching:
            if installed.left is not None:
                installed.left -= 1
        faults = {i.fault.kind: i.fault for i in matching}
        for kind in ("drop", "answer"):  # they end the request here, whatever else is set
            if kind in faults:
                if kind == "answer" and codec.is_oneway(flag):
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
        reply = None if codec.is_oneway(flag) else \
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
