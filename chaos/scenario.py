"""Scenario files: a cluster, a timeline of faults at virtual times, phases, expectations.

    # One sentence: what this scenario teaches.
    [scenario]
    teaches = "..."          # the same sentence, shown by `nslab scenarios`
    duration = "5m"
    seed = 7                 # optional default seed

    [client]                 # any cluster configuration section, as in a --config file
    pollNameServerInterval = "30s"

    [[timeline]]
    at = "1m"
    spread = "30s"           # optional: the seed moves the step later by up to this much
    fault = "kill"
    node = "broker-a-0"

    [[phase]]                # FoundationDB-style: a faulty phase, then a healed one
    name = "faulty"
    start = "1m"
    end = "3m"

    [[expect]]
    type = "broker_removed"
    broker = "broker-a-0"
    within = "5s"

    [[app]]                  # optional: an application under test, run beside the cluster; the
    name = "app"             # lab reads its keys (lab/apps/spec.py), this module only collects them
    command = "..."

This module reads the structure; the lab checks configuration keys, node names and expectation
types, and reports every error as FILE:LINE: KEY: what is wrong — before anything runs.
"""

from __future__ import annotations

import random
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .faults import Fault, FaultError, Vocabulary
from .toml_files import read_toml

SCENARIO_SECTIONS = ("scenario", "timeline", "phase", "expect", "app")
MAX_DURATION = 7 * 86_400.0  # a scenario's length: a simulated week already takes the better part of an hour


class ScenarioError(ValueError):
    """A bad scenario file; the message starts with FILE:LINE: KEY."""


@dataclass
class Step:
    at: float
    fault: Fault
    index: int
    spread: float = 0.0  # the seed moves `at` later by up to this much (Scenario.place)


@dataclass
class Phase:
    name: str
    start: float
    end: float


@dataclass
class ExpectSpec:
    type: str
    params: dict
    index: int

    @property
    def name(self) -> str:
        label = self.params.get("name")
        if label:
            return str(label)
        details = " ".join(f"{k}={v}" for k, v in self.params.items() if k != "name")
        return f"{self.type} {details}".strip()


@dataclass
class Scenario:
    name: str
    path: Path
    text: str
    teaches: str
    duration: float
    seed: int | None
    config_table: dict
    timeline: list[Step] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)
    expectations: list[ExpectSpec] = field(default_factory=list)
    apps: list[dict] = field(default_factory=list)  # each [[app]] table, as written (the lab checks them)

    def locate(self, section: str, index: int | None = None, key: str | None = None) -> int:
        return locate(self.text, section, index, key)

    def error(self, message: str, section: str, index: int | None = None, key: str | None = None) -> ScenarioError:
        where = f"[[{section}]] #{index + 1}" if index is not None else f"[{section}]"
        label = f"{where} {key}" if key else where
        return ScenarioError(f"{self.path}:{self.locate(section, index, key)}: {label}: {message}")

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    def place(self, seed: int) -> None:
        """Move every step with a spread to its seeded time in [at, at + spread], never past the end:
        a sweep over seeds then tries the fault at moments across that window."""
        for step in self.timeline:
            if step.spread:
                offset = random.Random(f"{seed}:timeline:{step.index}").uniform(0.0, step.spread)
                step.at = min(round(step.at + offset, 3), self.duration)
        self.timeline.sort(key=lambda s: (s.at, s.index))

    def profile(self) -> list[str]:
        """The whole fault profile, one line per step, for printing before a run."""
        return [f"at {step.at:g}s: {step.fault.describe()}" for step in self.timeline]


def locate(text: str, section: str, index: int | None = None, key: str | None = None) -> int:
    """The 1-based line of `key` in `[section]` (or in the index-th `[[section]]`); the section's
    header line when the key is not found; 1 when neither is."""
    lines = text.splitlines()
    header = re.compile(r"^\s*\[\[\s*" + re.escape(section) + r"\s*\]\]" if index is not None
                        else r"^\s*\[\s*" + re.escape(section) + r"\s*\]")
    starts = [i for i, line in enumerate(lines) if header.match(line)]
    if index is not None:
        starts = starts[index:index + 1]
    if not starts:
        return 1
    start = starts[0]
    if key is None:
        return start + 1
    pattern = re.compile(r"^\s*\"?" + re.escape(key) + r"\"?\s*=")
    for i in range(start + 1, len(lines)):
        if re.match(r"^\s*\[", lines[i]):
            break
        if pattern.match(lines[i]):
            return i + 1
    return start + 1


