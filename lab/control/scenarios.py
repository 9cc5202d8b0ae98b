"""Running a scenario: check everything before the run, play the timeline on the cluster, check
the expectations as the run goes, and give a verdict Jepsen's way (valid / invalid / unknown).

Bundled scenarios live in chaos/scenarios/*.toml; docs/scenarios.md is their reference.
"""

from __future__ import annotations

import math
import signal
import time
import xml.etree.ElementTree as ET
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import outcome
import trio

import chaos
from chaos.checks import Checker, Result, verdict
from chaos.faults import Fault, FaultError
from chaos.scenario import Scenario, ScenarioError, load_scenario

from lab.apps import spec as app_spec
from lab.apps.node import ROLE as APP_ROLE
from lab.apps.spec import AppSpec
from lab.control import expectations
from lab.config import ConfigError, LabConfig, apply_overrides, apply_table, parse_duration
from .actions import LabControl, validate, vocabulary
from chaos.trio_internals import deterministic_scheduling
from lab.run.runner import RunOptions, collector_tuned_for_a_run, make_clock, run_cluster
from lab.run.topology import Topology, plan

BUNDLED = Path(chaos.__file__).resolve().parent / "scenarios"
TICK = 1.0  # seconds of run time between checks of time-based expectations
DRAIN = 30.0  # after the timeline: producers stop, consumers get this long to catch up

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN = 0, 1, 2


def bundled() -> list[Path]:
    """The bundled library the seed gate, the benchmarks and `nslab scenarios` run simulated: every
    scenario but the app-*.toml ones (app_scenarios)."""
    return sorted(p for p in BUNDLED.glob("*.toml") if not p.stem.startswith(APP_PREFIX))


APP_PREFIX = "app-"


def app_scenarios() -> list[Path]:
    """The bundled app scenarios (issue 39): a real application under chaos, over sockets at real
    time; `nslab run app-NAME --app CMD`. No simulated run can play them, so bundled() leaves them out."""
    return sorted(BUNDLED.glob(f"{APP_PREFIX}*.toml"))


