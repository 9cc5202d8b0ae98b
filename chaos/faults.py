"""The fault vocabulary: verbs, their arguments, and one parser for words and for scenario tables.

The same Fault comes from `nslab chaos partition A,B / C,D`, from a scenario's
`{ at = "2m", fault = "partition", groups = [["A","B"],["C","D"]] }`, and (later) from the TUI.
Generic verbs live here; the lab registers its RocketMQ operations (ns-down, wipe-perm, ...) as
more VerbSpecs, so this module stays ignorant of RocketMQ.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field

from .links import Toxic
from .request_faults import KINDS as REQUEST_KINDS, RequestFault
from .wire_codec import WireCodec


class FaultError(ValueError):
    """A fault that does not parse; the message says what was expected."""


@dataclass(frozen=True)
class VerbSpec:
    name: str
    takes: str  # none | node | nodes | groups | toxic | client
    help: str
    params: tuple[str, ...] = ()  # the key=value parameters it takes (a toxic's depend on its kind)


@dataclass(frozen=True)
class Fault:
    verb: str
    nodes: tuple[str, ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()
    one_way: bool = False
    toxic: Toxic | RequestFault | None = None
    params: tuple[tuple[str, object], ...] = ()

    def describe(self) -> str:
        if self.groups:
            sep = " -> " if self.one_way else " / "
            return f"{self.verb} " + sep.join(",".join(g) for g in self.groups)
        parts = [self.verb, *self.nodes]
        if self.toxic is not None:
            parts.append(self.toxic.describe())
        parts += [f"{k}={v}" for k, v in self.params]
        return " ".join(parts)

    def to_record(self) -> dict:
        """The fault as plain data, for the event log."""
        record: dict = {"verb": self.verb}
        if self.nodes:
            record["nodes"] = list(self.nodes)
        if self.groups:
            record["groups"] = [list(g) for g in self.groups]
            record["one_way"] = self.one_way
        if self.toxic is not None:
            record["toxic"] = self.toxic.describe()
            record["toxic_table"] = self.toxic.to_table()
            if isinstance(self.toxic, RequestFault):
                record["code"] = self.toxic.code_name()
                if self.toxic.duration is not None:
                    record["for_s"] = self.toxic.duration  # the fault's window ends by itself
        record.update(self.params)
        return record


GENERIC_VERBS = [
    VerbSpec("kill", "node", "kill a node: its process dies, its connections close at once"),
    VerbSpec("freeze", "node", "freeze a node (SIGSTOP): connections stay open, nothing flows"),
    VerbSpec("unfreeze", "node", "resume a frozen node (SIGCONT)"),
    VerbSpec("restart", "node", "start a killed or stopped node again (a running one is killed first)"),
    VerbSpec("stop", "node", "stop a node gracefully (a broker unregisters first)"),
    VerbSpec("partition", "groups", "cut the network between groups: A,B / C,D (one-way: A,B -> C,D)"),
    VerbSpec("isolate", "node", "cut every link of a node"),
    VerbSpec("heal", "none", "heal every partition, isolation and toxic"),
    VerbSpec("toxic", "toxic", "a link toxic: toxic NODE[:PEER] latency=100ms jitter=10ms | loss=0.1 | "
                               "bandwidth=10k | blackhole | reset; or on one request code: "
                               "toxic NODE[:PEER] drop | drop-reply | delay delay=5s | reply delay=5s | duplicate | "
                               "answer answer=SYSTEM_BUSY remark=TEXT | slow delay=8s | dialect keys=quoted|unquoted, "
                               "each with code=NAME|NUMBER [count=N] [for=3m]"),
]


def _nodes(text: str) -> tuple[str, ...]:
    return tuple(n for n in (p.strip() for p in text.split(",")) if n)


def parse_groups(words: list[str]) -> tuple[tuple[tuple[str, ...], ...], bool]:
    """`A,B / C,D` (symmetric) or `A,B -> C,D` (one-way, from the left to the right)."""
    text = " ".join(words)
    one_way = "->" in text
    groups = tuple(_nodes(part) for part in text.replace("->", "/").split("/"))
    if len(groups) < 2 or any(not g for g in groups):
        raise FaultError("partition takes two or more groups: A,B / C,D (or A,B -> C,D for one way)")
    return groups, one_way


_SIZE = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 ** 2, "mb": 1024 ** 2, "mib": 1024 ** 2}


def parse_rate(text: str) -> float:
    """Bytes per second: `10k`, `1.5m`, `512`, optionally ending in /s."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmib]*)", str(text).strip().lower().removesuffix("/s"))
    if m is None or m.group(2) not in _SIZE or float(m.group(1)) <= 0:
        raise FaultError(f"bad rate {text!r}: use bytes per second such as 512, 10k, 1m")
    return float(m.group(1)) * _SIZE[m.group(2)]