def load_scenario(path: str | Path, vocabulary: Vocabulary, text: str | None = None) -> Scenario:
    """The scenario in the file at `path`, or in `text` when given (`path` then only names it: a
    sweep's executors get the text, not the driver's files)."""
    path = Path(path)
    try:
        text, data = read_toml(path, text)
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    parse_duration = vocabulary.parse_duration
    meta = data.get("scenario", {})
    scenario = Scenario(
        name=path.stem, path=path, text=text, teaches="", duration=0.0, seed=None,
        config_table={k: v for k, v in data.items() if k not in SCENARIO_SECTIONS},
    )
    if not isinstance(meta, dict):
        raise scenario.error("must be a table", "scenario")
    for key in meta:
        if key not in ("teaches", "duration", "seed", "name"):
            raise scenario.error("unknown key (keys: teaches, duration, seed)", "scenario", key=key)
    scenario.teaches = str(meta.get("teaches", "")).strip()
    if not scenario.teaches:
        raise scenario.error("say in one sentence what the scenario teaches", "scenario", key="teaches")
    scenario.duration = _duration(scenario, meta.get("duration"), parse_duration, "scenario", None, "duration")
    if scenario.duration > MAX_DURATION:
        raise scenario.error(f"{scenario.duration:g}s is out of range 0..{MAX_DURATION:g}s (a week)", "scenario",
                             key="duration")
    seed = meta.get("seed")
    if seed is not None and (type(seed) is not int or seed < 0):
        raise scenario.error(f"a seed is a whole number >= 0, not {seed!r}", "scenario", key="seed")
    scenario.seed = seed

    for i, table in enumerate(_tables(scenario, data, "timeline")):
        at = _duration(scenario, table.get("at"), parse_duration, "timeline", i, "at")
        spread = _duration(scenario, table.get("spread", 0), parse_duration, "timeline", i, "spread")
        if spread > scenario.duration:
            raise scenario.error(f"{spread:g}s is out of range 0..{scenario.duration:g}s (the scenario's duration)",
                                 "timeline", i, "spread")
        if at > scenario.duration:
            raise scenario.error(f"{at:g}s is after the scenario's end ({scenario.duration:g}s)", "timeline", i, "at")
        try:
            fault = vocabulary.parse_table(table)
        except FaultError as e:
            key, _, message = str(e).partition(": ")
            raise scenario.error(message or str(e), "timeline", i, key if key in table or key in ("node", "groups", "kind", "fault") else None) from None
        scenario.timeline.append(Step(at, fault, i, spread))
    scenario.timeline.sort(key=lambda s: (s.at, s.index))

    for i, table in enumerate(_tables(scenario, data, "phase")):
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise scenario.error("a phase needs a name", "phase", i, "name")
        start = _duration(scenario, table.get("start", 0), parse_duration, "phase", i, "start")
        end = _duration(scenario, table.get("end", scenario.duration), parse_duration, "phase", i, "end")
        if end < start:
            raise scenario.error("ends before it starts", "phase", i, "end")
        if end > scenario.duration:
            raise scenario.error(f"{end:g}s is after the scenario's end ({scenario.duration:g}s)", "phase", i, "end")
        if scenario.phase(name):
            raise scenario.error(f"a second phase named {name!r}", "phase", i, "name")
        scenario.phases.append(Phase(name, start, end))

    for i, table in enumerate(_tables(scenario, data, "expect")):
        kind = table.get("type")
        if not isinstance(kind, str) or not kind:
            raise scenario.error("an expectation needs a type", "expect", i, "type")
        phase = table.get("phase")
        if phase is not None and scenario.phase(phase) is None:
            raise scenario.error(f"no phase named {phase!r}", "expect", i, "phase")
        scenario.expectations.append(ExpectSpec(kind, {k: v for k, v in table.items() if k != "type"}, i))

    scenario.apps = list(_tables(scenario, data, "app"))
    return scenario


def _tables(scenario: Scenario, data: dict, section: str) -> list[dict]:
    tables = data.get(section, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise scenario.error(f"write each entry as a [[{section}]] table", section)
    return tables


def _duration(scenario: Scenario, value, parse_duration, section: str, index: int | None, key: str) -> float:
    if value is None:
        raise scenario.error("missing (a duration such as 30s or 2m)", section, index, key)
    try:
        return parse_duration(value)
    except ValueError as e:
        raise scenario.error(str(e), section, index, key) from None
