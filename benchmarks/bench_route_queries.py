"""GET_ROUTEINFO_BY_TOPIC throughput and latency over loopback TCP.

The NameServer runs as its own process (`python -m nameserver --port 0`) pinned to CPU 0; four
brokers (2 masters + 2 slaves, one cluster) register 1,000 topics; a load generator in another
process, pinned to CPU 1, drives 32 connections asking for the routes of random topics in two modes:

  closed loop, depth 1   each connection waits for its reply before sending the next request
  pipelined, depth 16    16 requests outstanding per connection, as Java clients share one channel
                         across threads

The load generator is kept cheap so that the server is the bottleneck: request frames are encoded
once up front, replies are counted by their 4-byte length prefix only (replies on one connection
come in request order, so the send time of each is the head of a FIFO), and new requests go out
in one send() per batch of replies. Its own CPU use is printed next to the server's.

Usage: python benchmarks/bench_route_queries.py [--connections N] [--seconds S] [--warmup S]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import selectors
import socket
import struct
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ROOT, DataVersion, RemotingCommand, RequestCode, cpu_seconds, cpu_stat, cpu_times, encode, figure,
    other_load_note, percentile,
    register_frame, start_nameserver, title, topic_names, topic_table,
)
from nameserver.protocol import FrameDecoder, ResponseCode  # noqa: E402

TARGET_QPS = 20_000
SERVER_CPU, LOAD_CPU = 0, 1
TOPICS = 1_000
BROKERS = [  # (broker name, broker id, address): 2 masters + 2 slaves
    ("broker-a", 0, "127.0.0.1:10911"),
    ("broker-a", 1, "127.0.0.1:10921"),
    ("broker-b", 0, "127.0.0.1:10931"),
    ("broker-b", 1, "127.0.0.1:10941"),
]
MODES = [("closed loop, depth 1", 1), ("pipelined, depth 16", 16)]

_LENGTH = struct.Struct(">i")


# --- the NameServer process ----------------------------------------------------------------------

def call(sock: socket.socket, frame: bytes) -> RemotingCommand:
    """One blocking request/reply on a plain socket."""
    sock.sendall(frame)
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("the NameServer closed the connection")
        replies = decoder.feed(data)
        if replies:
            return replies[0]


def register_brokers(host: str, port: int, topics: list[str]) -> list[socket.socket]:
    """Register every broker on its own connection; the connections must stay open, or the
    NameServer removes the brokers when they close."""
    table = topic_table(topics)
    socks = []
    for name, broker_id, addr in BROKERS:
        sock = socket.create_connection((host, port))
        reply = call(sock, register_frame(name, addr, broker_id, table, DataVersion(int(time.time() * 1000), 1)))
        if reply.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"REGISTER_BROKER {name}/{broker_id} failed: {reply.code} {reply.remark}")
        socks.append(sock)
    return socks


def route_frames(topics: list[str]) -> list[bytes]:
    frames = []
    for i, topic in enumerate(topics):
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=i)
        cmd.language = "JAVA"
        frames.append(encode(cmd))
    return frames


# --- the load generator (its own process) ------------------------------------------------------

class Conn:
    __slots__ = ("sock", "buf", "sent", "out", "checked")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()
        self.sent: deque[float] = deque()  # send times of the outstanding requests, oldest first
        self.out = b""  # bytes a full socket buffer did not take yet
        self.checked = False


def run_mode(host: str, port: int, frames: list[bytes], depth: int, connections: int,
             warmup: float, seconds: float, server_pid: int) -> dict:
    rng = random.Random(depth)
    schedule = [rng.choice(frames) for _ in range(1 << 16)]  # random topics, drawn up front
    mask = len(schedule) - 1
    cursor = 0

    sel = selectors.DefaultSelector()
    conns = []
    for _ in range(connections):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn = Conn(sock)
        sel.register(sock, selectors.EVENT_READ, conn)
        conns.append(conn)

    def send(conn: Conn, n: int, now: float) -> None:
        nonlocal cursor
        if n == 1:
            data = schedule[cursor & mask]
        else:
            data = b"".join([schedule[(cursor + i) & mask] for i in range(n)])
        cursor += n
        conn.sent.extend([now] * n)
        if conn.out:
            conn.out += data
            return
        try:
            k = conn.sock.send(data)
        except BlockingIOError:
            k = 0
        if k < len(data):
            conn.out = data[k:]
            sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    errors = []
    start = time.perf_counter()
    for conn in conns:
        send(conn, depth, start)
    measure_from, measure_to = start + warmup, start + warmup + seconds
    measuring = stopping = False
    count = 0
    latencies: list[float] = []
    cpu0 = cpu1 = stat0 = stat1 = (0.0, 0.0)
    own0 = own1 = t0 = t1 = 0.0
    outstanding = connections * depth
    unpack_from = _LENGTH.unpack_from

    while outstanding:
        events = sel.select(timeout=1.0)
        now = time.perf_counter()
        if not events and now > measure_to + 10:
            errors.append(f"{outstanding} replies missing 10 s after the end")
            break
        if not measuring and not stopping and now >= measure_from:
            measuring, count, t0 = True, 0, now
            cpu0, own0, stat0 = cpu_times(server_pid), cpu_seconds(), cpu_stat({SERVER_CPU})
        if measuring and now >= measure_to:
            cpu1, own1, stat1, t1 = cpu_times(server_pid), cpu_seconds(), cpu_stat({SERVER_CPU}), now
            measuring, stopping = False, True
        for key, mask_ in events:
            conn = key.data
            if mask_ & selectors.EVENT_WRITE:
                k = conn.sock.send(conn.out)
                conn.out = conn.out[k:]
                if not conn.out:
                    sel.modify(conn.sock, selectors.EVENT_READ, conn)
            if not mask_ & selectors.EVENT_READ:
                continue
            data = conn.sock.recv(1 << 18)
            if not data:
                errors.append("the NameServer closed a connection")
                sel.unregister(conn.sock)
                outstanding -= len(conn.sent)
                continue
            buf = conn.buf
            buf += data
            size, pos, n = len(buf), 0, 0
            while size - pos >= 4:
                end = pos + 4 + unpack_from(buf, pos)[0]
                if end > size:
                    break
                if not conn.checked:  # decode one reply per connection in full: is it a route?
                    conn.checked = True
                    replies = FrameDecoder().feed(bytes(buf[pos:end]))
                    if not replies:
                        errors.append("undecodable reply")
                    elif replies[0].code != ResponseCode.SUCCESS or not replies[0].body:
                        errors.append(f"reply code {replies[0].code}: {replies[0].remark}")
                pos, n = end, n + 1
            if not n:
                continue
            del buf[:pos]
            sent = conn.sent
            if measuring:
                count += n
                for _ in range(n):
                    latencies.append(now - sent.popleft())
            else:
                for _ in range(n):
                    sent.popleft()
            if stopping:
                outstanding -= n
            else:
                send(conn, n, time.perf_counter())

    for conn in conns:
        conn.sock.close()
    sel.close()
    elapsed = t1 - t0
    return {
        "depth": depth, "count": count, "elapsed": elapsed, "errors": errors,
        "server_user": cpu1[0] - cpu0[0], "server_sys": cpu1[1] - cpu0[1],
        "server_cpu": sum(cpu1) - sum(cpu0), "cpu_busy": stat1[0] - stat0[0], "cpu_steal": stat1[1] - stat0[1],
        "load_cpu": own1 - own0,
        "p50": percentile(latencies, 50) if latencies else float("nan"),
        "p99": percentile(latencies, 99) if latencies else float("nan"),
    }


def load_generator(pipe, host: str, port: int, frames: list[bytes], connections: int,
                   warmup: float, seconds: float, server_pid: int) -> None:
    try:
        os.sched_setaffinity(0, {LOAD_CPU})
    except (OSError, AttributeError):
        pass
    results = [run_mode(host, port, frames, depth, connections, warmup, seconds, server_pid)
               for _, depth in MODES]
    pipe.send(results)
    pipe.close()


# --- main ----------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0, help="measurement per mode (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up per mode (default 1)")
    args = parser.parse_args(argv)

    cpus = os.sched_getaffinity(0)
    pinned = {SERVER_CPU, LOAD_CPU} <= cpus
    title(f"Route queries: GET_ROUTEINFO_BY_TOPIC over loopback TCP, {TOPICS:,} topics, "
          f"{len(BROKERS)} brokers, {args.connections} connections")
    proc, host, port = start_nameserver()
    broker_socks: list[socket.socket] = []
    try:
        if pinned:
            os.sched_setaffinity(proc.pid, {SERVER_CPU})
        print(f"  NameServer pid {proc.pid} at {host}:{port}, "
              + (f"pinned to CPU {SERVER_CPU}; load generator pinned to CPU {LOAD_CPU}" if pinned
                 else f"NOT pinned: only CPUs {sorted(cpus)} available"))
        topics = topic_names(TOPICS)
        broker_socks = register_brokers(host, port, topics)
        frames = route_frames(topics)
        print(f"  {args.warmup:g} s warm-up + {args.seconds:g} s measured per mode; "
              f"request frame {len(frames[0])} bytes", flush=True)

        ctx = multiprocessing.get_context("fork")
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=load_generator, args=(
            send, host, port, frames, args.connections, args.warmup, args.seconds, proc.pid))
        child.start()
        send.close()
        results = receive.recv()
        child.join()
    finally:
        for sock in broker_socks:
            sock.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()

    for (label, _), r in zip(MODES, results):
        qps = r["count"] / r["elapsed"]
        print(f"  {label}: {r['count']:,} replies in {r['elapsed']:.2f} s")
        figure("queries/s", qps, "q/s", TARGET_QPS, at_least=True, fmt="{:,.0f}")
        figure("latency p50", r["p50"] * 1000, "ms", fmt="{:,.3f}")
        figure("latency p99", r["p99"] * 1000, "ms", fmt="{:,.3f}")
        figure("server CPU time", r["server_cpu"], "s", fmt="{:,.2f}")
        figure("  user", r["server_user"], "s", fmt="{:,.2f}")
        figure("  system", r["server_sys"], "s", fmt="{:,.2f}")
        figure("server CPU use", 100 * r["server_cpu"] / r["elapsed"], "% core", fmt="{:,.0f}")
        if r["server_cpu"] > 0:
            figure("queries per server CPU-second", r["count"] / r["server_cpu"], "q/cpu-s", fmt="{:,.0f}")
        figure("load generator CPU use", 100 * r["load_cpu"] / r["elapsed"], "% core", fmt="{:,.0f}")
        if pinned:
            other = max(0.0, r["cpu_busy"] - r["server_cpu"]) / r["elapsed"]
            other_load_note(other, f"the server's CPU {SERVER_CPU}")
            if r["cpu_steal"] > 0.01 * r["elapsed"]:
                figure(f"CPU {SERVER_CPU} stolen by the hypervisor", 100 * r["cpu_steal"] / r["elapsed"], "% core",
                       fmt="{:,.0f}")
        for error in r["errors"][:5]:
            print(f"  ERROR: {error}")
    return 1 if any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
