"""PullRequestHoldService: requests that found nothing wait here for data, up to a timeout.

As in RocketMQ, a held request is data, not a task of its own: it is answered as soon as `has_new()`
holds — on a notified arrival for its key, or at its next periodic re-check (RocketMQ re-checks
every 5 s, or every shortPollingTimeMills without long polling) — or when its timeout is up.
`answer()` builds the reply and queues it to its connection without blocking, so an arrival
answers the requests it satisfies there and then, with no task waking; the re-checks and timeouts
run by a timer, set for the earliest of them.

Every held request has an owner, the connection it came on: when that connection closes, `drop`
forgets what it held, so nothing waits to answer a connection that is gone.

A request renewed at its deadline (a long-polled pull the consumer would only send again) may
coast: renewed every period with no timer, while it is in `_coasting`, until an arrival answers
it, its connection closes, or its own wake or `stop_coasting` puts it back on the timers.
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
    """A request held for data. Subclasses say when it is ready (`has_new`), how it is answered
    (`answer`) and, for a long-polled pull, whether it is renewed in place at its deadline (`renew`).
    One object per held request, with slots, not a bundle of closures: a large cluster holds
    80,000 of them."""

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

    def renew(self) -> float | None:
        """Called when the request times out with nothing new, instead of answering it: the new
        deadline if it was renewed in place (the consumer would only have sent it again, see
        SuspendedPull), else None, and it is answered."""
        return None

    def coast(self, stop_coasting: Callable[[], None]) -> bool:
        """Just renewed: whether it is renewed every period from now on with no timer at all
        (see PullRequestHoldService), until `stop_coasting()` or the request's own wake."""
        return False

    def catch_up(self, now: float) -> None:
        """Coasting: make the renewals due by `now`; `deadline` is the next one's."""

    def restore(self) -> None:
        """Coasting no more: the caller's timeout counts again."""

    def back_at(self) -> float:
        """Renewed in place: when the call sent again would have arrived (after the empty answer's
        round trip), its renewals made up to now. Until then (and at that very instant) an arrival
        does not answer it: the call is on the wire. -inf when it is here."""
        return -math.inf


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
        # Renewed every period without a timer (HeldRequest.coast): an idle queue's pull, held for
        # as long as nothing happens, costs nothing per period. Still in _held and _by_owner.
        self._coasting: dict[HeldRequest, None] = {}

    @property
    def held(self) -> int:
        """How many requests wait now."""
        return sum(len(requests) for requests in self._by_owner.values())

    @property
    def coasting(self) -> int:
        """How many of them are renewed every period with no timer now (HeldRequest.coast)."""
        return len(self._coasting)

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
        now = self._now()
        for request in self._by_owner.pop(owner, {}):
            request.done = True  # its check in the heap is skipped when it comes due
            if self._coasting.pop(request, False) is None:
                self._settle(request, now, restore=False)  # the renewals it had: counted
            self._release(request)

    def notify_message_arriving(self, key: Hashable) -> None:
        held = self._held.get(key)
        if not held:
            return
        waiting = []
        for request in held:
            if not self._ready(request):
                waiting.append(request)
            elif not self._on_the_wire(request):
                self._answer(request)
        self._held[key] = waiting

    def _on_the_wire(self, request: HeldRequest) -> bool:
        """Whether a request found ready on an arrival was renewed in place with the call sent
        again still on its way (or arriving at this instant, after what arrives now): it then
        stops coasting and is looked at again when the call would arrive, which would have found
        the data then."""
        now = self._now()
        if self._coasting.pop(request, False) is None:
            self._settle(request, now)
        try:
            back = request.back_at()
        except Exception as e:
            self._on_error(e)
            return False
        if back < now:
            return False
        heapq.heappush(self._checks, (back, next(self._seq), request))
        if back < self._next_check:
            self._arm()
        return True

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
            elif not self._renewed(request):
                self._release(request)
                self._answer(request)
            elif not self._coasts(request):
                self._schedule_check(request, now)
        self._next_check = math.inf
        self._arm()

    def _coasts(self, request: HeldRequest) -> bool:
        try:
            coasting = request.coast(self._stop_coasting)
        except Exception as e:
            self._on_error(e)
            return False
        if coasting:
            self._coasting[request] = None
        return coasting

    def uncoast(self, request: HeldRequest) -> None:
        """A coasting request renewed one period at a time again (its caller's state changed):
        the renewals due by now are made and its next deadline has a timer."""
        if self._coasting.pop(request, False) is not None:
            return
        now = self._now()
        self._settle(request, now)
        if self._call_at is not None:
            self._schedule_check(request, now)

    def _settle(self, request: HeldRequest, now: float, *, restore: bool = True) -> None:
        """A request stops coasting: its renewals due by now made, its caller's timeout back.
        What that raises is the service's error, not the caller's (a consumer's rebalance, a
        chaos action's link change)."""
        try:
            request.catch_up(now)
            if restore:
                request.restore()
        except Exception as e:
            self._on_error(e)

    def _stop_coasting(self) -> None:
        """A link changed somewhere: a renewal might now go otherwise, so none coasts."""
        for request in list(self._coasting):
            self.uncoast(request)

    def catch_up(self) -> None:
        """Make every coasting request's renewals due by now (what they count, counted)."""
        now = self._now()
        for request in self._coasting:
            self._settle(request, now, restore=False)

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

    def _answer(self, request: HeldRequest) -> None:
        request.done = True  # its check in the heap, if any, is dropped when it comes due
        if self._coasting.pop(request, False) is None:
            self._settle(request, self._now())
        requests = self._by_owner.get(request.owner)
        if requests is not None:
            requests.pop(request, None)
            if not requests:
                del self._by_owner[request.owner]
        try:
            request.answer()
        except Exception as e:
            self._on_error(e)

    def _renewed(self, request: HeldRequest) -> bool:
        try:
            deadline = request.renew()
        except Exception as e:
            self._on_error(e)
            return False
        if deadline is None:
            return False
        request.deadline = deadline
        return True

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
