"""A real lab in a process of its own, for the attach and serve tests: `nslab up --headless` in
simulated mode at the UI's speed, found as `nslab attach` finds it (its info file)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from lab.control import live

NSLAB = str(Path(sys.executable).with_name("nslab"))
# Producers send once a second: enough records to follow, little work for a machine shared with others.
QUIET = ["--set", "producer.rate=1"]


def wait_for(predicate, what: str, timeout: float = 30.0, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(poll)
    return value


class LabProcess:
    def __init__(self, *extra: str, seed: int = 2):
        self.process = subprocess.Popen([NSLAB, "up", "--headless", "--sim", "--seed", str(seed), "--speed", "4",
                                         *QUIET, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.info = wait_for(self._info, "the lab is listening", timeout=60)
        except BaseException:  # no test gets it to close: not left running
            self.process.kill()
            self.process.wait()
            raise
        self.pid = self.process.pid

    def _info(self):
        if self.process.poll() is not None:
            raise AssertionError(f"the lab exited {self.process.returncode}: {self.process.stderr.read()}")
        return next((i for i in live.running_labs() if i["pid"] == self.process.pid and "namesrv_addr" in i), None)

    def status(self) -> dict:
        return {row["node"]: row["state"] for row in live.send(["status"], self.info)["status"]}

    def interrupt(self) -> int:
        """Ctrl-C: the lab stops gracefully and its run ends."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(60)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self.process.stdout.close()
        self.process.stderr.close()
