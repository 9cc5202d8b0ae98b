"""PullRequestHoldService: requests that found nothing wait here for data, up to a timeout.

As in RocketMQ, a held request is data, not a task of its own: it is answered as soon as `has_new()`
holds — on a notified arrival for its key, or at its next periodic re-check (RocketMQ re-checks
every 5 s, or every shortPollingTimeMills without long polling) — or when its timeout is up.
`answer()` builds the reply and queues it to its connection without blocking, so an arrival
answers the requests it satisfies there and then, with no task waking; the re-checks and timeouts
run by a timer, set for the earliest of them.

Every held request has an owner, the connection it came on: when that connection closes, `drop`
forgets what it held, so nothing waits to answer a connection that is gone.

A subclass may treat a request differently where the service decides its fate: found ready on an
arrival (`_arrived`), its timeout up with nothing new (`_timed_out`), answered (`_answer`) or
forgotten with its connection (`_forget`); `_check_at` has it looked at again at a given time.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Callable, Hashable

import trio

from chaos.clock import timer_source

LONG_POLLING_CHECK_INTERVAL = 5.0  # seconds


class HeldRequest:
    """A request held for data. Subclasses say when it is ready (`has_new`) and how it is answered
    (`answer`). One object per held request, with slots, not a bundle of closures: a large cluster
    holds 80,000 of them."""

    __slots__ = ("owner", "key", "check_interval", "deadline", "done")

    def __init__(self, owner: Hashable, key: Hashable, check_interval: float = LONG_POLLING_CHECK_INTERVAL):
        self.owner = owner  # the connection it came on
        self.key = key  # what arrivals wake it by
        self.check_interval = check_interval
        self.deadline = math.inf  # set when held
        self.done = False

    def has_new(self) -> bool:
        raise NotImplementedError

    def answer(self) -> None:
        """Build the reply and queue it to the connection, without blocking."""
        raise NotImplementedError


class PullRequestHoldService:
    def __init__(self, now: Callable[[], float] = trio.current_time, *,
                 on_error: Callable[[Exception], None]) -> None:
        """on_error: gets what a request's `has_new` or `answer` raises — they run in timers and in
        other connections' requests (an arrival), where it must not land."""
        self._now = now
        self._on_error = on_error
        self._held: dict[Hashable, list[HeldRequest]] = {}  # woken by arrivals on their key
        self._checks: list[tuple[float, int, HeldRequest]] = []  # heap: next re-check or timeout
        self._seq = itertools.count()  # ties in the heap go in hold order
        self._call_at = None  # the run's timers, once the service runs
        self._next_check = math.inf  # the earliest check a timer is set for
        self._by_owner: dict[Hashable, dict[HeldRequest, None]] = {}  # what each connection holds

    @property
    def running(self) -> bool:
        """Whether the service runs (its timers work)."""
        return self._call_at is not None

    @property
    def held(self) -> int:
        """How many requests wait now."""
        return sum(len(requests) for requests in self._by_owner.values())

    def held_by_owner(self) -> dict[Hashable, int]:
        """How many requests each owner holds now."""
        return {owner: len(requests) for owner, requests in self._by_owner.items()}

    def hold(self, request: HeldRequest, timeout: float, *, wake_on_arrival: bool = True) -> None:
        """Answer `request` now if it is ready, else when it is or `timeout` is up. What
        `has_new` raises here is the caller's: it is still processing the request."""
        now = self._now()
        request.deadline = now + timeout
        if timeout <= 0 or request.has_new():
            self._answer(request)
            return
        self._by_owner.setdefault(request.owner, {})[request] = None
        self._schedule_check(request, now)
        if wake_on_arrival:
            self._held.setdefault(request.key, []).append(request)

    def drop(self, owner: Hashable) -> None:
        """Forget every request `owner` holds (its connection closed): none is answered."""
        for request in self._by_owner.pop(owner, {}):
            self._forget(request)

    def _forget(self, request: HeldRequest) -> None:
        """`request`, held by a connection that closed, is never answered."""
        request.done = True  # its check in the heap is skipped when it comes due
        self._release(request)

    def notify_message_arriving(self, key: Hashable) -> None:
        held = self._held.get(key)
        if not held:
            return
        waiting = []
        for request in held:
            if not self._ready(request):
                waiting.append(request)
            else:
                self._arrived(request)
        self._held[key] = waiting

    def _arrived(self, request: HeldRequest) -> None:
        """`request`, held by the arrivals' key, found ready on one: answered, as
        notifyMessageArriving wakes it. Already off the key's list."""
        self._answer(request)

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
            if self._ready(request):
                self._release(request)
                self._answer(request)
            elif now < request.deadline:  # a re-check, before the deadline
                self._schedule_check(request, now)
            else:
                self._timed_out(request, now)
        self._next_check = math.inf
        self._arm()

    def _timed_out(self, request: HeldRequest, now: float) -> None:
        """`request`'s timeout is up with nothing new (a check at `now`): answered, as
        checkHoldRequest wakes a pull past its suspend time."""
        self._release(request)
        self._answer(request)

    def _arm(self) -> None:
        while self._checks and self._checks[0][2].done:
            heapq.heappop(self._checks)  # answered on an arrival: no check to wake for
        if self._checks and self._call_at is not None and self._checks[0][0] < self._next_check:
            self._next_check = self._checks[0][0]
            self._call_at(self._next_check, self._check)

    def _schedule_check(self, request: HeldRequest, now: float) -> None:
        """Its next re-check, or its timeout if that comes first."""
        self._check_at(request, min(request.deadline, now + request.check_interval))

    def _check_at(self, request: HeldRequest, when: float) -> None:
        heapq.heappush(self._checks, (when, next(self._seq), request))
        if when < self._next_check:
            self._arm()

    def _answer(self, request: HeldRequest) -> None:
        request.done = True  # its check in the heap, if any, is dropped when it comes due
        requests = self._by_owner.get(request.owner)
        if requests is not None:
            requests.pop(request, None)
            if not requests:
                del self._by_owner[request.owner]
        try:
            request.answer()
        except Exception as e:
            self._on_error(e)

    def _ready(self, request: HeldRequest) -> bool:
        try:
            return request.has_new()
        except Exception as e:
            self._on_error(e)
            return True  # answered now: its answer says what went wrong, or nothing waits on

    def _release(self, request: HeldRequest) -> None:
        held = self._held.get(request.key)
        if held is not None and request in held:
            held.remove(request)
