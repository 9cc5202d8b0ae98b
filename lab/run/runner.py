"""Running a cluster: which network, which clock, the event log, and determinism.

Three clocks: real time; accelerated (trio's `MockClock(rate=speed)`: a 120 s expiry takes
120/speed s); virtual (chaos.clock.VirtualClock: time jumps to the next deadline or network timer
as soon as every task waits — the headless simulated default, as fast as the CPU allows).

In simulated mode a run is a pure function of (config, seed): no wall clock, every RNG seeded,
and trio's scheduler made deterministic the way pytest-trio and Hypothesis do it.
"""

from __future__ import annotations

import gc
import math
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import trio

from chaos.clock import VirtualClock
from chaos.links import Links
from chaos.network import Network
from chaos.trio_internals import deterministic_scheduling

from .cluster import Cluster
from .networks import sim_network, tcp_network
from lab.apps.process import logs_dir
from lab.config import LabConfig
from lab.events import EventLog
from lab.remoting.epoch import epoch_base_ms

VERSION = "0.1.0"


@dataclass
class RunOptions:
    sim: bool = False
    seed: int = field(default_factory=lambda: random.SystemRandom().randrange(2**31))
    speed: float | None = None
    duration: float | None = None
    events_path: Path | None = None
    run_dir: Path | None = None
    grid: dict[str, str] | None = None  # a sweep's grid point, added to run.start when given
    grid_index: int | None = None  # its place in the sweep's grid, so a report lists points as given
    processes: bool = False  # NameServers and brokers as child processes (sockets mode only)
    apps: list = field(default_factory=list)  # applications under test (lab/apps/spec.py AppSpec; sockets only)
    apps_dir: Path | None = None  # their stdout and stderr; None: lab/apps/process.py logs_dir decides


@dataclass
class RunResult:
    seed: int
    virtual_seconds: float
    wall_seconds: float
    event_count: int
    event_log_sha256: str


def make_clock(options: RunOptions):
    if options.speed is not None:
        import trio.testing  # here only: it imports pytest, a tenth of a second every run would pay

        return trio.testing.MockClock(rate=options.speed)
    if options.sim:
        return VirtualClock()
    return None  # real time


def make_network(options: RunOptions, config: LabConfig, nursery: trio.Nursery) -> Network:
    if options.sim:
        n = config.network
        return sim_network(Links(base_latency=n.latency, base_jitter=n.jitter, base_loss=n.loss), seed=options.seed)
    return tcp_network(nursery, Links(), seed=options.seed)


async def run_cluster(config: LabConfig, options: RunOptions, *,
                      on_ready: Callable[[Cluster], None] | None = None,
                      scenario: str | None = None, stop: trio.Event | None = None,
                      driver: Callable[[Cluster, EventLog, trio.Nursery], Awaitable[None]] | None = None,
                      subscribers: list[Callable[[dict], None]] = ()) -> RunResult:
    """Run until the duration ends or `stop` is set — or, given a driver (a scenario's timeline),
    until the driver returns — then shut the cluster down gracefully."""
    wall_start = time.monotonic()
    if options.sim:  # again here: whatever ran before in this trio run (a TUI's control server) drew nothing
        deterministic_scheduling(options.seed)
    events = EventLog(trio.lowlevel.current_clock().current_time, options.events_path)
    events.subscribers.extend(subscribers)  # from the first record on
    cluster = None
    try:
        async with trio.open_nursery() as nursery:
            network = make_network(options, config, nursery)
            if options.apps and options.sim:
                raise ValueError("an app runs only on real sockets, at real time (nslab run --sockets)")
            cluster = Cluster(config, network, events, seed=options.seed, sockets=not options.sim,
                              run_dir=options.run_dir, processes=options.processes and not options.sim,
                              apps=options.apps,
                              apps_dir=options.apps_dir or logs_dir(options.run_dir, options.events_path))
            events.start(seed=options.seed, version=VERSION, mode="sim" if options.sim else "sockets",
                         speed=options.speed, scenario=scenario, config=config.to_dict(),
                         topics=list(cluster.topology.topics),
                         nodes={**cluster.topology.roles(), **{a.name: "app" for a in options.apps}},
                         **({"apps": [a.to_record() for a in options.apps]} if options.apps else {}),
                         epoch_ms=epoch_base_ms(network, trio.current_time()),
                         **({"grid": options.grid} if options.grid is not None else {}),
                         **({"grid_index": options.grid_index} if options.grid_index is not None else {}))
            await nursery.start(cluster.run)
            if on_ready is not None:
                on_ready(cluster)
            if driver is not None:
                await driver(cluster, events, nursery)
            else:
                with trio.move_on_after(options.duration if options.duration is not None else math.inf):
                    await (stop if stop is not None else trio.Event()).wait()
            await cluster.shutdown()
            events.emit("lab", "run.end")
            nursery.cancel_scope.cancel()
        return RunResult(options.seed, events.now(), time.monotonic() - wall_start, events.count, events.sha256())
    finally:
        events.close()
        if cluster is not None:
            cluster.release()  # after every node, child processes too, has stopped


@contextmanager
def collector_tuned_for_a_run():
    """A run allocates many short-lived objects, while what exists when it starts (modules, the
    configuration) outlives it. Frozen, the old objects are not scanned again and again, and a larger
    first generation is collected less often. CPython counts a generation's allocations net of
    deallocations, and a running cluster's objects turn over rather than grow, so past its start the
    collector hardly runs: a large cluster (1.3 million objects, 80,000 pulls out) spent a quarter
    of its time in collections with CPython's thresholds. The lab makes little cyclic garbage. Every
    headless run goes through here (the TUI has its own policy, lab/tui/responsive.py). Undone
    after, for the next run in the same process (a sweep's worker runs many)."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def run(config: LabConfig, options: RunOptions, **kwargs) -> RunResult:
    if options.sim:
        deterministic_scheduling(options.seed)
    with collector_tuned_for_a_run():
        return trio.run(lambda: run_cluster(config, options, **kwargs), clock=make_clock(options))
