"""REGISTER_BROKER with 10,000 topics, in-process on a DefaultRequestProcessor.

Times "apply" = decode the frame (FrameDecoder.feed: header + body bytes) + process_request (body
decode, route-table update, reply) for a master broker:

  (a) first registration       a fresh processor every repetition
  (b) changed dataVersion      the same broker re-registering with the next dataVersion counter
                               (the same topics: each is compared with the table, none applied)
  (c) unchanged dataVersion    the same broker re-registering with the stored dataVersion (the
                               30 s heartbeat of a broker whose topics did not change)

for the JSON body (what Java brokers send), the msgpack body (nslab's own nodes) and RocketMQ's
compressed body (zlib, brokers with compressedRegister=true). Frames carry bodyCrc32, as 4.9.8
brokers send it, so the CRC check is part of every figure. Topics are TopicTest-00001.., 8 queues,
perm 6. Frames are encoded before the clock starts; a gc.collect() runs between repetitions.
Targets are judged on the wall-clock median; the CPU-time median (this thread only) is printed
beside it, so time lost to other processes on a busy machine shows as the gap between the two.

Then the memory of the worst case: in a fresh subprocess, 20 broker names, each a master with its
own 10,000 topics (200,000 queue entries), registered through real REGISTER_BROKER commands; the
process RSS and its growth over an empty processor.

Usage: python benchmarks/bench_register.py [--repeat N] [--topics N]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    DataVersion, SerializeType, cpu_seconds, cpu_stat, figure, median, other_load_note, percentile,
    register_frame, rss_kib, title, topic_names, topic_table, verdict,
)
from nameserver.processor import DefaultRequestProcessor  # noqa: E402
from nameserver.protocol import FrameDecoder, ResponseCode  # noqa: E402

TARGET_APPLY_MS = 50.0
TARGET_CHANGED_MS = 10.0  # Java 4.9.8: 7.9-10.1 ms for the same JSON frames, on one core
TARGET_UNCHANGED_MS = 1.0
TARGET_RSS_MB = 200.0

BROKER = ("broker-a", "127.0.0.1:10911")
VARIANTS = [  # label, body serialize type, compressed
    ("JSON body (Java brokers)", SerializeType.JSON, False),
    ("msgpack body (nslab nodes)", SerializeType.MSGPACK, False),
    ("compressed body (compressedRegister)", SerializeType.JSON, True),
]
MEMORY_BROKERS = 20


class BenchChannel:
    remote_addr = "127.0.0.1:50000"


def apply(processor: DefaultRequestProcessor, frame: bytes, channel: object) -> tuple[float, float]:
    """(wall, CPU) seconds to decode one frame and process it; the reply must be SUCCESS."""
    cpu, start = time.thread_time(), time.perf_counter()
    (request,) = FrameDecoder().feed(frame)
    reply = processor.process_request(request, channel, 0.0)
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
    if reply is None or reply.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"REGISTER_BROKER failed: {reply}")
    return elapsed, cpu


def time_variant(body_type: SerializeType, compressed: bool, topics: int, repeat: int) -> dict:
    table = topic_table(topic_names(topics))
    name, addr = BROKER

    def frame(counter: int) -> bytes:
        return register_frame(name, addr, 0, table, DataVersion(1_700_000_000_000, counter),
                              body_type=body_type, compressed=compressed)

    base = frame(1)
    changed = [frame(2 + i) for i in range(repeat + 2)]
    results: dict[str, list[tuple[float, float]]] = {"first": [], "changed": [], "unchanged": []}

    # (a) first registration: a fresh processor each time (2 untimed warm-up runs).
    for i in range(repeat + 2):
        processor = DefaultRequestProcessor()
        gc.collect()
        elapsed = apply(processor, base, BenchChannel())
        if i >= 2:
            results["first"].append(elapsed)

    # (b) and (c) on one processor holding the broker.
    processor = DefaultRequestProcessor()
    channel = BenchChannel()
    apply(processor, base, channel)
    for i, f in enumerate(changed):
        gc.collect()
        elapsed = apply(processor, f, channel)
        if i >= 2:
            results["changed"].append(elapsed)
    for i in range(repeat + 2):
        gc.collect()
        elapsed = apply(processor, changed[-1], channel)
        if i >= 2:
            results["unchanged"].append(elapsed)
    return {"frame_bytes": len(base), "results": results}


# --- memory: run in a fresh subprocess ------------------------------------------------------------

def memory_child(brokers: int, topics: int) -> None:
    processor = DefaultRequestProcessor()
    channel = BenchChannel()
    gc.collect()
    empty = rss_kib()
    for b in range(brokers):
        names = topic_names(topics, prefix=f"TopicTest{b:02d}")
        frame = register_frame(f"broker-{b:02d}", f"127.0.0.1:{10911 + 10 * b}", 0, topic_table(names),
                               DataVersion(1_700_000_000_000, 1))
        apply(processor, frame, channel)
        del frame, names
    gc.collect()
    held = rss_kib()
    entries = sum(len(q) for q in processor.routes.topic_queue_table.values())
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    print(json.dumps({"empty_kib": empty, "held_kib": held, "peak_kib": peak, "entries": entries,
                      "topics": len(processor.routes.topic_queue_table)}))


def measure_memory(brokers: int, topics: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--memory-child", str(brokers), str(topics)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- main ----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--memory-child", nargs=2, type=int, metavar=("BROKERS", "TOPICS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        memory_child(*args.memory_child)
        return 0

    title(f"REGISTER_BROKER: apply {args.topics:,} topics in-process "
          f"(median / p90 of {args.repeat} repetitions)")
    cases = [
        ("first", "(a) first registration", TARGET_APPLY_MS),
        ("changed", "(b) re-registration, dataVersion changed", TARGET_CHANGED_MS),
        ("unchanged", "(c) re-registration, dataVersion unchanged", TARGET_UNCHANGED_MS),
    ]
    busy0, own0, start = cpu_stat()[0], cpu_seconds(), time.perf_counter()
    for label, body_type, compressed in VARIANTS:
        r = time_variant(body_type, compressed, args.topics, args.repeat)
        print(f"  {label}, frame {r['frame_bytes']:,} bytes")
        print(f"    {'':<44} {'median':>9} {'p90':>9}       {'':<30} {'CPU median':>10}")
        for key, text, target in cases:
            values = [wall * 1000 for wall, _ in r["results"][key]]
            med, p90 = median(values), percentile(values, 90)
            cpu = median([cpu * 1000 for _, cpu in r["results"][key]])
            result = verdict(med, target, at_least=False)
            if p90 > target >= med:
                result += " (p90 over)"
            print(f"    {text:<44} {med:>9.2f} {p90:>9.2f} ms    {f'target <= {target:g} ms: {result}':<30} "
                  f"{cpu:>7.2f} ms", flush=True)
    elapsed = time.perf_counter() - start
    other_load_note(max(0.0, cpu_stat()[0] - busy0 - (cpu_seconds() - own0)) / elapsed,
                    "this machine's CPUs")

    m = measure_memory(MEMORY_BROKERS, args.topics)
    title(f"Memory: {MEMORY_BROKERS} masters x {args.topics:,} topics each "
          f"({m['topics']:,} topics, {m['entries']:,} queue entries), fresh process")
    figure("RSS, empty processor", m["empty_kib"] / 1024, "MB")
    figure("RSS, holding the routes", m["held_kib"] / 1024, "MB", TARGET_RSS_MB)
    figure("RSS growth over the empty processor", (m["held_kib"] - m["empty_kib"]) / 1024, "MB")
    figure("bytes per queue entry (growth / entries)",
           (m["held_kib"] - m["empty_kib"]) * 1024 / m["entries"], "B", fmt="{:,.0f}")
    figure("peak RSS while registering (VmHWM)", m["peak_kib"] / 1024, "MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
