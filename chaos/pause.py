"""Freeze as SIGSTOP does it, for a node that runs in the lab's own process.

A stopped process does nothing: its timers do not fire, its threads do not run, it sends nothing,
and what reaches its sockets waits in the kernel. The network holds a frozen node's bytes (both
ways); a Pause holds the rest — every wait of the node's periodic work and every callback its
calls would run — until `resume`, when what came due meanwhile runs at once.
"""

from __future__ import annotations

from typing import Callable

import trio

from .clock import sleep_until


class Pause:
    def __init__(self, on_error: Callable[[Exception], None] | None = None):
        """on_error: the owner of what a deferred callback raises (it runs in the resumer's task)."""
        self.paused = False
        self.on_error = on_error
        self._resumed = trio.Event()
        self._deferred: list[Callable[[], None]] = []

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        """Wake every held wait, and run the deferred callbacks in the order they came."""
        if not self.paused:
            return
        self.paused = False
        self._resumed.set()
        self._resumed = trio.Event()
        deferred, self._deferred = self._deferred, []
        for callback in deferred:
            try:
                callback()
            except Exception as e:
                if self.on_error is None:
                    raise
                self.on_error(e)

    async def running(self) -> None:
        """Return at once unless paused; else when resumed."""
        while self.paused:
            await self._resumed.wait()

    def defer(self, callback: Callable[[], None]) -> bool:
        """While paused, keep `callback` for the resume and say True; else False (run it yourself)."""
        if not self.paused:
            return False
        self._deferred.append(callback)
        return True

    async def sleep_until(self, when: float) -> None:
        """Sleep until `when`, then for as long as the pause lasts."""
        await sleep_until(when)
        await self.running()

    def listener(self, listener: trio.abc.Listener) -> trio.abc.Listener:
        """`listener` as a stopped process has it: the kernel completes handshakes, the process
        takes each connection only once it runs (so an idle timer starts then, not at the SYN)."""
        return _HeldListener(listener, self)


class _HeldListener(trio.abc.Listener):
    def __init__(self, listener: trio.abc.Listener, pause: Pause):
        self.inner, self.pause = listener, pause

    async def accept(self) -> trio.abc.Stream:
        stream = await self.inner.accept()
        await self.pause.running()
        return stream

    async def aclose(self) -> None:
        await self.inner.aclose()
