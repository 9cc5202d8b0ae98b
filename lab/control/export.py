"""A live run as a scenario: the chaos actions of an event log, at the virtual times they were
applied, with the run's seed and configuration (`nslab replay EVENTS --export-scenario FILE`).

A simulated TUI run applies every action where a timeline step would be (lab/control/scenarios.py,
Play.inject), so `nslab run FILE` repeats it record for record: the same bytes from the second
record on, but for each chaos.fault's `source` (tui, control, scenario).
"""

from __future__ import annotations

import json
import math

FAULT_FIELDS = ("t", "node", "kind", "source", "verb", "nodes", "groups", "one_way", "toxic", "toxic_table", "for_s")


def export_scenario(records: list[dict], *, origin: str) -> str:
    """The TOML text of the scenario; ValueError when the log cannot make one."""
    start = next((r for r in records if r.get("kind") == "run.start"), None)
    if start is None:
        raise ValueError("no run.start record: not an nslab event log")
    if start.get("mode") != "sim":
        raise ValueError("only a simulated run (--sim) can be replayed to the byte; this one ran on sockets")
    drain = next((r for r in records if r.get("kind") == "run.drain"), None)
    if drain is None:
        raise ValueError("the log ends before its run did (no run.drain record): it cannot say how long the run was")
    lines = [f"# Recorded from {origin}: its chaos actions at the times they were applied.",
             "[scenario]",
             f"teaches = {_toml(f'The run recorded in {origin}, replayed.')}",
             f"duration = {_toml(_seconds(drain['t']))}",
             f"seed = {int(start['seed'])}"]
    for section, table in start.get("config", {}).items():
        lines += ["", f"[{section}]"] + [f"{key} = {_toml(value)}" for key, value in table.items()]
    for r in records:
        if r.get("kind") == "chaos.fault":
            lines += ["", "[[timeline]]", f"at = {_toml(_seconds(r['t']))}"]
            lines += [f"{key} = {_toml(value)}" for key, value in _timeline_table(r).items()]
    return "\n".join(lines) + "\n"


def _timeline_table(r: dict) -> dict:
    table: dict = {"fault": r["verb"]}
    if "groups" in r:
        table["groups"] = r["groups"]
        table["one_way"] = bool(r.get("one_way"))
        return table
    nodes = r.get("nodes", [])
    if nodes:
        table["node"] = nodes[0]
    if "toxic_table" in r:
        if len(nodes) == 2:
            table["peer"] = nodes[1]
        table.update(r["toxic_table"])
    table.update({k: v for k, v in r.items() if k not in FAULT_FIELDS})
    return table


def _seconds(t: float) -> str:
    return f"{t!r}s"  # repr: the exact float, which parse_duration reads back to the same bits


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value} has no TOML form")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise ValueError(f"{value!r} has no TOML form here")
