"""Link state: which node can reach which, and the toxics on each link. Pure: no I/O, no clock.

A link is directed, (src, dst): the bytes src sends to dst. Both network implementations ask
`plan(src, dst, nbytes, rng)` for every chunk they carry, so a fault means the same thing in a
simulated run and over real sockets.

Toxics use Toxiproxy's vocabulary: latency (with jitter), bandwidth, blackhole (bytes vanish into
the link, connections stay open), reset (connections are torn down) — plus loss, which on TCP is not a lost
byte but a retransmission: the chunk arrives one retransmission timeout late.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple

from .request_faults import RequestFaults

RETRANSMIT_TIMEOUT = 0.2  # seconds: Linux's minimum TCP RTO

# A chunk's size in bytes, or a function giving it: only a bandwidth toxic needs it, so a network
# carrying objects measures one only then.
NBytes = int | Callable[[], int]


@dataclass(frozen=True, slots=True)
class Toxic:
    kind: str  # latency | loss | bandwidth | blackhole | reset
    latency: float = 0.0  # seconds
    jitter: float = 0.0  # seconds, uniform +-
    probability: float = 0.0  # loss: chance a chunk needs a retransmission
    rate: float = 0.0  # bandwidth: bytes per second

    KINDS = ("latency", "loss", "bandwidth", "blackhole", "reset")

    def __post_init__(self):
        if self.kind not in self.KINDS:
            raise ValueError(f"unknown toxic {self.kind!r}: use one of {', '.join(self.KINDS)}")
        if self.kind == "bandwidth" and self.rate <= 0:
            raise ValueError("a bandwidth toxic needs a rate > 0 (bytes per second)")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"loss probability {self.probability} is not in [0, 1]")

    def to_table(self) -> dict:
        """The toxic as a scenario's timeline keys (chaos/faults.py reads them back)."""
        table: dict = {"kind": self.kind}
        if self.kind == "latency":
            table.update(latency=f"{self.latency!r}s", jitter=f"{self.jitter!r}s")
        elif self.kind == "loss":
            table["probability"] = self.probability
        elif self.kind == "bandwidth":
            table["rate"] = repr(self.rate)
        return table

    def describe(self) -> str:
        if self.kind == "latency":
            return f"latency {self.latency * 1000:g}ms" + (f"±{self.jitter * 1000:g}ms" if self.jitter else "")
        if self.kind == "loss":
            return f"loss {self.probability:.0%}"
        if self.kind == "bandwidth":
            return f"bandwidth {self.rate / 1024:g}KiB/s"
        return self.kind


class Plan(NamedTuple):
    """What happens to one chunk: delivered, held, or the connection reset. A held chunk waits
    until the link changes (as TCP retransmits through a partition and delivers after it heals,
    unless the connection is closed first). A delivered chunk
    arrives `delay` seconds after it is sent, and `transmit` seconds after the chunk before it
    (bandwidth queues chunks one behind another)."""

    action: str  # deliver | hold | reset
    delay: float = 0.0
    transmit: float = 0.0


HOLD = Plan("hold")
RESET = Plan("reset")


