"""`nslab sweep`: a grid of config values × seeds, each run a Spark task on an executor.

Every task prepares the scenario with its seed and overrides and runs it simulated, writing its
event log into the sweep's directory with its grid point in run.start (`grid`). A run that raises,
or that the lab could not judge, is recorded as failed; the sweep carries on. sweep.json lists
every run with its outcome.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, TimeoutError
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.control import scenarios
from lab.config import ConfigError
from lab.run.runner import RunOptions

MANIFEST = "sweep.json"


@dataclass(frozen=True)
class RunSpec:
    scenario: str
    seed: int
    grid: dict[str, str]  # key -> value, in the order of the --set options
    events_path: str

    @property
    def overrides(self) -> list[str]:
        return [f"{key}={value}" for key, value in self.grid.items()]


def parse_grid(sets: list[str]) -> list[dict[str, str]]:
    """`key=v1,v2` options into every combination, e.g. two keys of two values: four points."""
    axes = []
    for item in sets:
        key, sep, values = item.partition("=")
        choices = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or "." not in key or not choices:
            raise ConfigError(f"--set {item!r}: expected section.key=value[,value...], "
                              "e.g. client.pollNameServerInterval=10s,30s")
        axes.append([(key.strip(), value) for value in choices])
    return [dict(point) for point in itertools.product(*axes)]


def plan(scenario: str, seeds: int, sets: list[str], out: Path) -> list[RunSpec]:
    """Every run of the sweep, each grid point checked on the driver first (a bad key or value is
    a usage error, not 100 failed runs)."""
    points = parse_grid(sets)
    path = scenarios.find(scenario)
    stem = path.stem
    if path == Path(scenario):  # a file the user named: executors need its absolute path
        scenario = str(path.resolve())
    specs = []
    for index, grid in enumerate(points):
        scenarios.prepare(scenario, seed=1, overrides=[f"{k}={v}" for k, v in grid.items()])
        for seed in range(1, seeds + 1):
            events = out / f"{stem}-g{index:02d}-s{seed:04d}.events"
            specs.append(RunSpec(scenario, seed, grid, str(events.resolve())))
    return specs


def run_one(spec: RunSpec) -> dict:
    """One run, on an executor. Never raises: the outcome says what happened."""
    record = {**asdict(spec), "status": "failed", "error": None, "wall_seconds": 0.0, "event_count": 0}
    start = time.monotonic()
    try:
        prepared = scenarios.prepare(spec.scenario, seed=spec.seed, overrides=spec.overrides)
        verdict = scenarios.run(prepared, RunOptions(sim=True, events_path=Path(spec.events_path), grid=spec.grid))
        record["event_count"] = verdict.event_count
        record["error"] = verdict.error
        if verdict.valid is not None:
            record["status"] = "valid" if verdict.valid else "invalid"
    except Exception as e:  # a lab bug or a broken environment: this run says nothing, the rest may
        record["error"] = f"{type(e).__name__}: {e}"
    record["wall_seconds"] = round(time.monotonic() - start, 3)
    return record


def run_all(spark, specs: list[RunSpec], on_progress=lambda done, total: None) -> list[dict]:
    """Run every spec as one task; on_progress(done, total) is called while they run."""
    sc = spark.sparkContext
    group = f"nslab-sweep-{uuid.uuid4().hex}"

    def job() -> list[dict]:
        sc.setJobGroup(group, "nslab sweep")
        return sc.parallelize(specs, len(specs)).map(run_one).collect()

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(job)
        while True:
            try:
                results = future.result(timeout=0.5)
                on_progress(len(specs), len(specs))
                return results
            except TimeoutError:
                on_progress(_done(sc, group), len(specs))


def _done(sc, group: str) -> int:
    tracker = sc.statusTracker()
    done = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            stage = tracker.getStageInfo(stage_id)
            done += stage.numCompletedTasks if stage else 0
    return done


class ProgressBar:
    """A bar redrawn in place on a terminal; elsewhere (CI logs), a line every tenth of the way."""

    def __init__(self, label: str, stream=None, width: int = 30):
        self.label, self.stream, self.width = label, stream or sys.stderr, width
        self.start = time.monotonic()
        self.tty = self.stream.isatty()
        self.shown = -1
        self.finished = False

    def __call__(self, done: int, total: int) -> None:
        step = done * 10 // max(total, 1)
        if self.finished or (not self.tty and step == self.shown):
            return
        self.shown, self.finished = step, done == total
        filled = self.width * done // max(total, 1)
        elapsed = time.monotonic() - self.start
        text = f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} runs, {elapsed:.0f} s"
        self.stream.write(f"\r{text}" if self.tty else f"{text}\n")
        if self.tty and self.finished:
            self.stream.write("\n")
        self.stream.flush()


def write_manifest(out: Path, scenario: str, seeds: int, results: list[dict]) -> Path:
    path = out / MANIFEST
    path.write_text(json.dumps({"scenario": scenario, "seeds": seeds, "runs": results}, indent=2))
    return path
