"""The terminal UI under load: 3 NameServers × 2,000 topics, redrawn 4 times a second.

`nslab` runs in a pseudo-terminal, as in a person's terminal: the figures are the whole process's
CPU per redraw (from /proc) and key-to-screen latency — a key written to the terminal until the
change it causes arrives in the terminal's output. Two runs:

- replay of a synthetic log (3 NameServers × 2,000 topics, 4 brokers, 2 producers at 5 msg/s;
  at 100 s one NameServer expires broker-a, so 2,000 topicQueueTable rows diverge): the UI's cost
  alone;
- the live lab, simulated, with `cluster.nameservers=3`, `cluster.topics=2000`: the UI plus the
  cluster it runs.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import msgpack
from _common import ROOT, cpu_seconds, cpu_stat, figure, median, other_load_note, percentile, title, topic_names

TOPICS = 2000  # the large cluster's (bench_cluster_scale.py)
REFRESH_HZ = 4
WINDOW = 10.0  # seconds of CPU measurement
PRESSES = 20  # key presses per latency figure
LATENCY_TARGET_MS = 100.0
SIZE = (160, 48)  # columns, rows: three NameServer panels side by side
NAMESERVERS = ["ns-0", "ns-1", "ns-2"]
BROKERS = {"broker-a-0": "127.0.0.1:10911", "broker-a-1": "127.0.0.1:10921",
           "broker-b-0": "127.0.0.1:11011", "broker-b-1": "127.0.0.1:11021"}


def synthetic_log(path: Path, seconds: int = 600) -> None:
    """What a run of the 3 × 2,000 cluster writes, enough of it for every view to be busy."""
    topics = topic_names(TOPICS)
    records = []

    def emit(t, node, kind, **fields):
        records.append({"t": float(t), "node": node, "kind": kind, **fields})

    def tables(groups):
        masters = [b for b in BROKERS if b.rsplit("-", 1)[0] in groups]
        return {
            "topicQueueTable": {t: {g: [8, 8, 6, 0] for g in groups} for t in topics},
            "brokerAddrTable": {g: {"cluster": "DefaultCluster",
                                    "brokerAddrs": {b[-1]: BROKERS[b] for b in masters if b.startswith(g)}}
                                for g in groups},
            "clusterAddrTable": {"DefaultCluster": list(groups)},
            "brokerLiveTable": {BROKERS[b]: {"dataVersion": [1, 0], "haServerAddr": None} for b in masters},
            "filterServerTable": {},
        }

    nodes = {**{n: "nameserver" for n in NAMESERVERS}, **{b: "broker" for b in BROKERS},
             "producer-0": "producer", "producer-1": "producer", "consumer-0": "consumer", "consumer-1": "consumer"}
    emit(0, "lab", "run.start", schema=1, seed=1, mode="sim", speed=None, scenario=None,
         config={"nameserver": {"brokerChannelExpiredTime": 120.0}}, topics=topics, nodes=nodes)
    for i, name in enumerate(NAMESERVERS):
        emit(0, name, "node.start", role="nameserver", address=f"127.0.0.1:{9876 + i}")
    for name, addr in BROKERS.items():
        emit(0, name, "broker.start", address=addr, broker_name=name[:-2], broker_id=int(name[-1]), messages=0)
        emit(0, name, "node.start", role="broker", address=addr)
    for name in NAMESERVERS:
        emit(1, name, "ns.tables", **tables(["broker-a", "broker-b"]))
    offsets = {}
    for t in range(seconds):
        if t % 30 == 0:
            for broker, addr in BROKERS.items():
                for i, ns in enumerate(NAMESERVERS):
                    cut = ns == "ns-2" and broker.startswith("broker-a") and t > 0
                    if not cut:
                        emit(t + 0.5, ns, "ns.register", broker_addr=addr, broker_name=broker[:-2],
                             broker_id=int(broker[-1]), data_version=[1, 0], first=False, topics_applied=False)
                    emit(t + 0.5, broker, "broker.register", ns=f"127.0.0.1:{9876 + i}", ok=not cut, code=0)
        if t == 100:  # ns-2 has not heard broker-a since t=0: expired, its rows go
            emit(t, "ns-2", "ns.tables", **tables(["broker-b"]))
        for p in ("producer-0", "producer-1"):
            for k in range(5):
                topic, group = topics[(t * 5 + k) % len(topics)], ("broker-a", "broker-b")[k % 2]
                offset = offsets[group] = offsets.get(group, -1) + 1
                emit(t + k / 5, p, "producer.send", msg_id=f"{p}{t}{k}", topic=topic, broker=group, queue=0,
                     attempt=1, result="ok", latency=0.002)
                emit(t + k / 5, p, "producer.ack", msg_id=f"{p}{t}{k}", topic=topic, broker=group, queue=0,
                     queue_offset=offset, status="SEND_OK")
                emit(t + k / 5 + 0.01, "consumer-0", "consumer.consume", msg_id=f"{p}{t}{k}", topic=topic,
                     broker=group, queue=0, offset=offset, broker_addr=BROKERS[group + "-0"])
    records.sort(key=lambda r: r["t"])
    with open(path, "wb") as f:
        packer = msgpack.Packer()
        for record in records:
            f.write(packer.pack(record))


class Terminal:
    """A program in a pseudo-terminal of a given size; its output is read as it comes."""

    def __init__(self, argv: list[str], size: tuple[int, int]):
        self.output = bytearray()
        self.changed = threading.Condition()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the program, on the terminal's slave side
            os.chdir(ROOT)
            os.execve(argv[0], argv, {**os.environ, "TERM": "xterm-256color"})
        cols, rows = size
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            with self.changed:
                self.output += data
                self.changed.notify_all()
            if not data:
                return

    def wait_for(self, needle: bytes, since: int = 0, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.changed:
            while needle not in self.output[since:]:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
        return True

    def key_to_screen(self, key: bytes, shows: bytes) -> float:
        """Seconds from writing `key` until `shows` appears in the output written after it."""
        with self.changed:
            since = len(self.output)
        start = time.monotonic()
        os.write(self.fd, key)
        if not self.wait_for(shows, since, timeout=10):
            raise RuntimeError(f"{key!r} never showed {shows!r}")
        return time.monotonic() - start

    def quit(self) -> None:
        os.write(self.fd, b"q")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                return
            time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)  # the one process this benchmark started
        os.waitpid(self.pid, 0)


def measure(label: str, argv: list[str], ready: bytes, toggles: tuple[bytes, bytes], before=None) -> None:
    term = Terminal(argv, SIZE)
    try:
        if not term.wait_for(ready):
            raise RuntimeError(f"{label}: the screen never showed {ready!r}")
        if before is not None:
            before(term)
        time.sleep(2)  # past the start-up
        cpu0, busy0, wall0 = cpu_seconds(term.pid), cpu_stat()[0], time.monotonic()
        time.sleep(WINDOW)
        cpu, wall = cpu_seconds(term.pid) - cpu0, time.monotonic() - wall0
        figure(f"{label}: CPU per refresh", 1000 * cpu / (wall * REFRESH_HZ), "ms", fmt="{:,.1f}")
        figure(f"{label}: CPU, share of one core", 100 * cpu / wall, "%", fmt="{:,.0f}")
        other_load_note(max(0.0, (cpu_stat()[0] - busy0 - cpu) / wall), "this machine's CPUs")
        latencies = []
        for i in range(PRESSES):  # space: pause, then resume — each shows in the header
            latencies.append(1000 * term.key_to_screen(b" ", toggles[i % 2]))
            time.sleep(0.3)
        figure(f"{label}: key to screen, median", median(latencies), "ms", LATENCY_TARGET_MS)
        figure(f"{label}: key to screen, p95", percentile(latencies, 95), "ms", LATENCY_TARGET_MS)
    finally:
        term.quit()


def main() -> None:
    title(f"The TUI: 3 NameServers × {TOPICS:,} topics at {SIZE[0]}×{SIZE[1]}, redrawn {REFRESH_HZ}× a second")
    nslab = str(Path(sys.executable).with_name("nslab"))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "bench.events"
        synthetic_log(log)

        def play_from_90s(term: Terminal) -> None:
            os.write(term.fd, b"j")
            time.sleep(0.5)
            os.write(term.fd, b"90\r")
            time.sleep(0.5)
            os.write(term.fd, b" ")  # play: ns-2 expires broker-a at 100 s

        measure("replay", [nslab, "replay", str(log)], b"replay of sim", (b"paused", b"playing"),
                before=play_from_90s)
        env_dir = Path(tmp) / "run"  # the live lab's `nslab chaos` socket, private to this run
        env_dir.mkdir()
        os.environ["XDG_RUNTIME_DIR"] = str(env_dir)
        measure("live lab", [nslab, "up", "--sim", "--seed", "1", "--set", "cluster.nameservers=3",
                             "--set", f"cluster.topics={TOPICS}"], b"running", (b"paused", b"running"))


if __name__ == "__main__":
    main()