@dataclass(slots=True)
class Links:
    base_latency: float = 0.0
    base_jitter: float = 0.0
    base_loss: float = 0.0
    blocked: set[tuple[str, str]] = field(default_factory=set)
    isolated: set[str] = field(default_factory=set)
    frozen: set[str] = field(default_factory=set)  # processes stopped: not a network fault, heal keeps them
    toxics: dict[tuple[str, str], dict[str, Toxic]] = field(default_factory=dict)
    requests: RequestFaults = field(default_factory=RequestFaults)  # faults on one request code

    # --- partitions -------------------------------------------------------------------------

    def partition(self, groups: Iterable[Iterable[str]], *, one_way: bool = False) -> None:
        """Nodes in different groups cannot reach each other (one_way: only from an earlier group
        to a later one). Nodes in no group keep every link."""
        groups = [list(g) for g in groups]
        for i, left in enumerate(groups):
            for right in groups[i + 1:]:
                for a in left:
                    for b in right:
                        self.blocked.add((a, b))
                        if not one_way:
                            self.blocked.add((b, a))

    def isolate(self, node: str) -> None:
        """Cut every link of the node, to nodes known now and nodes that appear later."""
        self.isolated.add(node)

    def heal(self) -> None:
        """Heal all: every partition, isolation, toxic and request fault goes."""
        self.blocked.clear()
        self.isolated.clear()
        self.toxics.clear()
        self.requests.clear()

    def _cut(self, src: str, dst: str) -> bool:
        """A network fault between them: a partition, or an isolated node."""
        if src != dst and (src in self.isolated or dst in self.isolated):
            return True
        return (src, dst) in self.blocked

    def reachable(self, src: str, dst: str) -> bool:
        if src != dst and (src in self.frozen or dst in self.frozen):
            return False
        return not self._cut(src, dst)

    # --- toxics -------------------------------------------------------------------------------

    def add_toxic(self, src: str, dst: str, toxic: Toxic) -> None:
        """A toxic on the link src -> dst; dst "*" means every link out of src, src "*" every
        link into dst."""
        self.toxics.setdefault((src, dst), {})[toxic.kind] = toxic

    def remove_toxic(self, src: str, dst: str, kind: str | None = None) -> None:
        if kind is None:
            self.toxics.pop((src, dst), None)
        else:
            self.toxics.get((src, dst), {}).pop(kind, None)

    def holds(self, src: str, dst: str) -> bool:
        """A connection attempt's SYN would go unanswered (a partition, an isolated node, a black
        hole). Not for a frozen node: its kernel still answers the handshake, and what is sent on
        the connection then waits."""
        if self._cut(src, dst):
            return True
        toxics = self._toxics_on(src, dst)
        return bool(toxics) and "blackhole" in toxics

    def _toxics_on(self, src: str, dst: str) -> dict[str, Toxic] | None:
        if not self.toxics:
            return None
        found = {}
        for key in ((src, "*"), ("*", dst), (src, dst)):  # the most specific wins
            found.update(self.toxics.get(key, {}))
        return found

    def faultless(self) -> bool:
        """No partition, isolated or frozen node, or toxic anywhere."""
        return not (self.blocked or self.isolated or self.frozen or self.toxics)

    def healthy_delay(self, rng: random.Random) -> float | None:
        """A chunk's delay while no link has a fault, the common case; None when one has (ask
        `plan`). The same draws as `plan` makes, in the same order."""
        if not self.faultless():
            return None
        delay = self.base_latency
        jitter = self.base_jitter
        if jitter:
            delay += -jitter + (jitter + jitter) * rng.random()  # rng.uniform(-jitter, jitter), inline
        if self.base_loss and rng.random() < self.base_loss:
            delay += RETRANSMIT_TIMEOUT
        return delay if delay > 0.0 else 0.0

    def plan(self, src: str, dst: str, nbytes: NBytes, rng: random.Random) -> Plan:
        delay = self.healthy_delay(rng)
        if delay is not None:
            return Plan("deliver", delay, 0.0)
        if not self.reachable(src, dst):
            return HOLD
        toxics = self._toxics_on(src, dst)
        delay, transmit = self.base_latency, 0.0
        if self.base_jitter:
            delay += rng.uniform(-self.base_jitter, self.base_jitter)
        loss = self.base_loss
        if toxics:
            if "reset" in toxics:
                return RESET
            if "blackhole" in toxics:
                return HOLD
            latency = toxics.get("latency")
            if latency is not None:
                delay += latency.latency + (rng.uniform(-latency.jitter, latency.jitter) if latency.jitter else 0.0)
            bandwidth = toxics.get("bandwidth")
            if bandwidth is not None:
                transmit = (nbytes() if callable(nbytes) else nbytes) / bandwidth.rate
            if "loss" in toxics:
                loss = max(loss, toxics["loss"].probability)
        if loss and rng.random() < loss:
            delay += RETRANSMIT_TIMEOUT
        return Plan("deliver", max(0.0, delay), transmit)