# The parameters each toxic kind takes: any other key is an error, never ignored (a `loss=0.5` that
# meant probability would silently apply the default).
TOXIC_PARAMS = {"latency": ("latency", "jitter"), "loss": ("probability",), "bandwidth": ("rate",),
                "blackhole": (), "reset": ()}
_REQUEST_COMMON = ("code", "count", "for")
REQUEST_PARAMS = {kind: _REQUEST_COMMON + extra for kind, extra in {
    "drop": (), "drop-reply": (), "duplicate": (), "delay": ("delay", "jitter"), "reply": ("delay", "jitter"),
    "slow": ("delay", "jitter"), "answer": ("answer", "remark"), "dialect": ("keys",)}.items()}
MAX_FAULT_SECONDS = 86_400.0  # a toxic's delay or window: a day is past any run worth watching
MAX_COUNT = 1_000_000_000  # a request fault's count: past it, "every request" is the same


def check_params(what: str, params: dict, accepted: tuple[str, ...]) -> None:
    """FaultError naming the first key `what` does not take, and the ones it does."""
    for key in params:
        if key not in accepted:
            takes = f"it takes {', '.join(accepted)}" if accepted else "it takes none"
            raise FaultError(f"{key}: {what} has no parameter {key!r} ({takes})")


def _seconds(parse_duration):
    def seconds(text) -> float:
        value = parse_duration(text)
        if not value <= MAX_FAULT_SECONDS:
            raise ValueError(f"{value:g}s is out of range 0..{MAX_FAULT_SECONDS:g}s")
        return value
    return seconds


def _count(text: str) -> int:
    if not str(text).isdigit() or not 1 <= int(text) <= MAX_COUNT:
        raise ValueError(f"{text} is out of range 1..{MAX_COUNT} (a whole number)")
    return int(text)


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number within 0..1") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{text} is out of range 0..1")
    return value


def _param(params: dict, key: str, default, convert):
    """params[key] (or default) converted; a FaultError that starts with the key when it does not."""
    try:
        return convert(params.get(key, default))
    except ValueError as e:
        raise FaultError(f"{key}: {e}") from None


def parse_request_fault(kind: str, params: dict[str, str], parse_duration, codec: WireCodec) -> RequestFault:
    """`drop code=REGISTER_BROKER`, `reply code=GET_ROUTEINFO_BY_TOPIC delay=5s`, `answer
    code=SEND_MESSAGE answer=SYSTEM_BUSY remark=busy count=10 for=2m`."""
    check_params(f"a {kind} toxic", params, REQUEST_PARAMS[kind])
    if "code" not in params:
        raise FaultError(f"{kind} needs code=: the request code it acts on, a name such as REGISTER_BROKER "
                         "or a number")
    seconds = _seconds(parse_duration)
    fields = dict(
        code=_param(params, "code", None, codec.request_code), delay=_param(params, "delay", 0, seconds),
        jitter=_param(params, "jitter", 0, seconds),
        answer=_param(params, "answer", None, codec.response_code) if "answer" in params else None,
        remark=str(params.get("remark", "")), keys=str(params.get("keys", "quoted")),
        count=_param(params, "count", None, _count) if "count" in params else None,
        duration=_param(params, "for", None, seconds) if "for" in params else None)
    try:
        return RequestFault(kind, **fields, codec=codec)
    except ValueError as e:
        raise FaultError(f"{kind}: {e}") from None


def parse_toxic(kind: str, params: dict[str, str], parse_duration, codec: WireCodec | None) -> Toxic | RequestFault:
    if kind in REQUEST_KINDS:
        if codec is None:
            raise FaultError(f"{kind}: this lab knows no request codes (no wire codec)")
        return parse_request_fault(kind, params, parse_duration, codec)
    if kind not in TOXIC_PARAMS:
        raise FaultError(f"unknown toxic {kind!r}: use one of {', '.join(TOXIC_PARAMS)}, or one on a request code: "
                         + ", ".join(REQUEST_KINDS))
    check_params(f"a {kind} toxic", params, TOXIC_PARAMS[kind])
    seconds = _seconds(parse_duration)
    if kind == "latency":
        return Toxic("latency", latency=_param(params, "latency", "100ms", seconds),
                     jitter=_param(params, "jitter", 0, seconds))
    if kind == "loss":
        return Toxic("loss", probability=_param(params, "probability", "0.1", _probability))
    if kind == "bandwidth":
        return Toxic("bandwidth", rate=_param(params, "rate", "10k", parse_rate))
    return Toxic(kind)


def _takes(kind: str) -> str:
    accepted = TOXIC_PARAMS.get(kind, REQUEST_PARAMS.get(kind, ()))
    return ", ".join(f"{k}=" for k in accepted) or f"a {kind} toxic takes none"


