"""Fixtures that run `nslab up --headless` in socket mode at real time and drive the real RocketMQ
client (rocketmq==0.4.4, see rmq_client.py) against it, each in its own child process.

Facts about the client these tests rely on (observed on the wire with this exact client):
- send_sync makes up to 5 attempts, each with the full Producer(timeout=) budget; a retry goes to a
  queue on a different broker. A closed port fails over at once; a broker that accepts but never
  answers costs one timeout per send that lands on it.
- route poll: at start+3 s, then every 30 s whatever the config says; cached routes are never erased
  by a failed lookup, so sends go on with every NameServer down.
- a new consumer group starts at offset 0 when the broker answers QUERY_CONSUMER_OFFSET with "0".
"""

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest



NSLAB = str(Path(sys.executable).with_name("nslab"))
CLIENT = str(Path(__file__).with_name("rmq_client.py"))
TOPIC = "RealTopic"  # the lab's one topic: its producers write here too, so bodies carry a prefix


class Child:
    """A child process speaking JSON lines; a reader thread keeps its stdout drained."""

    def __init__(self, argv, env):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def tell(self, line: str):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def next(self, timeout: float) -> str | None:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"{self.proc.args[2:4]}: nothing within {timeout}s")
        if line is None:
            pytest.fail(f"child exited {self.proc.wait()}: {self.proc.stderr.read()[-2000:]}")
        return line

    def record(self, timeout: float) -> dict:
        while True:
            line = self.next(timeout)
            if line.startswith("{"):
                return json.loads(line)

    def close(self, timeout: float = 10):
        try:
            if self.proc.poll() is None:
                self.tell("quit")
            self.proc.wait(timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


class Lab:
    def __init__(self, env, tmp_path, extra=()):
        self.env = env
        self.proc = subprocess.Popen(
            [NSLAB, "up", "--headless", "--duration", "5m", "--events", str(tmp_path / "lab.events"),
             "--set", f"cluster.topicNames={TOPIC}", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        first = self.proc.stdout.readline()
        assert first.startswith("NAMESRV_ADDR="), first + self.proc.stderr.read()
        self.namesrv = first.strip().partition("=")[2]
        self.wait_ready()

    def chaos(self, *words) -> subprocess.CompletedProcess:
        return subprocess.run([NSLAB, "chaos", *words], capture_output=True, text=True, env=self.env, timeout=60)

    def wait_ready(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            result = self.chaos("status")
            if result.returncode == 0:
                return result
            assert self.proc.poll() is None, self.proc.stderr.read()
            time.sleep(0.1)
        pytest.fail("the lab never answered")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def send(producer: Child, count: int, gap: float = 0.0, timeout: float = 60) -> list[dict]:
    """Send `count` messages one after another, `gap` seconds apart; their outcomes, in order."""
    producer.tell(f"send {count} {gap}")
    results = []
    while True:
        record = producer.record(timeout)
        if "sent" in record:
            return results
        results.append(record)
