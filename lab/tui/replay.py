"""A recorded event log played into the model: play, pause, step, jump to a time.

Going back in time rebuilds the model from the first record: the model only moves forward.
"""

from __future__ import annotations

import time
from pathlib import Path

from lab.events import scan_file

from .source import STEP, Source


class ReplayError(ValueError):
    """A log with nothing to replay: empty, or not an event log."""


def open_log(path: str | Path) -> tuple[list[dict], str | None]:
    """The records a replay can show and, when the log is damaged, one line saying what is wrong
    with it and what is shown. A torn last record (a run killed mid-write) is read past, as the
    design allows, and still said; damage in the middle ends the replay there: msgpack has no
    marks to find the next whole record by, so nothing after the first unreadable byte is guessed at.
    OSError when the file cannot be read; ReplayError when nothing in it can be shown."""
    scan = scan_file(path)
    if scan.problem is not None and scan.problem.startswith(("empty", "not an event log")):
        raise ReplayError(f"{path}: {scan.problem}")
    if scan.problem is None:
        return scan.records, None
    n, last = len(scan.records), scan.records[-1].get("t", 0.0)
    shown = f"showing the {n} records before it, up to t={last:.1f} s"
    if scan.torn:
        warning = (f"{path}: the last record is torn at byte {scan.end} of {scan.size} (a run killed mid-write): "
                   f"{shown}")
    elif scan.end < scan.size:
        warning = (f"{path}: damaged in the middle ({scan.problem} of {scan.size}): {shown}; "
                   f"the {scan.size - scan.end} bytes after it cannot be read")
    else:  # every byte read, the end missing
        warning = f"{path}: {scan.problem}: showing all {n} records, up to t={last:.1f} s"
    return scan.records, warning


class Replay(Source):
    mode = "replay"
    can_step = True

    def __init__(self, records: list[dict], speed: float = 4.0, warning: str | None = None):
        """warning: what is wrong with a damaged log (open_log's), told on screen once it opens."""
        super().__init__(speed)
        self.gone = warning  # the screen says it as soon as it opens, and that nothing comes after
        self.records = records
        self.end = records[-1]["t"] if records else 0.0
        self.position = 0.0
        self.paused = True
        self._next = 0  # index of the first record not fed yet
        self._wall: float | None = None
        self.jump(0.0)
        self.scenario = self.model.run.get("scenario")

    def tick(self) -> None:
        wall = time.monotonic()
        if not self.paused and self._wall is not None:
            self.jump(self.position + (wall - self._wall) * self.speed)
            if self.position >= self.end:
                self.paused = True
        self._wall = wall

    def step(self, seconds: float = STEP) -> None:
        self.jump(self.position + seconds)

    def jump(self, t: float) -> None:
        t = max(0.0, min(t, self.end))
        if t < self.position:
            self.model = type(self.model)()
            self._next = 0
        records = self.records
        while self._next < len(records) and records[self._next]["t"] <= t:
            self.model.feed(records[self._next])
            self._next += 1
        self.position = self.model.now = t
