"""One `async def` per RocketMQ method that waits, run either by a task or by its replies' callbacks.

4.9.8's client waits for its replies (invokeSync) in computePullFromWhere, findConsumerIdList,
updateProcessQueueTableInRebalance. The lab writes each once, as an `async def` in that method's
shape, whose waits are `Step`s. A trio task may await it as any coroutine: each step then waits as
a task waits. `Flow` runs the same coroutine with no task at all: a step's reply callback resumes it
where it waits, so a large cluster's 80,000 offset queries wake no task each. What only a task can
do (a connect, a route refresh behind a lock) a step hands to a task of the node's (`in_task`),
which resumes the flow when it is done.

A step knows which of the two runs it: `Flow` sets `_driving` while it advances its coroutine, and a
step's `__await__` runs synchronously inside that advance. Anything else a coroutine under `Flow`
awaits (a trio call) is a bug, and the flow fails with a message that says so.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Coroutine

import trio

Resume = Callable[[Any], None]  # a step's value, or the exception the flow gets at its await

_driving = False  # a Flow is advancing its coroutine right now (see the module's doc)
_NOTHING = object()


class Step:
    """A wait inside a flow. `start(resume)` begins it and arranges `resume(value or exception)`,
    now or later; `in_task()` is the same wait as a task does it."""

    __slots__ = ("start", "in_task")

    def __init__(self, start: Callable[[Resume], None], in_task: Callable[[], Awaitable[Any]]) -> None:
        self.start, self.in_task = start, in_task

    def __await__(self):
        if not _driving:
            return (yield from self.in_task().__await__())
        outcome = yield self
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def in_flow() -> bool:
    """Whether the code running now is a Flow's (rather than a task's): a step with no task
    version may only be awaited there."""
    return _driving


def in_task(nursery: trio.Nursery, fn: Callable[..., Awaitable[Any]], *args: Any) -> Step:
    """`await fn(*args)` as a step: a flow runs it in a task of `nursery` and goes on with what it
    returns or raises (an Exception; trio's Cancelled ends the task, not the flow, which is then
    given up with its node)."""
    def start(resume: Resume) -> None:
        async def run() -> None:
            try:
                value = await fn(*args)
            except Exception as error:
                resume(error)
            else:
                resume(value)
        nursery.start_soon(run)
    return Step(start, lambda: fn(*args))


async def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """`await coro`, its steps by callbacks (a Flow): the awaiting task wakes once, when it ends.
    Cancelled, the flow is given up where it waits."""
    ended = trio.Event()
    outcome: list = []

    def done(value: Any, error: BaseException | None) -> None:
        outcome.append((value, error))
        ended.set()

    flow = Flow(coro, done).start()
    try:
        await ended.wait()
    finally:
        flow.give_up()
    value, error = outcome[0]
    if error is not None:
        raise error
    return value


class Flow:
    """Runs `coro` by its steps' callbacks, with no task; `done(value, error)` once it returns or
    raises. `give_up()` closes it where it waits (its `finally` blocks run) and drops whatever
    resumes it later, as an abandoned call's reply is dropped."""

    __slots__ = ("_coro", "_done", "_advancing", "_sync", "given_up")

    def __init__(self, coro: Coroutine[Any, Any, Any], done: Callable[[Any, BaseException | None], None]) -> None:
        self._coro, self._done = coro, done
        self._advancing = False
        self._sync: Any = _NOTHING  # an outcome handed over while its step was starting
        self.given_up = False

    def start(self) -> Flow:
        self._advance(None)
        return self

    def give_up(self) -> None:
        if not self.given_up:
            self.given_up = True
            self._coro.close()

    def _resume(self, outcome: Any) -> None:
        if self.given_up:
            return
        if self._advancing:  # answered from inside its step's start: go on in _advance's loop
            self._sync = outcome
            return
        self._advance(outcome)

    def _advance(self, outcome: Any) -> None:
        global _driving
        while True:
            self._advancing = True
            was_driving, _driving = _driving, True
            try:
                step = self._coro.send(outcome)
            except StopIteration as stop:
                self._finish(stop.value, None)
                return
            except Exception as error:
                self._finish(None, error)
                return
            finally:
                _driving = was_driving
            if type(step) is not Step:
                self._coro.close()
                self._finish(None, TypeError(f"a flow awaited {step!r}, which is not a Step: wrap a "
                                             "task's wait in lab.remoting.flow.in_task"))
                return
            self._sync = _NOTHING
            try:
                step.start(self._resume)
            except Exception as error:  # the step could not begin: the flow gets why, at its await
                self._sync = error
            finally:
                self._advancing = False
            if self._sync is _NOTHING or self.given_up:
                return  # its callback resumes it
            outcome, self._sync = self._sync, _NOTHING

    def _finish(self, value: Any, error: BaseException | None) -> None:
        self._advancing = False
        self.given_up = True
        self._done(value, error)
