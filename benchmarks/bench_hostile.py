"""What hostile peers cost a NameServer, over loopback TCP: a zip bomb, a connection flood, a
registration flood and its expiry, slow clients stalling mid-frame.

Each attack runs against a fresh NameServer process (`python -m nameserver --port 0`, shortened
expiry, scan and idle times) while a prober — another connection, as an ordinary client's — asks
for a route in a closed loop and keeps its broker registered. For each attack: the NameServer's
peak RSS growth over its idle size (VmHWM − VmRSS before), the prober's worst wait for an answer,
and what happened to the attack itself. Targets are the promises in the README's "Under hostile
input" section.

Usage: python benchmarks/bench_hostile.py [--connections N] [--registrations N] [--slow N]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    DataVersion, RemotingCommand, RequestCode, crc32, encode, figure, register_frame, rss_kib,
    start_nameserver, title, topic_table,
)
from nameserver.protocol import FrameDecoder, ResponseCode  # noqa: E402

MiB = 2**20
WORST_WAIT = 1.0  # s: another connection is answered within a second, whatever one peer does
BOMB_RSS = 64  # MiB: a 256 MiB bomb is refused at the 16 MiB inflation bound
SLOW_RSS = 1.5  # memory held per byte a stalled client sent: what arrived, no copies of it
# Shortened timers; ERROR: a flood's 20,000 expiries are each a WARNING line, as in 4.9.8.
TIMINGS = ["--expiry", "6s", "--scan-interval", "1s", "--idle", "4s", "--log-level", "ERROR"]


def hwm_kib(pid: int) -> int:
    """VmHWM: the process's peak RSS so far, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def read_reply(sock: socket.socket, decoder: FrameDecoder) -> RemotingCommand:
    while True:
        data = sock.recv(1 << 16)
        if not data:
            raise ConnectionError("the NameServer closed the connection")
        replies = decoder.feed(data)
        if replies:
            return replies[0]


