"""A recorded event log played into the model: play, pause, step, jump to a time.

Going back in time rebuilds the model from the first record: the model only moves forward.
"""

from __future__ import annotations

import time

from .source import STEP, Source


class Replay(Source):
    mode = "replay"
    can_step = True

    def __init__(self, records: list[dict], speed: float = 4.0):
        super().__init__(speed)
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
