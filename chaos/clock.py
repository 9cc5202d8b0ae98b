"""Timers for the simulated network, and the virtual clock that makes them cheap.

The simulated network delivers each chunk at its due time by a callback (`call_at`), not by a task
sleeping until then. A trio sleep costs a cancel scope, a deadline and a Cancelled exception — about
40 µs; a timer is a heap entry. On a VirtualClock the timers are the clock's own, run by trio's loop
when every task waits; on any other clock (real time, MockClock in tests) a system task runs them.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Callable

import trio

Callback = Callable[[], None]


class Timers:
    """Callbacks due at times, run in due order (ties: in the order they were set)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callback]] = []
        self._seq = itertools.count()

    def call_at(self, when: float, callback: Callback) -> None:
        heapq.heappush(self._heap, (when, next(self._seq), callback))

    def next_due(self) -> float:
        return self._heap[0][0] if self._heap else math.inf

    def run_due(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            heapq.heappop(heap)[2]()


class VirtualClock(trio.abc.Clock):
    """Virtual time (what MockClock(autojump_threshold=0) gives): as soon as no task can run, time
    jumps to whatever comes first, trio's next deadline or the next timer — and due timers run
    there and then, inside trio's loop, so they must only move data and reschedule tasks.

    Unlike MockClock it has no wait_all_tasks_blocked cushion: time jumps whenever the run queue is
    empty. The simulation does not use that (it is a testing helper)."""

    def __init__(self) -> None:
        self._now = 0.0
        self.timers = Timers()

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        # trio asks only when no task is runnable: nothing happens before the earlier of the two.
        due = min(deadline, self.timers.next_due())
        if due == math.inf:
            return 86400.0  # nothing will ever happen but outside I/O (a signal)
        self._now = max(self._now, due)
        self.timers.run_due(self._now)
        return 0.0


class _TimerTask:
    """Timers on any other clock: a system task sleeps until the first is due and runs it."""

    def __init__(self) -> None:
        self.timers = Timers()
        self._sleep: trio.CancelScope | None = None
        trio.lowlevel.spawn_system_task(self._run, name="chaos.clock.timers")

    def call_at(self, when: float, callback: Callback) -> None:
        self.timers.call_at(when, callback)
        if self._sleep is not None and when < self._sleep.deadline:
            self._sleep.deadline = when

    async def _run(self) -> None:
        while True:
            self.timers.run_due(trio.current_time())
            with trio.CancelScope(deadline=self.timers.next_due()) as self._sleep:
                await trio.sleep_forever()


def timer_source() -> Callable[[float, Callback], None]:
    """`call_at` for the running trio loop: the VirtualClock's own timers, else a timer task."""
    clock = trio.lowlevel.current_clock()
    if isinstance(clock, VirtualClock):
        return clock.timers.call_at
    return _TimerTask().call_at