class Prober(threading.Thread):
    """An ordinary client: keeps its broker registered (every second) and asks its route in a
    closed loop; the worst wait for any answer is the figure."""

    def __init__(self, host: str, port: int):
        super().__init__(daemon=True)
        self.sock = socket.create_connection((host, port))
        self.decoder = FrameDecoder()
        self.worst = 0.0
        self.answers = 0
        self.errors: list[str] = []
        self.running = True
        self.table = topic_table(["ProbeTopic"], queues=4)
        self._register(1)

    def _register(self, counter: int) -> None:
        frame = register_frame("broker-probe", "127.0.0.1:20911", 0, self.table, DataVersion(1, counter))
        self._call(frame, "REGISTER_BROKER")

    def _call(self, frame: bytes, what: str) -> None:
        started = time.monotonic()
        self.sock.sendall(frame)
        reply = read_reply(self.sock, self.decoder)
        self.worst = max(self.worst, time.monotonic() - started)
        if reply.code != ResponseCode.SUCCESS:
            self.errors.append(f"{what}: {reply.code} {reply.remark}")
        self.answers += 1

    def run(self) -> None:
        query = encode(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ProbeTopic"}))
        last_register, counter = time.monotonic(), 1
        try:
            while self.running:
                if time.monotonic() - last_register > 1.0:
                    counter += 1
                    self._register(counter)
                    last_register = time.monotonic()
                self._call(query, "GET_ROUTEINFO_BY_TOPIC")
                time.sleep(0.005)
        except OSError as e:
            self.errors.append(f"the prober's connection failed: {e}")

    def stop(self) -> None:
        self.running = False
        self.join(10)
        self.sock.close()


class Attack:
    """A fresh NameServer and a prober around one attack."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        title(self.name)
        self.proc, self.host, self.port = start_nameserver(*TIMINGS)
        self.base_rss = rss_kib(self.proc.pid)
        self.prober = Prober(self.host, self.port)
        self.prober.start()
        time.sleep(0.2)
        return self

    def fds(self) -> int:
        return len(list(Path(f"/proc/{self.proc.pid}/fd").iterdir()))

    def report(self) -> None:
        self.prober.stop()
        figure("NameServer peak RSS growth", (hwm_kib(self.proc.pid) - self.base_rss) / 1024, "MiB")
        figure("another connection's worst wait", self.prober.worst, "s", WORST_WAIT, fmt="{:,.3f}")
        figure("its answers meanwhile", self.prober.answers, "", fmt="{:,.0f}")
        for error in self.prober.errors[:3]:
            print(f"  ERROR (prober): {error}")

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except Exception:
            self.proc.kill()
        return False


def zlib_bomb(inflated_mib: int) -> bytes:
    """A zlib stream of `inflated_mib` MiB of zeros at ~1,000:1: after a full flush each MiB of
    zeros compresses to the same bytes; the trailer's checksum is the whole stream's."""
    deflate, zeros, checksum = zlib.compressobj(9), bytes(MiB), 1
    first = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    for _ in range(inflated_mib):
        checksum = zlib.adler32(zeros, checksum)
    return first + again * (inflated_mib - 1) + deflate.flush()[:-4] + checksum.to_bytes(4, "big")


def zip_bomb() -> None:
    with Attack("Zip bomb: one compressed REGISTER_BROKER inflating to 256 MiB") as attack:
        body = zlib_bomb(256)
        fields = {"brokerName": "broker-bomb", "brokerAddr": "127.0.0.1:30911", "clusterName": "DefaultCluster",
                  "haServerAddr": "127.0.0.1:30912", "brokerId": 0, "compressed": True, "bodyCrc32": crc32(body)}
        with socket.create_connection((attack.host, attack.port)) as sock:
            started = time.monotonic()
            sock.sendall(encode(RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body)))
            reply = read_reply(sock, FrameDecoder())
            print(f"  {len(body):,} bytes sent; answered {reply.code} in {time.monotonic() - started:.2f} s: "
                  f"{reply.remark}")
        attack.report()
        figure("peak RSS growth (bomb)", (hwm_kib(attack.proc.pid) - attack.base_rss) / 1024, "MiB", BOMB_RSS)


def connection_flood(count: int) -> None:
    with Attack(f"Connection flood: {count:,} connections, each asks a route, then all close") as attack:
        before = attack.fds()
        query = encode(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ProbeTopic"}))
        socks, answered = [], 0
        started = time.monotonic()
        for _ in range(count):
            sock = socket.create_connection((attack.host, attack.port))
            sock.sendall(query)
            socks.append(sock)
        peak_fds = attack.fds()
        for sock in socks:
            if read_reply(sock, FrameDecoder()).code == ResponseCode.SUCCESS:
                answered += 1
        for sock in socks:
            sock.close()
        figure("connections answered", answered, f"of {count:,}", fmt="{:,.0f}")
        figure("flood's wall time", time.monotonic() - started, "s", fmt="{:,.2f}")
        deadline = time.monotonic() + 5
        while attack.fds() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        print(f"  NameServer descriptors: {before} before, {peak_fds} at the peak, {attack.fds()} after")
        attack.report()


def registration_flood(count: int) -> None:
    with Attack(f"Registration flood: {count:,} REGISTER_BROKER, distinct names, pipelined on one "
                f"connection, then silent until they expire (6 s)") as attack:
        table = topic_table(["FloodTopic"], queues=4)
        frames = b"".join(register_frame(f"flood-{i:05d}", f"127.0.0.2:{10000 + i}", 0, table, DataVersion(1, 1))
                          for i in range(count))
        with socket.create_connection((attack.host, attack.port)) as sock:
            started = time.monotonic()
            sender = threading.Thread(target=sock.sendall, args=(frames,), daemon=True)
            sender.start()
            decoder, answered = FrameDecoder(), 0
            while answered < count:
                data = sock.recv(1 << 18)
                if not data:
                    break
                answered += len(decoder.feed(data))
            sender.join()
            figure("registrations answered", answered, f"of {count:,}", fmt="{:,.0f}")
            figure("registrations per second", answered / (time.monotonic() - started), "/s", fmt="{:,.0f}")
            # Silent now: the scan removes all of them (each removal its own rows only).
            expire_from = time.monotonic()
            time.sleep(9)
        print(f"  expiry watched for {time.monotonic() - expire_from:.1f} s")
        attack.report()


def slow_clients(count: int) -> None:
    with Attack(f"Slow clients: {count} connections each stalled half-way through a 16 MiB frame "
                f"(idle close after 4 s)") as attack:
        header = struct.pack(">ii", 16 * MiB - 4, 100)  # total length, header length
        socks = []
        for _ in range(count):
            sock = socket.create_connection((attack.host, attack.port))
            sock.sendall(header + bytes(8 * MiB))
            socks.append(sock)
        time.sleep(1)
        grown = (rss_kib(attack.proc.pid) - attack.base_rss) / 1024
        figure("RSS growth while they stall", grown, "MiB")
        figure("  per MiB they sent", grown / (8 * count), "MiB", SLOW_RSS, fmt="{:,.2f}")
        closed, started = 0, time.monotonic()
        for sock in socks:
            sock.settimeout(max(0.1, 15 - (time.monotonic() - started)))
            try:
                closed += sock.recv(1) == b""
            except (TimeoutError, OSError):
                pass
            sock.close()
        figure("stalled connections closed by the NameServer", closed, f"of {count}", fmt="{:,.0f}")
        figure("the last closed after", time.monotonic() - started + 1, "s", fmt="{:,.1f}")
        attack.report()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=5_000)
    parser.add_argument("--registrations", type=int, default=20_000)
    parser.add_argument("--slow", type=int, default=20)
    args = parser.parse_args(argv)
    zip_bomb()
    connection_flood(args.connections)
    registration_flood(args.registrations)
    slow_clients(args.slow)
    return 0


if __name__ == "__main__":
    sys.exit(main())
