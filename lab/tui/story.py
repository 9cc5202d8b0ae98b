"""The story of a run, one line per turn: chaos actions, NameServers dropping brokers (by node name,
with the reason), first registrations, clients falling back to cached routes and back, crashes and
check results. A teacher points at these; floods of sends must never push them out, so the model
keeps them all (a run has tens of them, not thousands)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import readable

if TYPE_CHECKING:
    from .model import LabModel


@dataclass(frozen=True)
class StoryLine:
    t: float
    tag: str  # chaos | remove | join | cache | route | crash | ok | failed | unjudged | drain
    text: str


# Kinds kept for the whole run whatever floods the log (besides a broker's first registration).
IMPORTANT = frozenset({"run.start", "run.drain", "run.end", "node.start", "node.stop", "chaos.fault",
                       "check.result", "ns.remove", "ns.perm", "client.start", "client.ns_switch"})


def important(record: dict) -> bool:
    """Kept beyond any cap of the event log: the records the story is made of."""
    kind = record["kind"]
    return kind in IMPORTANT or (kind == "ns.register" and bool(record.get("first")))


def removal_reason(r: dict) -> str:
    """An ns.remove's reason, with its detail when it has one."""
    return r.get("reason", "removed") + (f": {r['detail']}" if r.get("detail") else "")


def story_line(model: LabModel, r: dict) -> StoryLine | None:
    """The story's line for a record, or None. Called before the model takes the record in, so a
    client's route source can be compared with the one before."""
    kind, t, node = r["kind"], r["t"], r["node"]
    if kind == "chaos.fault":
        return StoryLine(t, "chaos", f"{_fault(r)}  (from {r.get('source', '?')})")
    if kind == "ns.remove":
        return StoryLine(t, "remove", f"{node} removed {_broker(model, r)} ({removal_reason(r)})")
    if kind == "ns.register" and r.get("first"):
        return StoryLine(t, "join", f"{node} registered {_broker(model, r)} {_since_removal(model, r)}")
    if kind == "client.route":
        client = model.clients.get(node)
        before = client.route_source if client is not None else "nameserver"
        after = r.get("source")
        first = client is None or (before is None and client.route_t is None)
        if after == before or (first and after == "nameserver"):  # the first route is no news
            return None
        if after == "cache":
            return StoryLine(t, "cache", f"{node} runs on its cached route ({model.node_at(r.get('ns'))} failed: "
                                         f"{readable(r.get('error'))})")
        if after is None:
            return StoryLine(t, "cache", f"{node} has no route for {r.get('topic')}")
        return StoryLine(t, "route", f"{node} routes from {model.node_at(r.get('ns'))} again")
    if kind == "node.stop" and r.get("state") == "crashed":
        return StoryLine(t, "crash", f"{node} crashed: {readable(r.get('error'))}")
    if kind == "client.start" and not r.get("ok", True):
        view = model.nodes.get(node)
        error = view.error if view is not None and view.error else r.get("error")
        return StoryLine(t, "crash", f"{node} could not start: {readable(error)}")
    if kind == "check.result":
        status = r.get("status") or ("ok" if r.get("ok") else "failed")
        word = {"ok": "held", "failed": "FAILED", "unjudged": "could not be judged"}.get(status, status)
        detail = f" — {r['detail']}" if r.get("detail") else ""
        return StoryLine(t, status, f"check {word}: {r['name']}{detail}")
    if kind == "run.drain":
        if not r.get("seconds", 1):
            return StoryLine(t, "drain", "the lab stops: every node, gracefully")
        return StoryLine(t, "drain", "the timeline ended: producers stop, consumers catch up")
    return None


def _broker(model: LabModel, r: dict) -> str:
    """A broker's node name: a broker registers before its node.start names its address, so the
    name is rebuilt from the record as lab/run/topology.py builds it."""
    addr = r.get("broker_addr")
    name = model.node_at(addr)
    if name == addr and r.get("broker_name") is not None:
        return f"{r['broker_name']}-{r.get('broker_id', 0)}"
    return str(name)


def _since_removal(model: LabModel, r: dict) -> str:
    """`(first time)`, or `(again, 12 s after its removal)` for a broker this NameServer dropped."""
    view = model.nameservers.get(r["node"])
    removal = view.removed.get(r.get("broker_addr")) if view is not None else None
    if removal is None:
        return "(first time)"
    return f"(again, {r['t'] - removal[0]:.0f} s after its removal)"


def _fault(r: dict) -> str:
    verb = r.get("verb", "?")
    if r.get("groups"):
        sep = " -> " if r.get("one_way") else " / "
        return f"{verb} " + sep.join(",".join(g) for g in r["groups"])
    words = [verb, *r.get("nodes", [])]
    if r.get("toxic"):
        words.append(str(r["toxic"]))
    if r.get("count"):
        words.append(f"count={r['count']}")
    return " ".join(words)
