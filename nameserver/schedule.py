"""When a server's periodic work runs: RocketMQ's ScheduledExecutorService.scheduleAtFixedRate.

At a fixed rate, the n-th run is due at first + n × period whatever the runs before took: a run
that comes late (a long task, a process that was stopped) is followed at once by the overdue ones,
never skipped — what a JVM does after SIGCONT.

The default runs on trio's clock from now. The lab gives each node its own: the first runs placed
at a seeded phase of their periods, as processes started at different moments would be, and every
wait held while the node is frozen.
"""

from __future__ import annotations

from typing import Awaitable, Callable

import trio


class Schedule:
    def __init__(self, phase: float = 0.0, sleep_until: Callable[[float], Awaitable[None]] | None = None):
        """phase (0..1): how far into its period every first run is moved; sleep_until: the wait
        (default trio.sleep_until)."""
        self.phase = phase
        if sleep_until is not None:
            self.sleep_until = sleep_until

    def first_run(self, delay: float, period: float) -> float:
        return trio.current_time() + delay + self.phase * period

    async def sleep_until(self, when: float) -> None:
        await trio.sleep_until(when)

    async def every(self, delay: float, period: float, task: Callable[[], Awaitable[None]]) -> None:
        """Run `task` first after `delay` (moved by the phase), then every `period`, until cancelled."""
        next_run = self.first_run(delay, period)
        while True:
            await self.sleep_until(next_run)
            await task()
            next_run += period
