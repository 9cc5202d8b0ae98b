"""Nodes as supervised trio tasks: each runs in its own cancel scope, so a kill is a cancel.

A node's `body(task_status)` runs until cancelled and reports its address through task_status.
The supervisor knows nothing of RocketMQ; lab/run/cluster.py decides what each node is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable

import trio

Body = Callable[..., Awaitable[None]]


@dataclass(eq=False)
class NodeHandle:
    name: str
    role: str
    body: Body
    stop: Callable[[], Awaitable[None]] | None = None
    state: str = "new"  # up | frozen | killed | stopped | crashed
    address: str | None = None
    error: str | None = None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)

    @property
    def running(self) -> bool:
        """Its tasks exist: up, or frozen (a stopped process can still be killed)."""
        return self.state in ("up", "frozen")


class Supervisor:
    def __init__(self, nursery: trio.Nursery, *, on_start: Callable[[NodeHandle], None] | None = None,
                 on_exit: Callable[[NodeHandle], None] | None = None):
        self.nursery = nursery
        self.nodes: dict[str, NodeHandle] = {}
        self.on_start = on_start
        self.on_exit = on_exit

    def add(self, name: str, role: str, body: Body, stop: Callable[[], Awaitable[None]] | None = None) -> NodeHandle:
        handle = self.nodes[name] = NodeHandle(name, role, body, stop)
        return handle

    async def start(self, name: str) -> NodeHandle:
        """Start (or restart) a node and wait until it has reported its address."""
        handle = self.nodes[name]
        if handle.state == "up":
            return handle
        handle.scope, handle.done, handle.error = trio.CancelScope(), trio.Event(), None
        handle.address = await self.nursery.start(self._run, handle)
        handle.state = "up"
        if self.on_start is not None:
            self.on_start(handle)
        return handle

    async def _run(self, handle: NodeHandle, task_status=trio.TASK_STATUS_IGNORED) -> None:
        status = _TaskStatus(task_status)
        try:
            with handle.scope:
                await handle.body(task_status=status)
            if handle.state == "up" and not handle.scope.cancelled_caught:
                handle.state = "stopped"
        except Exception as e:  # a node's bug takes down that node, never the lab
            handle.state, handle.error = "crashed", describe(e)
            if not status.called:  # failed before it started: the caller of start() must hear why
                raise StartError(f"{handle.name} could not start: {handle.error}") from e
        finally:
            handle.done.set()
            if self.on_exit is not None:
                self.on_exit(handle)

    async def stop(self, name: str) -> None:
        """Graceful: the node's `stop` hook (unregister, say) runs before its tasks are cancelled."""
        handle = self.nodes[name]
        if not handle.running:
            return
        if handle.stop is not None:
            with trio.move_on_after(10):
                await handle.stop()
        handle.state = "stopped"
        handle.scope.cancel()
        await handle.done.wait()

    async def kill(self, name: str) -> None:
        handle = self.nodes[name]
        if not handle.running:
            return
        handle.state = "killed"
        handle.scope.cancel()
        await handle.done.wait()


class StartError(RuntimeError):
    """A node failed before it was up: the message says which and why."""


class _TaskStatus:
    """The task_status a node's body gets: trio's, noting that the node has started."""

    def __init__(self, task_status):
        self.task_status, self.called = task_status, False

    def started(self, value=None) -> None:
        self.called = True
        self.task_status.started(value)


def describe(error: BaseException) -> str:
    """What went wrong, for a person: the errors inside a nursery's ExceptionGroup, not the group."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(describe(e) for e in error.exceptions))
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