def find(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return path
    candidate = BUNDLED / f"{name_or_path}.toml"
    if candidate.exists():
        return candidate
    names = ", ".join(p.stem for p in bundled() + app_scenarios())
    raise ScenarioError(f"no scenario {name_or_path!r}: give a .toml file or one of: {names}")


@dataclass
class Prepared:
    scenario: Scenario
    config: LabConfig
    topology: Topology
    seed: int
    # Applications under test (lab/apps): the scenario's [[app]] tables, then `--app` options. One
    # without a command is a slot the command line must fill before the run (app_problem).
    apps: list[AppSpec] = field(default_factory=list)


def prepare(name_or_path: str, *, seed: int | None = None, overrides: list[str] = (),
            text: str | None = None, apps: list[str] = ()) -> Prepared:
    """Everything a run needs, checked: config keys, node names, expectations, apps. Raises
    ScenarioError or ConfigError naming file, line and key. With `text`, the scenario is that text
    and `name_or_path` only its name. `apps`: `--app` options ('CMD' or 'NAME=CMD')."""
    path = Path(name_or_path) if text is not None else find(name_or_path)
    scenario = load_scenario(path, vocabulary(), text)
    config = LabConfig()
    apply_table(config, scenario.config_table, path=str(scenario.path), text=scenario.text)
    apply_overrides(config, overrides)
    if seed is None:
        seed = scenario.seed if scenario.seed is not None else 1
    scenario.place(seed)
    topology = plan(config, seed)
    roles = topology.roles()
    app_specs = _apps(scenario, roles, apps)
    roles = {**roles, **{a.name: APP_ROLE for a in app_specs}}
    broker_names = {b.broker_name for b in topology.brokers}
    for step in scenario.timeline:
        try:
            validate(step.fault, roles, broker_names)
        except FaultError as e:
            key = "groups" if step.fault.groups else "node"
            raise scenario.error(str(e), "timeline", step.index, key) from None
    expectations.build(scenario, config, topology, expectations.ClusterView())  # validation only
    return Prepared(scenario, config, topology, seed, app_specs)


def _apps(scenario: Scenario, roles: dict[str, str], options: list[str]) -> list[AppSpec]:
    """The scenario's [[app]] tables and the `--app` options, checked: names unique, none a lab node's."""
    declared = []
    for i, table in enumerate(scenario.apps):
        try:
            spec = app_spec.from_table(table, parse_duration)
        except app_spec.AppSpecError as e:
            key, _, message = str(e).partition(": ")
            raise scenario.error(message, "app", i, key if key in table else None) from None
        if spec.name in roles:
            raise scenario.error(f"{spec.name!r} is the name of a lab node ({roles[spec.name]}): "
                                 "give the app another", "app", i, "name")
        if any(a.name == spec.name for a in declared):
            raise scenario.error(f"a second app named {spec.name!r}", "app", i, "name")
        declared.append(spec)
    try:
        combined = app_spec.combine(declared, list(options))
    except app_spec.AppSpecError as e:
        raise ScenarioError(f"--app: {e}") from None
    for spec in combined[len(declared):]:
        if spec.name in roles:
            raise ScenarioError(f"--app: {spec.name!r} is the name of a lab node ({roles[spec.name]}): "
                                f"name the app another way, --app 'NAME=CMD'")
    return combined


def app_problem(prepared: Prepared, options: RunOptions) -> str | None:
    """Why a scenario with apps cannot run so, or None: an app needs real sockets at real time, and
    a command for every app the scenario declares."""
    if not prepared.apps:
        return None
    missing = app_spec.missing_commands(prepared.apps)
    if missing:
        return (f"{prepared.scenario.path}: the scenario runs an application it does not name ({', '.join(missing)}): "
                f"give its command, nslab run {prepared.scenario.name} --app 'CMD'")
    if options.sim:
        return "an application runs only on real sockets: add --sockets"
    if options.speed not in (None, 1, 1.0):
        return "an application runs at real time (its own timers cannot be sped up): leave --speed out"
    if options.processes:
        return "an application runs with the lab's nodes in one process: leave --processes out"
    return None


@dataclass
class Verdict:
    scenario: str
    seed: int
    results: list[Result] = field(default_factory=list)
    virtual_seconds: float = 0.0
    wall_seconds: float = 0.0
    event_count: int = 0
    event_log_sha256: str = ""
    error: str | None = None  # the run could not be judged

    @property
    def valid(self) -> bool | None:
        if self.error is not None:
            return None
        return verdict(self.results)

    @property
    def exit_code(self) -> int:
        return {True: EXIT_VALID, False: EXIT_INVALID, None: EXIT_UNKNOWN}[self.valid]

    def to_dict(self) -> dict:
        return {
            "scenario": self.scenario, "seed": self.seed, "valid": self.valid,
            "virtual_seconds": round(self.virtual_seconds, 3), "wall_seconds": round(self.wall_seconds, 3),
            "event_count": self.event_count, "event_log_sha256": self.event_log_sha256,
            "expectations": [r.to_dict() for r in self.results],
            **({"error": self.error} if self.error else {}),
        }

    def junit(self) -> str:
        failures = sum(r.ok is False for r in self.results)
        suite = ET.Element("testsuite", name=f"nslab.{self.scenario}", tests=str(len(self.results)),
                           failures=str(failures), skipped=str(sum(r.ok is None for r in self.results)),
                           errors="1" if self.error else "0",
                           time=f"{self.wall_seconds:.3f}")
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="seed", value=str(self.seed))
        for r in self.results:
            case = ET.SubElement(suite, "testcase", classname=f"nslab.{self.scenario}", name=r.name)
            if r.ok is False:
                ET.SubElement(case, "failure", message=r.detail).text = r.detail
            elif r.ok is None:
                ET.SubElement(case, "skipped", message=r.detail)
        if self.error:
            case = ET.SubElement(suite, "testcase", classname=f"nslab.{self.scenario}", name="run")
            ET.SubElement(case, "error", message=self.error).text = self.error
        return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def run(prepared: Prepared, options: RunOptions, *, on_result=None, signals: bool = False) -> Verdict:
    """Run a prepared scenario. options.sim selects the simulated network on virtual time.
    signals: SIGINT and SIGTERM end the run, unjudged (`nslab run`: only a main thread can take them)."""
    options.seed = prepared.seed
    if options.sim:
        deterministic_scheduling(prepared.seed)
    with collector_tuned_for_a_run():
        return trio.run(lambda: run_async(prepared, options, on_result=on_result, signals=signals),
                        clock=make_clock(options))


