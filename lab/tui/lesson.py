"""A scenario as a lesson on screen: what it teaches, its fault timeline with where the run is
now, the phase under way, each expectation and the verdict. Built from the scenario the lab plays,
or — in a replay, or for a lab fed from another process — from the records alone."""

from __future__ import annotations

import functools

import math
from dataclasses import dataclass, field

from .story import _fault


@dataclass
class Lesson:
    name: str
    teaches: str = ""
    duration: float = math.inf
    steps: list[tuple[float, str]] = field(default_factory=list)  # (at, the fault in words)
    phases: list[tuple[str, float, float]] = field(default_factory=list)  # (name, start, end)
    expectations: list[str] = field(default_factory=list)


def from_scenario(scenario) -> Lesson:
    """From a chaos.scenario.Scenario (its timeline placed for the run's seed)."""
    return Lesson(scenario.name, scenario.teaches, scenario.duration,
                  [(step.at, step.fault.describe()) for step in scenario.timeline],
                  [(p.name, p.start, p.end) for p in scenario.phases],
                  [e.name for e in scenario.expectations])


def from_records(records: list[dict], scenario=None) -> Lesson | None:
    """From a run's records: the scenario's timeline as played, its end (run.drain), its checks;
    what only the scenario file says (its lesson, phases) from `scenario` when it could be found."""
    start = records[0] if records and records[0]["kind"] == "run.start" else {}
    name = start.get("scenario")
    if not name:
        return None
    lesson = from_scenario(scenario) if scenario is not None else Lesson(name)
    played = [(r["t"], _fault(r)) for r in records if r["kind"] == "chaos.fault" and r.get("source") == "scenario"]
    if played:
        lesson.steps = played
    drain = next((r["t"] for r in records if r["kind"] == "run.drain"), None)
    if drain is not None:
        lesson.duration = drain
    for r in records:
        if r["kind"] == "check.result" and r["name"] not in lesson.expectations:
            lesson.expectations.append(r["name"])
    return lesson

@functools.cache  # an attached view asks again as records come: read and parse the file once
def bundled_scenario(name: str | None):
    """The scenario file a run names, when it is one of the bundled ones (or a path still there)."""
    if not name:
        return None
    try:
        from chaos.scenario import load_scenario
        from lab.control.actions import vocabulary
        from lab.control.scenarios import find
        path = find(name)
        return load_scenario(path, vocabulary()) if path.exists() else None
    except Exception:  # not found, or no longer valid: the records still tell the timeline
        return None


def lesson_for(source) -> Lesson | None:
    """The lesson of whatever feeds the screen: the scenario a live lab plays, the whole recording
    of a replay, or the important records a model has seen so far (a lab in another process)."""
    play = getattr(source, "play", None)
    if source.scenario and play is not None and getattr(play, "prepared", None) is not None:
        return from_scenario(play.prepared.scenario)
    records = getattr(source, "records", None)
    if not records:
        if not source.model.run.get("scenario"):  # no scenario, no lesson: nothing to copy
            return None
        records = [r for _, r in source.model.kept]
    if not records or not records[0].get("scenario"):
        return None
    return from_records(records, bundled_scenario(records[0]["scenario"]))


def phase_at(lesson: Lesson, t: float) -> str:
    """The phases under way at `t` (they may overlap), or where the run is between them."""
    if t >= lesson.duration:
        return "ended"
    current = [name for name, start, end in lesson.phases if start <= t < end]
    if current:
        return " + ".join(current)
    first = min((start for _, start, _ in lesson.phases), default=math.inf)
    step = min((at for at, _ in lesson.steps), default=math.inf)
    return "before the faults" if t < min(first, step) else "between phases"


def ended(lesson: Lesson | None, now: float, drained: bool) -> bool:
    return drained or (lesson is not None and now >= lesson.duration)


def ruler(lesson: Lesson, now: float, width: int) -> str:
    """The timeline as one line of `width` cells: `┃` a fault, `▲` now, `─` time going by."""
    width = max(width, 2)
    if not math.isfinite(lesson.duration) or lesson.duration <= 0:
        return ""

    def cell(t: float) -> int:
        return min(width - 1, max(0, int(t / lesson.duration * (width - 1) + 0.5)))

    line = ["─"] * width
    for at, _ in lesson.steps:
        line[cell(at)] = "┃"
    line[cell(min(now, lesson.duration))] = "▲"
    return "".join(line)


def verdict(statuses: list[str], is_ended: bool) -> tuple[str, str]:
    """(text, tag) where tag is ok | failed | unknown | pending — Jepsen's valid / invalid / unknown."""
    if "failed" in statuses:
        return "INVALID: an expectation failed", "failed"
    if statuses and all(s == "ok" for s in statuses):
        return "VALID: every expectation held", "ok"
    if "pending" in statuses and not is_ended:
        return "pending: the run goes on", "pending"
    if "pending" in statuses:
        return "pending: the timeline ended, checks still deciding", "pending"
    return "UNKNOWN: some expectations could not be judged", "unknown"


def clock(t: float) -> str:
    """90 -> 1m30s, as scenarios write times."""
    minutes, seconds = divmod(int(round(t)), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
