"""The lab's time in another process: a node run as a child process (lab/run/child.py) is on the
same timeline as the parent that started it, at the same speed."""

from __future__ import annotations

import math
import time

import trio


def timeline() -> dict:
    """The running trio clock as a child rebuilds it: its time at one CLOCK_MONOTONIC instant, and
    its rate (trio's real-time clock has none: 1). Taken when the child is started, so a child
    started or restarted later is on the lab's timeline too."""
    clock = trio.lowlevel.current_clock()
    return {"at": time.monotonic(), "time": clock.current_time(), "rate": getattr(clock, "rate", 1.0)}


class LabClock(trio.abc.Clock):
    """The parent's clock in this process. CLOCK_MONOTONIC is system-wide on Linux, so the
    parent's reading of it (`at`) names the same instant here, and this process's time equals the
    parent's at every instant after. It runs on while the process is SIGSTOPped: timers that fell
    due meanwhile fire at once on SIGCONT, as with trio's own clock. A rate the parent sets later
    (the TUI's pause or speed keys) does not reach a child."""

    def __init__(self, timeline: dict):
        self.at, self.time, self.rate = timeline["at"], timeline["time"], timeline["rate"]

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self.time + self.rate * (time.monotonic() - self.at)

    def deadline_to_sleep_time(self, deadline: float) -> float:
        if self.rate == 0:  # time stands still, as in a paused parent
            return math.inf
        return (deadline - self.current_time()) / self.rate
