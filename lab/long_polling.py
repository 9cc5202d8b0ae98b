"""PullRequestHoldService: requests that found nothing wait here for data, up to a timeout.

As in RocketMQ, a held request is data, not a task of its own: it is answered as soon as `has_new()`
holds — on a notified arrival for its key, or at its next periodic re-check (RocketMQ re-checks
every 5 s, or every shortPollingTimeMills without long polling) — or when its timeout is up.
`answer()` builds the reply and queues it to its connection without blocking, so an arrival
answers the requests it satisfies there and then, with no task waking; the re-checks and timeouts
run by a timer, set for the earliest of them.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass
from typing import Callable, Hashable

import trio

from chaos.clock import timer_source

LONG_POLLING_CHECK_INTERVAL = 5.0  # seconds


@dataclass(eq=False, slots=True)
class HeldRequest:
    key: Hashable
    has_new: Callable[[], bool]
    answer: Callable[[], None]
    deadline: float
    check_interval: float
    done: bool = False


class PullRequestHoldService:
    def __init__(self, now: Callable[[], float] = trio.current_time) -> None:
        self._now = now
        self._held: dict[Hashable, list[HeldRequest]] = {}  # woken by arrivals on their key
        self._checks: list[tuple[float, int, HeldRequest]] = []  # heap: next re-check or timeout
        self._seq = itertools.count()  # ties in the heap go in hold order
        self._call_at = None  # the run's timers, once the service runs
        self._next_check = math.inf  # the earliest check a timer is set for

    def hold(self, key: Hashable, has_new: Callable[[], bool], timeout: float,
             answer: Callable[[], None], *, check_interval: float = LONG_POLLING_CHECK_INTERVAL,
             wake_on_arrival: bool = True) -> None:
        now = self._now()
        request = HeldRequest(key, has_new, answer, now + timeout, check_interval)
        if has_new() or timeout <= 0:
            self._answer(request)
            return
        self._schedule_check(request, now)
        if wake_on_arrival:
            self._held.setdefault(key, []).append(request)

    def notify_message_arriving(self, key: Hashable) -> None:
        held = self._held.get(key)
        if not held:
            return
        waiting = []
        for request in held:
            if request.has_new():
                self._answer(request)
            else:
                waiting.append(request)
        self._held[key] = waiting

    async def run(self) -> None:
        """Re-check held requests when their time comes, by a timer (no task wakes for it); answer
        those ready or timed out. Until cancelled (the broker stops): then the timers do nothing."""
        self._call_at = timer_source()
        self._next_check = math.inf
        try:
            self._arm()
            await trio.sleep_forever()
        finally:
            self._call_at = None

    def _check(self) -> None:
        if self._call_at is None:
            return  # the service stopped
        now = self._now()
        if now < self._next_check:
            return  # a timer set before an earlier one, which took over
        self._next_check = -math.inf  # no timer set while checking: one for the next, after
        while self._checks and self._checks[0][0] <= now:
            request = heapq.heappop(self._checks)[2]
            if request.done:
                continue
            if request.has_new() or now >= request.deadline:
                self._release(request)
                self._answer(request)
            else:
                self._schedule_check(request, now)
        self._next_check = math.inf
        self._arm()

    def _arm(self) -> None:
        while self._checks and self._checks[0][2].done:
            heapq.heappop(self._checks)  # answered on an arrival: no check to wake for
        if self._checks and self._call_at is not None and self._checks[0][0] < self._next_check:
            self._next_check = self._checks[0][0]
            self._call_at(self._next_check, self._check)

    def _schedule_check(self, request: HeldRequest, now: float) -> None:
        wake_at = min(request.deadline, now + request.check_interval)
        heapq.heappush(self._checks, (wake_at, next(self._seq), request))
        if wake_at < self._next_check:
            self._arm()

    @staticmethod
    def _answer(request: HeldRequest) -> None:
        request.done = True  # its check in the heap, if any, is dropped when it comes due
        request.answer()

    def _release(self, request: HeldRequest) -> None:
        held = self._held.get(request.key)
        if held is not None and request in held:
            held.remove(request)