class Play:
    """A scenario's timeline and checks, ready to drive a cluster: `driver` and `subscribers` go to
    run_cluster. run_async below uses it headless; the TUI plays it on screen."""

    def __init__(self, prepared: Prepared, *, on_result=None):
        self.prepared = prepared
        self.verdict = Verdict(prepared.scenario.name, prepared.seed)
        self.on_result = on_result
        self.events = None  # the run's EventLog, once it exists
        view = expectations.ClusterView()
        self.checker = Checker(expectations.build(prepared.scenario, prepared.config, prepared.topology, view),
                               on_decided=self._decided)
        self.subscribers = [view.observe, self.checker.observe]
        self.control: LabControl | None = None  # once the driver runs
        self._injected: list = []
        self._finish = False

    @property
    def names(self) -> list[str]:
        return [check.name for check in self.checker.checks]

    def _decided(self, result: Result) -> None:
        if self.events is not None:  # decisions before the cluster is up are rare; on_result still hears them
            self.events.emit("lab", "check.result", name=result.name, ok=result.ok, status=result.status,
                             detail=result.detail)
        if self.on_result is not None:
            self.on_result(result)

    # --- live actions (the TUI, `nslab chaos`): applied where a timeline step would be ---------------

    def inject(self, fault: Fault, source: str, on_done: Callable[[outcome.Outcome], None]) -> None:
        """Apply `fault` at the driver's next wake (the next whole second of the run, or sooner
        step), as a timeline step at that time: a run is then a pure function of its seed and its
        steps, and `nslab replay --export-scenario` replays it to the byte. Callable from outside
        trio (the screen's loop): it only appends to a list."""
        self._injected.append((fault, source, on_done))

    def finish(self) -> None:
        """End the run at the driver's next wake: producers stop, consumers drain, the run ends."""
        self._finish = True

    async def driver(self, cluster, events, nursery) -> None:
        """One loop in the run's main task: at each whole second of the run and at each step's time,
        apply what is due (timeline steps, then live actions), then tick the checks; at the end, stop
        the producers and let consumers drain."""
        self.events = events
        scenario, checker = self.prepared.scenario, self.checker
        self.control = control = LabControl(cluster, nursery)
        steps, done, tick = scenario.timeline, 0, 0
        while True:
            due = min((tick + 1) * TICK, steps[done].at if done < len(steps) else math.inf, scenario.duration)
            await trio.sleep_until(events.clock_time(due))
            while done < len(steps) and steps[done].at <= due:
                await control.apply(steps[done].fault, source="scenario")
                done += 1
            injected, self._injected = self._injected, []
            for fault, source, on_done in injected:
                on_done(await outcome.acapture(control.apply, fault, source=source))
            if due == (tick + 1) * TICK:
                tick += 1
                checker.tick(events.now())
            if due >= scenario.duration or self._finish:
                break
        # The drain is for the checks (no acknowledged message left unconsumed): a live lab with
        # none, ended by its user, stops at once.
        # Applications stop at the timeline's end (SIGTERM, SIGKILL after their grace); then the
        # drain is for the lab's own consumers, if it has any.
        await cluster.stop_apps("end")
        lab_consumers = any(h.role == "consumer" for h in cluster.supervisor.nodes.values())
        drain = DRAIN if checker.checks and (lab_consumers or cluster.apps is None) else 0.0
        events.emit("lab", "run.drain", seconds=drain)
        for name, handle in list(cluster.supervisor.nodes.items()):
            if handle.role == "producer":
                await cluster.supervisor.stop(name)
        await trio.sleep(drain)
        self.verdict.results = checker.finish(events.now())
        crashed = [h for h in cluster.supervisor.nodes.values() if h.state == "crashed" and h.role != "producer"
                   and h.role != "consumer"]
        if crashed:
            self.verdict.error = "; ".join(f"{h.name} crashed: {h.error}" for h in crashed)


def live_play(config: LabConfig, seed: int) -> Play:
    """What a live lab plays when no scenario is: no timeline, no expectations, no end but the
    user's — only the actions injected as it runs."""
    scenario = Scenario(name="live", path=Path("live"), text="", teaches="", duration=math.inf, seed=seed,
                        config_table={})
    return Play(Prepared(scenario, config, plan(config, seed), seed))


async def run_async(prepared: Prepared, options: RunOptions, *, on_result=None, signals: bool = False) -> Verdict:
    play = Play(prepared, on_result=on_result)
    verdict = play.verdict
    wall = time.monotonic()
    result = None
    problem = app_problem(prepared, options)
    if problem is not None:
        verdict.error = problem
        return verdict
    options.apps = list(prepared.apps)
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) if signals else nullcontext() as received:
            async with trio.open_nursery() as nursery:
                async def interrupt():
                    async for signum in received:  # a verdict needs the whole run: none can be given
                        when = f"at t={play.events.now():.1f} s" if play.events else "during start-up"
                        verdict.error = f"interrupted by {signal.Signals(signum).name} {when}"
                        nursery.cancel_scope.cancel()
                if received is not None:
                    nursery.start_soon(interrupt)
                result = await run_cluster(prepared.config, options, scenario=prepared.scenario.name,
                                           driver=play.driver, subscribers=play.subscribers)
                nursery.cancel_scope.cancel()
    except Exception as e:  # a bug in the lab: this run says nothing about the system under test
        while isinstance(e, ExceptionGroup) and len(e.exceptions) == 1:  # the nursery's wrapping
            e = e.exceptions[0]
        verdict.error = f"{type(e).__name__}: {e}"
    if result is None:  # the error says why
        verdict.wall_seconds = time.monotonic() - wall
        if play.events is not None:  # as far as it went
            verdict.virtual_seconds, verdict.event_count = play.events.now(), play.events.count
        return verdict
    verdict.virtual_seconds, verdict.wall_seconds = result.virtual_seconds, result.wall_seconds
    verdict.event_count, verdict.event_log_sha256 = result.event_count, result.event_log_sha256
    return verdict


__all__ = ["ConfigError", "Play", "ScenarioError", "Verdict", "app_problem", "app_scenarios", "bundled", "find", "live_play", "prepare", "run"]
