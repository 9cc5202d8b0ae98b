"""Soak: the socket lab (the default cluster on real loopback sockets, at real time) while 200 raw
clients connect, heartbeat, long-poll (some hold HA transfers) and leave — mostly by RST — for 60 s,
from a process of their own (python -m lab.control.churn).

Figures, with their targets:
  - the lab's own sends that failed meanwhile (an attempt answered with anything but success, or a
    message given up): target 0, for nothing else is wrong in the lab;
  - the lab process's RSS before the churn, with 200 churn clients connected, and after it. The
    step to hold 200 connections stays (freed memory stays with the allocator); what must not happen
    is growth that goes on with the churn. Target: from 10 s into the churn to its end, RSS
    grows no more than the lab alone grows in as long (its stores fill; measured for 20 s before the
    churn) plus noise (2 MiB);
  - once every churn client is gone, held requests whose connection is gone, and client connections
    left over on the brokers: target 0.

NSLAB_SOAK_SECONDS shortens (or lengthens) the churn, for a quick look.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import trio
from _common import cpu_stat, figure, other_load_note, rss_kib, title

from lab.config import LabConfig
from lab.run.runner import RunOptions, run_cluster

ALIVE = 200
SECONDS = float(os.environ.get("NSLAB_SOAK_SECONDS", "60"))
CONTROL = 20.0  # seconds the lab runs alone first, to see how fast it grows by itself
NOISE_KIB = 2 * 1024
WARM = 10.0  # seconds into the churn from which RSS must not grow beyond the lab's own growth


class SendWatch:
    """Counts the lab's producers' attempts and failures while the churn runs."""

    def __init__(self) -> None:
        self.counting = False
        self.attempts = self.failed_attempts = self.given_up = self.acks = 0
        self.examples: list[str] = []
        self.crashed: list[str] = []

    def __call__(self, record: dict) -> None:
        kind = record["kind"]
        if kind == "node.stop" and record.get("state") == "crashed":
            self.crashed.append(f"{record['node']}: {record.get('error')}")
        if not self.counting:
            return
        if kind == "producer.send":
            self.attempts += 1
            if record["result"] != "ok":
                self.failed_attempts += 1
                if len(self.examples) < 5:
                    self.examples.append(f"{record['node']} -> {record['broker']}: {record['result']}")
        elif kind == "producer.failed":
            self.given_up += 1
        elif kind == "producer.ack":
            self.acks += 1


def broker_load(cluster) -> tuple[int, int]:
    """(held requests, open client connections) over the lab's brokers."""
    brokers = cluster.brokers.values()
    return (sum(b.hold_service.held for b in brokers), sum(len(b.client_channels) for b in brokers))


def orphaned_holds(cluster) -> int:
    """Held requests whose connection has gone: each should have been dropped with it."""
    return sum(n for b in cluster.brokers.values() for owner, n in b.hold_service.held_by_owner().items()
               if owner not in b.client_channels)


async def settled_load(cluster, samples: int = 5) -> tuple[int, int]:
    """The brokers' load, median of a few samples: the lab's own pulls are answered and re-held
    all the time, so one sample can catch one in flight."""
    taken = []
    for _ in range(samples):
        taken.append(broker_load(cluster))
        await trio.sleep(0.2)
    return (round(statistics.median(h for h, _ in taken)), round(statistics.median(c for _, c in taken)))


