"""Where a chain of reply callbacks stops and a task takes over.

The lab's hot loops (a producer's sends, a slave's replication, a client's route poll and
rebalance rounds) send each request from the callback of the reply before it (invokeAsync), so a
reply wakes no task. Callbacks must not wait, though: a connect, a route refresh, the pause after a
failure are for a task. The callbacks `give` the reason the chain stopped; the task, parked in
`take`, goes on from there.
"""

from __future__ import annotations

from typing import Callable

import trio


class Handover:
    def __init__(self) -> None:
        self._given = trio.Event()
        self._why: object = None

    def give(self, why: object = None) -> None:
        self._why = why
        self._given.set()

    async def take(self) -> object:
        """Wait for the chain to stop; why it did (None: nothing wrong, just go on)."""
        await self._given.wait()
        self._given = trio.Event()
        return self._why


class CallbackRound:
    """A round over a list (every topic of a route poll or a rebalance), item after item from the
    reply callbacks while they need no wait: `at`, the item the callbacks are on; `stop(why)`,
    where they hand over to the task that runs the round. Once `run` returns, or the task is
    cancelled (the client stopping), the round is given up: a reply that lands after that must be
    ignored, as an abandoned call's is."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.given_up = False
        self.on_give_up: Callable[[], None] | None = None  # told once the round is given up
        self._stopped = Handover()

    def stop(self, why: object = None) -> None:
        self._stopped.give(why)

    async def run(self, first: Callable[[], None]) -> object:
        """Start the callbacks with `first()`; why they stopped."""
        first()
        try:
            return await self._stopped.take()
        finally:
            self.given_up = True
            if self.on_give_up is not None:
                self.on_give_up()
