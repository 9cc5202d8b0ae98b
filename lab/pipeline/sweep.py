"""`nslab sweep`: a grid of config values × seeds, each run a Spark task on an executor.

Every task prepares the scenario (its text travels with the task: executors need none of the
driver's files) with its seed and overrides, runs it simulated into a temporary file, and sends the
log back compressed with its outcome. The driver writes each log into --out through its Store as it
arrives, so no filesystem is shared with the executors, and keeps sweep.json current. A run that
raises, or that the lab could not judge, is recorded as failed; the sweep carries on.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import tempfile
import threading
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from lab.config import ConfigError
from lab.control import scenarios
from lab.run.runner import RunOptions

from .storage import Store

MANIFEST = "sweep.json"
LOG_SUFFIX = ".events"
MANIFEST_EVERY = 1.0  # s: sweep.json is rewritten at most this often while runs arrive


class SweepError(RuntimeError):
    """The sweep cannot start as asked; the message says why and what to do."""


@dataclass(frozen=True)
class RunSpec:
    scenario: str  # its name: a bundled scenario's, or the file's stem
    scenario_text: str
    seed: int
    grid: dict[str, str]  # key -> value, in the order of the --set options
    grid_index: int
    log: str  # the log's file name in --out

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


def plan(scenario: str, seeds: int, sets: list[str]) -> list[RunSpec]:
    """Every run of the sweep, each grid point checked on the driver first (a bad key or value is
    a usage error, not 100 failed runs)."""
    points = parse_grid(sets)
    path = scenarios.find(scenario)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SweepError(f"{path}: cannot read: {e.strerror or e}") from None
    specs = []
    for index, grid in enumerate(points):
        scenarios.prepare(path.stem, seed=1, overrides=[f"{k}={v}" for k, v in grid.items()], text=text)
        for seed in range(1, seeds + 1):
            specs.append(RunSpec(path.stem, text, seed, grid, index,
                                 f"{path.stem}-g{index:02d}-s{seed:04d}{LOG_SUFFIX}"))
    return specs


def run_one(spec: RunSpec) -> tuple[dict, bytes]:
    """One run, on an executor: its record and its log, zlib-compressed. Never raises: the record
    says what happened."""
    record = {**_identity(spec), "status": "failed", "error": None, "wall_seconds": 0.0, "event_count": 0,
              "expectations": [], "failed_expectations": []}
    start = time.monotonic()
    fd, tmp = tempfile.mkstemp(prefix="nslab-run-", suffix=LOG_SUFFIX)
    os.close(fd)
    log = b""
    try:
        prepared = scenarios.prepare(spec.scenario, seed=spec.seed, overrides=spec.overrides, text=spec.scenario_text)
        verdict = scenarios.run(prepared, RunOptions(sim=True, events_path=Path(tmp), grid=spec.grid,
                                                     grid_index=spec.grid_index))
        record["event_count"] = verdict.event_count
        record["error"] = verdict.error
        record["expectations"] = [r.to_dict() for r in verdict.results]
        record["failed_expectations"] = [f"{r.name}: {r.detail}" for r in verdict.results if r.ok is False]
        if verdict.valid is not None:
            record["status"] = "valid" if verdict.valid else "invalid"
    except Exception as e:  # a lab bug or a broken environment: this run says nothing, the rest may
        record["error"] = f"{type(e).__name__}: {e}"
    finally:
        try:
            log = Path(tmp).read_bytes()
        finally:
            os.unlink(tmp)
    record["wall_seconds"] = round(time.monotonic() - start, 3)
    return record, zlib.compress(log, 1)


def _identity(spec: RunSpec) -> dict:
    """What makes two runs the same run: --resume skips a recorded run only if all of it matches."""
    return {"scenario": spec.scenario, "seed": spec.seed, "grid": spec.grid, "grid_index": spec.grid_index,
            "log": spec.log}


class Manifest:
    """sweep.json: the sweep's identity and every run's outcome, rewritten as runs arrive."""

    def __init__(self, store: Store, specs: list[RunSpec], seeds: int):
        self.store = store
        self.head = identity(specs, seeds)
        self.runs: dict[str, dict] = {}
        self.written = 0.0
        self.lock = threading.Lock()

    def add(self, record: dict, *, flush: bool = False) -> None:
        with self.lock:
            self.runs[record["log"]] = record
            if flush or time.monotonic() - self.written >= MANIFEST_EVERY:
                self._write()

    def write(self) -> None:
        with self.lock:
            self._write()

    def _write(self) -> None:
        runs = sorted(self.runs.values(), key=lambda r: (r["grid_index"], r["seed"]))
        self.store.write_text(MANIFEST, json.dumps({**self.head, "runs": runs}, indent=2))
        self.written = time.monotonic()


def identity(specs: list[RunSpec], seeds: int) -> dict:
    """What sweep.json says the sweep is: --resume continues only the same scenario text and grid."""
    first = specs[0]
    return {"scenario": first.scenario, "scenario_sha256": hashlib.sha256(first.scenario_text.encode()).hexdigest(),
            "seeds": seeds, "grid": [spec.grid for spec in specs if spec.seed == first.seed]}


def prepare_out(store: Store, specs: list[RunSpec], seeds: int, *, resume: bool, force: bool) -> list[dict]:
    """Make --out ready: refuse old results unless told what to do with them. Returns the recorded
    runs --resume keeps (their logs are there, whole, and they were judged)."""
    if store.is_empty():
        return []
    logs = store.list(LOG_SUFFIX)
    if force:
        for name in [*logs, MANIFEST, "report"]:
            store.delete(name)
        return []
    if not resume:
        raise SweepError(f"--out {store.uri} is not empty ({len(logs)} event logs"
                         f"{', ' + MANIFEST if store.exists(MANIFEST) else ''}): add --resume to finish the "
                         "sweep recorded there, or --force to replace it, or choose another --out")
    if not store.exists(MANIFEST):
        raise SweepError(f"--resume: {store.uri} has no {MANIFEST}, so nothing there can be trusted as "
                         "complete: use --force to replace it")
    try:
        old = json.loads(store.read_text(MANIFEST))
    except (ValueError, UnicodeDecodeError) as e:
        raise SweepError(f"--resume: {store.child(MANIFEST)} is not valid JSON ({e}): use --force") from None
    mine = identity(specs, seeds)
    for key, what in (("scenario", "scenario"), ("scenario_sha256", "scenario text"), ("grid", "grid")):
        if old.get(key) != mine[key]:
            raise SweepError(f"--resume: {store.uri} holds a sweep with another {what} "
                             f"({old.get(key)!r}, not {mine[key]!r}): use --force, or another --out")
    wanted = {spec.log: _identity(spec) for spec in specs}
    kept = []
    for record in old.get("runs", []):
        name = record.get("log")
        if (name in wanted and record.get("status") in ("valid", "invalid")
                and all(record.get(k) == v for k, v in wanted[name].items())
                and logs.get(name) == record.get("bytes")):
            kept.append(record)
    return kept


def run_all(spark, specs: list[RunSpec], store: Store, manifest: Manifest,
            on_progress=lambda done, total: None) -> list[dict]:
    """Run every spec as its own small Spark job, several at once, writing each log through the
    store as it arrives; on_progress(done, total) as they finish."""
    sc = spark.sparkContext
    group = f"nslab-sweep-{uuid.uuid4().hex}"

    def job(spec: RunSpec) -> dict:
        sc.setJobGroup(group, f"nslab sweep {spec.log}")
        record, packed = sc.parallelize([spec], 1).map(run_one).collect()[0]
        data = zlib.decompress(packed)
        store.write_bytes(spec.log, data)
        record |= {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        manifest.add(record)
        return record

    # Enough jobs in flight that every executor core always has a task waiting.
    width = max(2, 2 * sc.defaultParallelism)
    results, done = [], 0
    on_progress(0, len(specs))
    with ThreadPoolExecutor(width, thread_name_prefix="nslab-sweep") as pool:
        futures = [pool.submit(job, spec) for spec in specs]
        try:
            for future in as_completed(futures):
                results.append(future.result())
                done += 1
                on_progress(done, len(specs))
        except BaseException:  # Ctrl-C or a store that stopped taking writes: stop every run
            for future in futures:
                future.cancel()
            sc.cancelJobGroup(group)
            raise
        finally:
            manifest.write()
    return results


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
