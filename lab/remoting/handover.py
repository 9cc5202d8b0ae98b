"""Where a chain of reply callbacks stops and a task takes over.

The lab's hot loops that RocketMQ writes as callbacks (a producer's asynchronous sends, a slave's
replication) send each request from the callback of the reply before it (invokeAsync), so a reply
wakes no task. Callbacks must not wait, though: a connect, a route refresh, the pause after a
failure are for a task. The callbacks `give` the reason the chain stopped; the task, parked in
`take`, goes on from there.
"""

from __future__ import annotations

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
