"""The story of a run, one line per turn: chaos actions, NameServers dropping brokers (by node name,
with the reason), first registrations, clients falling back to cached routes and back, crashes and
check results; an application under test (lab/apps) started, its first failed send after a fault,
its recovery to its pre-fault rate after the faults end, and its exit (one that dies on its own is
the headline). A teacher points at these; floods of sends must never push them out, so the model
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
                       "check.result", "ns.remove", "ns.perm", "client.start", "client.ns_switch",
                       "app.start", "app.exit"})


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
    if kind.startswith("app.") or kind == "chaos.fault":
        line = model.app_story.line(model, r)
        if line is not None:
            return line
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


# --- an application under test (issue 39) -----------------------------------------------------------

OPENERS = frozenset({"kill", "stop", "freeze", "ns-down", "partition", "isolate", "toxic", "wipe-perm"})


class AppStory:
    """What the story needs of the apps' records: the fault windows as the app expectations read
    them (lab/control/app_expectations.FaultWindows), each app's acknowledged sends, whether its
    first failed send since the last fault is still to tell, and the fault ends it has yet to recover
    from. Recovered: as `nslab report` and app_recovers count it (lab/pipeline/run_metrics: back to
    the app's pre-fault rate, the median of its acknowledged sends per whole second before the first
    fault, inside one second)."""

    def __init__(self) -> None:
        from lab.control.app_expectations import FaultWindows

        self.faults = FaultWindows()
        self.acks: dict[str, list[float]] = {}
        self.armed: dict[str, str] = {}  # app -> the fault whose first failed send is still to tell
        self.waiting: dict[str, list[float]] = {}  # app -> fault ends it has not recovered from yet
        self.told_ends = 0

    def line(self, model: LabModel, r: dict) -> StoryLine | None:
        kind, t, node = r["kind"], r["t"], r["node"]
        self.faults.nameservers = list(model.nameservers)
        self.faults.advance(t)
        self._note_ends()
        if kind == "chaos.fault":
            self.faults.observe(r)
            if r.get("verb") in OPENERS:
                for name, client in model.clients.items():
                    if client.role == "app":
                        self.armed[name] = _fault(r)
            self._note_ends()
            return None
        if kind == "app.start":
            pid = f" (pid {r['pid']})" if r.get("pid") is not None else ""
            return StoryLine(t, "join", f"{node} started: {r.get('command', '?')}{pid}")
        if kind == "app.exit":
            return StoryLine(t, *self._exit(r))
        if kind == "app.send":
            if r.get("result") == 0:
                return self._ack(node, t)
            fault = self.armed.pop(node, None)
            if fault is not None:
                answer = "no answer" if r.get("result") is None else f"code {r['result']}"
                return StoryLine(t, "cache", f"{node}: its first failed send since {fault}: to {r.get('peer', '?')} "
                                             f"({r.get('topic', '?')}), {answer}")
        return None

    def _note_ends(self) -> None:
        """Every end of the fault windows not yet noted: each app that was sending must recover from it."""
        ends = self.faults.ends()
        for end in ends[self.told_ends:]:
            for name, acks in self.acks.items():
                if acks and acks[0] <= end:
                    self.waiting.setdefault(name, []).append(end)
        self.told_ends = len(ends)

    def _ack(self, node: str, t: float) -> StoryLine | None:
        from lab.pipeline.run_metrics import app_baseline, app_recovery_time

        acks = self.acks.setdefault(node, [])
        acks.append(t)
        waiting = self.waiting.get(node)
        if not waiting:
            return None
        first_fault = self.faults.union[0][0] if self.faults.union else None
        baseline = app_baseline(acks, first_fault)
        if baseline is None:
            self.waiting[node] = []  # no whole second of sending before the first fault: no rate to return to
            return None
        recent = acks[-baseline:]  # the acks that can close a second now
        for end in list(waiting):
            took = app_recovery_time([a for a in recent if a >= end], end, baseline, t)
            if took is not None:
                waiting.remove(end)
                return StoryLine(t, "route", f"{node} is back to its pre-fault rate ({baseline} acks/s), "
                                             f"{took:.1f} s after {self.faults.ended_by(end)} ended the faults")
        return None

    def _exit(self, r: dict) -> tuple[str, str]:
        node = r["node"]
        how = (f"exit code {r['code']}" if r.get("code") is not None
               else f"killed by {r['signal']}" if r.get("signal") else "exit unknown")
        if not r.get("stopped_by_lab"):
            faults = self.faults.at(r["t"])
            during = f" during {', '.join(faults)}" if faults else ""
            return "crash", f"{node} DIED on its own ({how}){during}"
        why = {"end": "at the timeline's end", "stop": "by a stop fault", "kill": "by a kill fault"}.get(
            r.get("reason"), f"({r.get('reason')})")
        clean = r.get("code") == 0 or (r.get("code") is None and r.get("signal") == "SIGTERM")
        if r.get("reason") == "end" and not clean:
            return "failed", f"{node} stopped by the lab {why}, not cleanly: {how}"
        return "drain", f"{node} stopped by the lab {why}: {how}"
