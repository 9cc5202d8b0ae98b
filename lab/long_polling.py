"""PullRequestHoldService: requests that found nothing wait here for data, up to a timeout.

A held request returns as soon as `has_new()` holds: on a notified arrival, or at the next periodic
re-check (RocketMQ re-checks every 5 s, or every shortPollingTimeMills without long polling). The
caller then runs the request again and answers it.
"""

from __future__ import annotations

from typing import Callable, Hashable

import trio

LONG_POLLING_CHECK_INTERVAL = 5.0  # seconds


class PullRequestHoldService:
    def __init__(self) -> None:
        self._arrivals: dict[Hashable, trio.Event] = {}

    def notify_message_arriving(self, key: Hashable) -> None:
        event = self._arrivals.pop(key, None)
        if event is not None:
            event.set()

    async def hold(self, key: Hashable, has_new: Callable[[], bool], timeout: float, *,
                   check_interval: float = LONG_POLLING_CHECK_INTERVAL, wake_on_arrival: bool = True) -> None:
        deadline = trio.current_time() + timeout
        while not has_new() and trio.current_time() < deadline:
            wake_at = min(deadline, trio.current_time() + check_interval)
            if wake_on_arrival:
                event = self._arrivals.setdefault(key, trio.Event())
                with trio.move_on_at(wake_at):
                    await event.wait()
            else:
                await trio.sleep_until(wake_at)
