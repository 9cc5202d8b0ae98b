"""Shared helpers for the benchmarks: figures printed next to their targets, topic names, frames.

Benchmarks print figures and never fail on speed: a missed target is reported as "MISSED", not
raised. Only a benchmark that cannot run at all (a crash) makes run_all.py exit non-zero.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Run as `python benchmarks/bench_x.py` from anywhere: make the project importable even without
# the editable install.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nameserver.protocol import RemotingCommand, RequestCode, crc32, encode  # noqa: E402
from nameserver.protocol.codes import SerializeType  # noqa: E402
from nameserver.routes import DataVersion, TopicConfig  # noqa: E402
from nameserver.bodies import encode_register_body  # noqa: E402

CLUSTER = "DefaultCluster"


def title(text: str) -> None:
    print()
    print(text)
    print("-" * len(text))


def verdict(value: float, target: float, *, at_least: bool) -> str:
    met = value >= target if at_least else value <= target
    return "met" if met else "MISSED"


def figure(label: str, value: float, unit: str, target: float | None = None, *,
           at_least: bool = False, fmt: str = "{:,.1f}", width: int = 44) -> None:
    """One line: label, value, and when there is a target, the target and whether it was met."""
    text = f"  {label:<{width}} {fmt.format(value):>12} {unit}"
    if target is not None:
        op = ">=" if at_least else "<="
        text = f"{text:<{width + 25}}  target {op} {fmt.format(target)} {unit}: {verdict(value, target, at_least=at_least)}"
    print(text, flush=True)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: list[float]) -> float:
    return statistics.median(values)


def topic_names(count: int, prefix: str = "TopicTest") -> list[str]:
    return [f"{prefix}-{i:05d}" for i in range(1, count + 1)]


def topic_table(names: list[str], queues: int = 8, perm: int = 6) -> dict[str, TopicConfig]:
    return {n: TopicConfig(n, queues, queues, perm) for n in names}


def register_request(broker_name: str, broker_addr: str, broker_id: int, table: dict[str, TopicConfig],
                     data_version: DataVersion, *, body_type: SerializeType = SerializeType.JSON,
                     compressed: bool = False, cluster: str = CLUSTER) -> RemotingCommand:
    """A REGISTER_BROKER request as a 4.9.8 broker sends it (bodyCrc32 included)."""
    body = encode_register_body(table, data_version, [], body_type, compressed=compressed)
    host, port = broker_addr.rsplit(":", 1)
    fields = {
        "brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster,
        "haServerAddr": f"{host}:{int(port) + 1}", "brokerId": broker_id,
        "compressed": compressed, "bodyCrc32": crc32(body),
    }
    # The header's serialize type follows the body's: JSON for Java brokers, MSGPACK for nslab's.
    header_type = SerializeType.MSGPACK if body_type == SerializeType.MSGPACK else SerializeType.JSON
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body, serialize_type=header_type)


def register_frame(*args, **kwargs) -> bytes:
    return encode(register_request(*args, **kwargs))


def rss_kib(pid: int | str = "self") -> int:
    """VmRSS of a process, in KiB, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc status")


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_times(pid: int | str = "self") -> tuple[float, float]:
    """(user, system) CPU seconds of a process (all its threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name (field 2) may contain spaces: split after its closing parenthesis.
    fields = stat[stat.rindex(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return utime / _CLK_TCK, stime / _CLK_TCK


def cpu_seconds(pid: int | str = "self") -> float:
    """utime + stime of a process, in seconds."""
    return sum(cpu_times(pid))


def cpu_stat(cpus: set[int] | None = None) -> tuple[float, float]:
    """(busy, steal) seconds of some CPUs (all when None) since boot, every process and interrupt
    included, from /proc/stat. Diff two readings to see what else ran during a measurement."""
    busy = steal = 0
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu") or line.startswith("cpu "):
                continue
            name, *values = line.split()
            if cpus is not None and int(name[3:]) not in cpus:
                continue
            user, nice, system, _idle, _iowait, irq, softirq, st = (int(v) for v in values[:8])
            busy += user + nice + system + irq + softirq
            steal += st
    return busy / _CLK_TCK, steal / _CLK_TCK


def other_load_note(other_cores: float, what: str) -> None:
    """Say how much else ran, and warn when it was enough to depress the figures."""
    figure(f"other work on {what}", 100 * other_cores, "% core", fmt="{:,.0f}")
    if other_cores > 0.1:
        print(f"  NOTE: other processes were busy on {what} during the measurement; "
              "these figures are lower than an idle machine gives.")


def python_speed_note() -> None:
    """How fast this machine runs plain Python today. The VM's speed drifts from day to day (the
    same code and the same callgrind count have run 1.6 s one day and 2.5 s another); this line
    tells a slow day from a slower program."""
    def loop() -> float:
        start = time.perf_counter()
        sum(i * i for i in range(3_000_000))
        return time.perf_counter() - start
    figure("a plain Python loop today (3M squares, best of 3)", 1000 * min(loop() for _ in range(3)), "ms",
           fmt="{:,.0f}")


def start_nameserver(*options: str) -> tuple[subprocess.Popen, str, int]:
    """A NameServer process of its own on a free loopback port: (process, host, port)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "nameserver", "--host", "127.0.0.1", "--port", "0", "--log-level", "WARNING", *options],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("NAMESRV_ADDR="):
        proc.kill()
        raise RuntimeError(f"the NameServer did not start: {line!r}")
    host, port = line.split("=", 1)[1].rsplit(":", 1)
    return proc, host, int(port)
