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
import time
from typing import Callable

import trio

from .trio_internals import current_runner

Callback = Callable[[], None]


class Timers:
    """Callbacks due at times, run in due order (ties: in the order they were set)."""

    def __init__(self) -> None:
        self._heap: list[list] = []  # [when, seq, callback or None when cancelled]
        self._seq = itertools.count()

    def call_at(self, when: float, callback: Callback) -> list:
        """Returns the timer, for `cancel`."""
        entry = [when, next(self._seq), callback]
        heapq.heappush(self._heap, entry)
        return entry

    @staticmethod
    def cancel(entry: list) -> None:
        entry[2] = None

    def next_due(self) -> float:
        return self._heap[0][0] if self._heap else math.inf

    def run_due(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            callback = heapq.heappop(heap)[2]
            if callback is not None:
                callback()


MAX_TIMER_ROUNDS = 100  # timers run in one go at most, so trio still polls I/O now and then


class VirtualClock(trio.abc.Clock):
    """Virtual time (what MockClock(autojump_threshold=0) gives): as soon as no task can run, time
    jumps to whatever comes first, trio's next deadline or the next timer — and due timers run
    there and then, inside trio's loop, so they must only move data and reschedule tasks.

    Unlike MockClock it has no wait_all_tasks_blocked cushion: time jumps whenever the run queue is
    empty. The simulation does not use that (it is a testing helper)."""

    def __init__(self) -> None:
        self._now = 0.0
        self.timers = Timers()
        self._runner = None

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        # trio asks only when no task is runnable: nothing happens before the earlier of the two.
        # Timers that wake no task (a request a server answers in its callback) are run one
        # after another here, rather than each costing trio a pass of its loop; trio gets control
        # back once a task is runnable or its own next deadline is due. (Timers.run_due, inline:
        # this loop turns once per simulated moment.)
        runner = self._runner
        if runner is None:  # a clock serves one run: its runner, once
            runner = self._runner = current_runner()
        heap = self.timers._heap
        for _ in range(MAX_TIMER_ROUNDS):
            due = heap[0][0] if heap and heap[0][0] < deadline else deadline
            if due == math.inf:
                return 86400.0  # nothing will ever happen but outside I/O (a signal)
            if due > self._horizon():
                return self._wait_for(due)
            if due > self._now:
                self._now = due
            now = self._now
            while heap and heap[0][0] <= now:
                callback = heapq.heappop(heap)[2]
                if callback is not None:
                    callback()
            if runner is None or runner.runq:
                break
            deadline = runner.deadlines.next_deadline()  # a callback may have set an earlier one
            if deadline <= now:
                break
        return 0.0

    def _horizon(self) -> float:
        """How far time may jump now: anywhere, as fast as the CPU allows."""
        return math.inf

    def _wait_for(self, due: float) -> float:
        return 0.0


class PacedVirtualClock(VirtualClock):
    """Virtual time that jumps as VirtualClock's does — to the next deadline or timer, never by
    a wall-clock reading, so a run is as deterministic — but never ahead of `rate` virtual seconds
    per real second: a simulated lab on screen. Rate 0 pauses it; `advance` lets it run through
    the next seconds at once (a step); rate math.inf is VirtualClock. Changing the rate or stepping
    never wakes a task: trio looks again within POLL real seconds."""

    POLL = 0.05

    def __init__(self, rate: float) -> None:
        super().__init__()
        self._rate = rate
        self._anchor_wall = time.monotonic()
        self._anchor_virtual = 0.0

    @property
    def rate(self) -> float:
        return self._rate

    @rate.setter
    def rate(self, rate: float) -> None:
        self._reanchor()
        self._rate = rate

    def advance(self, seconds: float) -> None:
        self._reanchor()
        self._anchor_virtual += seconds

    @property
    def horizon(self) -> float:
        """How far virtual time may go now. Paused, the clock comes to rest there once it has run
        through what was due before it: current_time() then equals it (when anything is due later)."""
        return self._horizon()

    def _reanchor(self) -> None:
        horizon = self._horizon()
        self._anchor_virtual = max(self._now, horizon) if horizon != math.inf else self._now
        self._anchor_wall = time.monotonic()

    def _horizon(self) -> float:
        if self._rate == math.inf:
            return math.inf
        return self._anchor_virtual + (time.monotonic() - self._anchor_wall) * self._rate

    def _wait_for(self, due: float) -> float:
        horizon = self._horizon()
        if horizon > self._now:
            self._now = horizon  # nothing is due before: the screen's clock moves on
        if self._rate <= 0:
            return self.POLL
        return min(self.POLL, (due - horizon) / self._rate)


class _TimerTask:
    """Timers on any other clock: a system task sleeps until the first is due and runs it."""

    def __init__(self) -> None:
        self.timers = Timers()
        self._sleep: trio.CancelScope | None = None
        trio.lowlevel.spawn_system_task(self._run, name="chaos.clock.timers")

    def call_at(self, when: float, callback: Callback) -> list:
        entry = self.timers.call_at(when, callback)
        if self._sleep is not None and when < self._sleep.deadline:
            self._sleep.deadline = when
        return entry

    async def _run(self) -> None:
        while True:
            self.timers.run_due(trio.current_time())
            with trio.CancelScope(deadline=self.timers.next_due()) as self._sleep:
                await trio.sleep_forever()


_timer_task: trio.lowlevel.RunVar[_TimerTask] = trio.lowlevel.RunVar("chaos.clock.timer_task")


def timer_source() -> Callable[[float, Callback], list]:
    """`call_at` for the running trio loop: the VirtualClock's own timers, else the run's timer task."""
    clock = trio.lowlevel.current_clock()
    if isinstance(clock, VirtualClock):
        return clock.timers.call_at
    try:
        task = _timer_task.get()
    except LookupError:
        task = _TimerTask()
        _timer_task.set(task)
    return task.call_at


async def sleep_until(when: float) -> None:
    """trio.sleep_until, for the periodic loops of simulated nodes: on a VirtualClock a timer wakes
    the task, without the cancel scope and Cancelled exception a trio sleep costs (about 40 µs)."""
    clock = trio.lowlevel.current_clock()
    if not isinstance(clock, VirtualClock) or when <= clock.current_time() or when == math.inf:
        await trio.sleep_until(when)
        return
    task = trio.lowlevel.current_task()
    timer = clock.timers.call_at(when, lambda: trio.lowlevel.reschedule(task))

    def abort(_) -> trio.lowlevel.Abort:
        Timers.cancel(timer)
        return trio.lowlevel.Abort.SUCCEEDED

    await trio.lowlevel.wait_task_rescheduled(abort)