async def soak() -> None:
    watch = SendWatch()
    ready = trio.Event()
    stop = trio.Event()
    holder = {}

    def on_ready(cluster) -> None:
        holder["cluster"] = cluster
        ready.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: run_cluster(LabConfig(), RunOptions(seed=1), on_ready=on_ready, stop=stop,
                                               subscribers=[watch]))
        await ready.wait()
        cluster = holder["cluster"]
        await trio.sleep(5)  # the lab's clients have routes, rebalanced and pull
        masters = [b.address for name, b in cluster.brokers.items() if b.broker_id == 0]
        topics = list(cluster.topology.topics)
        control_start = rss_kib()
        await trio.sleep(CONTROL)  # the lab alone: how fast does it grow by itself?
        control_growth_per_s = (rss_kib() - control_start) / CONTROL
        held_before, connections_before = await settled_load(cluster)
        rss_before = rss_kib()
        busy_before, _ = cpu_stat()
        started = time.monotonic()
        watch.counting = True
        curve = []  # (seconds into the churn, RSS)

        async def sample_rss() -> None:
            while True:
                await trio.sleep(SECONDS / 10)
                curve.append((time.monotonic() - started, rss_kib()))

        sampler = trio.CancelScope()

        async def sample() -> None:
            with sampler:
                await sample_rss()

        nursery.start_soon(sample)
        child = await trio.run_process(
            [sys.executable, "-m", "lab.control.churn", "--alive", str(ALIVE), "--seconds", str(SECONDS),
             "--topics", ",".join(topics), "--queues", str(LabConfig().cluster.queuesPerTopic), *masters],
            capture_stdout=True, capture_stderr=True, check=False)
        watch.counting = False
        sampler.cancel()
        elapsed = time.monotonic() - started
        busy_after, _ = cpu_stat()
        await trio.sleep(1)  # the last RSTs reach the brokers
        held_after, connections_after = await settled_load(cluster)
        orphaned = orphaned_holds(cluster)
        rss_after = rss_kib()
        stop.set()

    if child.returncode != 0:
        raise SystemExit(f"the churn process failed: {child.stderr.decode()[-2000:]}")
    stats = json.loads(child.stdout.decode().strip().splitlines()[-1])
    figure("churn clients (each heartbeats, long-polls)", stats["clients"], "", fmt="{:,.0f}")
    figure("  of which left by RST / by close", stats["resets"], f"/ {stats['closes']:,}", fmt="{:,.0f}")
    figure("  long polls sent / HA transfers held", stats["pulls_held"], f"/ {stats['transfers']:,}", fmt="{:,.0f}")
    figure("  errors on the churn clients' side", stats["errors"], "", fmt="{:,.0f}")
    for error in stats["first_errors"]:
        print(f"    e.g. {error}")
    figure("lab producers' attempts during the churn", watch.attempts, "", fmt="{:,.0f}")
    figure("  acknowledged", watch.acks, "", fmt="{:,.0f}")
    figure("failed sends caused by other connections", watch.failed_attempts + watch.given_up, "", 0,
           fmt="{:,.0f}")
    for example in watch.examples:
        print(f"    e.g. {example}")
    figure("nodes crashed", len(watch.crashed), "", 0, fmt="{:,.0f}")
    for crash in watch.crashed[:3]:
        print(f"    {crash}")
    figure("lab RSS before the churn", rss_before / 1024, "MiB")
    print("    during it, every tenth of the time: " + ", ".join(f"{kib / 1024:.1f}" for _, kib in curve) + " MiB")
    figure("lab RSS after it", rss_after / 1024, "MiB")
    # Warm: 200 clients have come and gone a few times (lifetimes are 0.5-5 s).
    (warm_at, warm) = next(((t, kib) for t, kib in curve if t >= min(WARM, SECONDS / 3)), curve[0])
    (end_at, end) = curve[-1]
    own = control_growth_per_s * (end_at - warm_at)
    figure("the lab's own growth, without churn, as long", own / 1024, "MiB")
    figure(f"RSS growth while churning ({warm_at:.0f} s to {end_at:.0f} s)", (end - warm) / 1024, "MiB",
           (own + NOISE_KIB) / 1024)
    figure("held requests before / after (the lab's own pulls)", held_before, f"/ {held_after:,}", fmt="{:,.0f}")
    figure("held requests whose connection is gone", orphaned, "", 0, fmt="{:,.0f}")
    figure("client connections left (after - before)", connections_after - connections_before, "", 0,
           fmt="{:,.0f}")
    figure("churn wall time", elapsed, "s")
    other_load_note(max(0.0, (busy_after - busy_before) / elapsed - 2.0), "this machine's CPUs (beyond the lab and the churn)")


def main() -> None:
    title(f"Soak: {ALIVE} raw clients connecting, long-polling and leaving (mostly by RST) for {SECONDS:g} s "
          "against the socket lab's brokers, the default producers running")
    print("  command: python benchmarks/bench_soak.py  (the lab in this process; the churn: python -m lab.control.churn)")
    trio.run(soak)


if __name__ == "__main__":
    main()