@dataclass
class Vocabulary:
    """The verbs a lab understands, and how to read them from words or a scenario table."""

    parse_duration: object  # str -> seconds; passed in, so chaos needs no config module
    codec: WireCodec | None = None  # the protocol's request codes, for request faults (chaos/wire_codec.py)
    specs: dict[str, VerbSpec] = field(default_factory=dict)

    def __post_init__(self):
        for spec in GENERIC_VERBS:
            self.specs.setdefault(spec.name, spec)

    def add(self, spec: VerbSpec) -> None:
        self.specs[spec.name] = spec

    def help(self) -> str:
        return "\n".join(f"  {s.name:<10} {s.help}" for s in self.specs.values())

    def parse_words(self, words: list[str]) -> Fault:
        """`kill broker-a-0`, `partition ns-0,broker-a-0 / ns-1`, `toxic broker-a-0:ns-0 latency=2s`."""
        if not words:
            raise FaultError("no fault given; verbs:\n" + self.help())
        verb, args = words[0], words[1:]
        spec = self.specs.get(verb)
        if spec is None:
            raise FaultError(f"unknown fault {verb!r}; verbs:\n" + self.help())
        if spec.takes == "none":
            if args:
                raise FaultError(f"{verb} takes no arguments")
            return Fault(verb)
        if spec.takes == "groups":
            groups, one_way = parse_groups(args)
            return Fault(verb, groups=groups, one_way=one_way)
        if not args:
            raise FaultError(f"{verb} needs a node: {spec.help}")
        params = dict(a.split("=", 1) for a in args[1:] if "=" in a)
        flags = [a for a in args[1:] if "=" not in a]
        if spec.takes == "toxic":
            if not flags:
                raise FaultError("toxic needs a kind: latency, loss, bandwidth, blackhole or reset, or one on a "
                                 "request code: " + ", ".join(REQUEST_KINDS))
            if len(flags) > 1:  # `loss 0.5`: a value without its key would be dropped for the default
                raise FaultError(f"toxic {flags[0]}: unexpected {' '.join(flags[1:])!r} "
                                 f"(parameters are key=value: {_takes(flags[0])})")
            return Fault(verb, nodes=_nodes(args[0].replace(":", ",")),
                         toxic=parse_toxic(flags[0], params, self.parse_duration, self.codec))
        if flags and spec.takes != "nodes":
            raise FaultError(f"{verb}: unexpected {' '.join(flags)!r}")
        check_params(verb, params, spec.params)
        return Fault(verb, nodes=_nodes(args[0]) + tuple(flags if spec.takes == "nodes" else ()),
                     params=tuple(sorted(params.items())))

    def parse_table(self, table: dict) -> Fault:
        """A scenario timeline entry: {fault = "kill", node = "broker-a-0"}, {fault = "partition",
        groups = [[...], [...]], one_way = true}, {fault = "toxic", node = "a", peer = "b",
        kind = "latency", latency = "2s"}. Raises FaultError naming the key at fault."""
        verb = table.get("fault")
        spec = self.specs.get(verb) if isinstance(verb, str) else None
        if spec is None:
            raise FaultError(f"fault: unknown fault {verb!r} (verbs: {', '.join(self.specs)})")
        steps = ("at", "spread", "fault")  # what every timeline entry has; the rest is the verb's
        if spec.takes in ("groups", "none"):
            check_params(verb, {k: v for k, v in table.items() if k not in steps},
                         ("groups", "one_way") if spec.takes == "groups" else ())
        if spec.takes == "groups":
            groups = table.get("groups")
            if not isinstance(groups, list) or len(groups) < 2 or not all(isinstance(g, list) and g for g in groups):
                raise FaultError('groups: a partition takes a list of node lists, e.g. [["ns-0"], ["ns-1"]]')
            return Fault(verb, groups=tuple(tuple(str(n) for n in g) for g in groups),
                         one_way=bool(table.get("one_way", False)))
        if spec.takes == "none":
            return Fault(verb)
        node = table.get("node")
        if not isinstance(node, str) or not node:
            raise FaultError(f"node: {verb} needs a node name")
        if spec.takes == "toxic":
            kind = table.get("kind")
            if not isinstance(kind, str):
                raise FaultError("kind: a toxic needs a kind (latency, loss, bandwidth, blackhole, reset; on one "
                                 "request code: " + ", ".join(REQUEST_KINDS) + ")")
            peer = table.get("peer")
            params = {k: str(v) for k, v in table.items() if k not in ("at", "spread", "fault", "node", "peer", "kind")}
            return Fault(verb, nodes=(node, peer) if peer else (node,), toxic=parse_toxic(kind, params, self.parse_duration, self.codec))
        params = {k: v for k, v in table.items() if k not in ("at", "spread", "fault", "node")}
        check_params(verb, params, spec.params)
        return Fault(verb, nodes=(node,), params=tuple(sorted(params.items())))
