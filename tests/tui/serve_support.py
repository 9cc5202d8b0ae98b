"""`nslab serve` in a process of its own for the serve tests: its URLs, its lab, a browser tab's
websocket without a browser, and every process it started, found by a mark in their environment
(a process that outlived `nslab serve` has lost its parent, so no parent chain leads to it)."""

from __future__ import annotations

import base64
import os
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from lab_process import NSLAB, QUIET

from lab.control import live

MARK = "NSLAB_TEST_SERVE"


class Served:
    """`nslab serve --sim` on a free port: its teacher's and viewers' URLs, its lab."""

    def __init__(self, *extra: str):
        self.mark = uuid.uuid4().hex  # inherited by the lab and every tab
        self.process = subprocess.Popen([NSLAB, "serve", "--sim", "--seed", "4", "--port", "0", *QUIET, *extra],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, MARK: self.mark})
        try:
            self.teacher = self.process.stdout.readline().strip()
            if not self.teacher.startswith("http://"):
                raise AssertionError(f"the first line is no URL: {self.teacher!r}")
            self.viewers = self.process.stdout.readline().strip().split(": ", 1)[1]
            self.lab_pid = int(re.match(r"lab (\d+) ", self.process.stdout.readline()).group(1))
        except BaseException:  # no test gets it: ended here (its lab ends with it)
            self.process.kill()
            self.process.wait()
            raise
        self.base = self.teacher.split("/?", 1)[0]

    def status(self) -> dict:
        return {row["node"]: row["state"] for row in live.send(["status"], str(self.lab_pid))["status"]}

    def processes(self) -> dict[int, str]:
        """Every live process `nslab serve` started (itself too while it runs): pid → command line."""
        return marked(self.mark)

    def close(self) -> str:
        """Ctrl-C, as a teacher would; what it printed after its first three lines (again if called again)."""
        if self.process.stdout.closed:
            return self.out
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.out = self.process.stdout.read()
        self.process.stdout.close()
        self.process.stderr.close()
        return self.out


def marked(mark: str) -> dict[int, str]:
    found = {}
    needle = f"{MARK}={mark}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z" and needle in (proc / "environ").read_bytes().split(b"\0"):  # Z: ended, not reaped
                found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it ended while we looked, or is not ours to read
            continue
    return found


def fetch(url: str, **headers) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


class Tab:
    """A browser tab's websocket to `nslab serve`, as textual.js opens it: enough to start the
    tab's `nslab attach` and read what its terminal is sent (raw frames; the server's are unmasked)."""

    def __init__(self, base: str, key: str = "view"):
        parts = urlsplit(base)
        self.socket = socket.create_connection((parts.hostname, parts.port), timeout=30)
        nonce = base64.b64encode(os.urandom(16)).decode()
        self.socket.sendall((f"GET /ws/{key}?width=100&height=30 HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                             f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {nonce}\r\n"
                             "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.received = b""
        while b"\r\n\r\n" not in self.received:
            self._read()
        head, self.received = self.received.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _read(self) -> bool:
        chunk = self.socket.recv(65536)
        self.received += chunk
        return bool(chunk)

    def read_until(self, text: bytes) -> bytes:
        """Everything received until `text` (or the server closed: then what came)."""
        while text not in self.received and self._read():
            pass
        return self.received

    def close(self) -> None:
        self.socket.close()
