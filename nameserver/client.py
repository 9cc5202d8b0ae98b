"""A remoting client on any trio stream: requests matched to responses by opaque, timeouts,
oneway sends. The lab's brokers and clients, the tests and the benchmarks all talk through it."""

from __future__ import annotations

import heapq
import itertools
import logging
import math
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable, Iterator

import trio

from .connection import Connection
from .protocol import ProtocolError, RemotingCommand
from .protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE

log = logging.getLogger("nameserver.client")


class RemotingError(Exception):
    """The call could not complete: timeout, closed or broken connection, undecodable reply."""


class RemotingTimeoutError(RemotingError):
    pass


def _log_callback_error(error: Exception) -> None:
    log.error("a reply callback failed", exc_info=error)


# An asynchronous call's continuation: the reply, or the RemotingError that ended the call.
ReplyCallback = Callable[["RemotingCommand | RemotingError"], None]


class ResponseFuture:
    """One call in flight (NettyRemotingAbstract's ResponseFuture): the reader puts the response,
    a timeout, or the error that ends the connection, and the caller wakes — or, for an
    asynchronous call, its callback runs. The caller parks on trio's lowest level rather than on
    an Event: this is every call's wait."""

    __slots__ = ("code", "timeout", "deadline", "response", "_waiter", "_callback", "_on_error")

    def __init__(self, code: int, timeout: float, deadline: float, callback: ReplyCallback | None,
                 on_error: Callable[[Exception], None]) -> None:
        self.code, self.timeout, self.deadline = code, timeout, deadline
        self.response: RemotingCommand | RemotingError | None = None
        self._waiter: trio.lowlevel.Task | None = None
        self._callback = callback
        self._on_error = on_error

    def put(self, response: RemotingCommand | RemotingError) -> None:
        self.response = response
        if self._waiter is not None:
            task, self._waiter = self._waiter, None
            trio.lowlevel.reschedule(task)
        elif self._callback is not None:
            callback, self._callback = self._callback, None
            try:
                callback(response)
            except Exception as e:  # it runs where no task of its owner can catch it: hand it over
                self._on_error(e)

    async def wait(self) -> RemotingCommand | RemotingError:
        if self.response is None:
            self._waiter = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort)
        else:
            await trio.lowlevel.checkpoint()
        return self.response

    def _abort(self, _) -> trio.lowlevel.Abort:
        self._waiter = None
        return trio.lowlevel.Abort.SUCCEEDED


class RemotingClient:
    """Calls on one stream. `run()` must be running: it reads the replies and keeps the calls'
    timeouts, as NettyRemotingAbstract.scanResponseTable does — one timer for the earliest
    deadline, rather than one per call.

    An asynchronous call's callback runs where no task of its caller can catch what it raises;
    `on_callback_error` gets that exception (the lab's nodes crash with it), by default the log.

    Whoever builds it says what the stream is, as it chose the stream: `objects` and `remote_addr`
    as Connection takes them (by default a byte stream, its peer asked of its socket), and
    `call_at`, a timer function `call_at(deadline, fn)` on the run's clock where the stream's
    world has one (the simulated network's): the calls then time out by its timers, where a
    timer costs a heap entry and a cancel scope's deadline a Cancelled exception. Without it, a
    task of run()'s sleeps until the earliest deadline."""

    def __init__(self, stream: trio.abc.Stream, *, opaques: Iterator[int] | None = None,
                 on_request: Callable[[RemotingCommand], RemotingCommand | None] | None = None,
                 on_callback_error: Callable[[Exception], None] = _log_callback_error,
                 objects: bool = False, remote_addr: str | None = None,
                 call_at: Callable[[float, Callable[[], None]], None] | None = None):
        self.stream = stream
        self.connection = Connection(stream, objects=objects, remote_addr=remote_addr)
        self._opaques = opaques if opaques is not None else itertools.count()
        self._pending: dict[int, ResponseFuture] = {}
        # (deadline, opaque) per call, lazily: an entry may outlive its call or lag behind a
        # deadline moved since, and is dropped or pushed again when it comes up. A consumer keeps
        # thousands of pulls out on one connection; scanning them all for the earliest deadline,
        # at every expiry timer, was a large cluster's single biggest cost.
        self._deadlines: list[tuple[float, int]] = []
        self._on_request = on_request  # server-initiated requests (e.g. NOTIFY_CONSUMER_IDS_CHANGED)
        self._on_callback_error = on_callback_error
        # Calls time out by `call_at`'s timers when given, else by a task of run()'s asleep until
        # the earliest deadline. Never by cancelling the reader: the connection's writer runs
        # beside it, and a write cut short mid-frame would corrupt the stream.
        self._call_at = call_at
        self._expiry: trio.CancelScope | None = None
        self._expiry_deadline = -math.inf  # the earliest deadline armed; -inf: none may be (not reading)
        self.closed_reason: str | None = None
        self._now = trio.lowlevel.current_clock().current_time  # trio.current_time, in one call

    def _next_opaque(self) -> int:
        # A Java int, wrapping negative as RocketMQ's counter does; a ROCKETMQ header holds int32.
        return (next(self._opaques) + 2**31) % 2**32 - 2**31

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        if timeout <= 0:
            await trio.lowlevel.checkpoint()
            raise RemotingTimeoutError(f"no reply to request {request.code} within {timeout:g} s")
        future = self._register(request, timeout)
        try:
            await self._send(request)
            reply = await future.wait()
            if isinstance(reply, RemotingError):
                raise reply
            return reply
        finally:
            self._pending.pop(request.opaque, None)

    def invoke_async(self, request: RemotingCommand, timeout: float, callback: ReplyCallback) -> None:
        """NettyRemotingAbstract.invokeAsyncImpl: send `request` now and return; `callback` gets the
        reply, or the RemotingError that ends the call (a timeout, the connection's end), where it
        lands — in trio's loop or this client's reader, not in a task — so it must not block. The
        connection's writer sends it. RemotingError at once when the connection is already closed."""
        if self.closed_reason is not None:
            raise RemotingError(f"connection closed: {self.closed_reason}")
        self._register(request, timeout, callback)
        # A send that fails is the reader's business: the connection's end fails every pending call.
        try:
            self.connection.send_soon(request)
        except Exception as e:  # the request cannot be encoded: the caller's error, said at once
            self._pending.pop(request.opaque, None)
            raise RemotingError(f"request {request.code} cannot be encoded: {e}") from e

    def _register(self, request: RemotingCommand, timeout: float, callback: ReplyCallback | None = None,
                  sent_at: float | None = None) -> ResponseFuture:
        """Number the request and wait for its reply, due `timeout` from now (or from `sent_at`, a
        call sent before)."""
        request.opaque = self._next_opaque()
        future = self._pending[request.opaque] = ResponseFuture(
            request.code, timeout, (self._now() if sent_at is None else sent_at) + timeout, callback,
            self._on_callback_error)
        if len(self._deadlines) > 2 * len(self._pending) + 64:  # mostly answered calls: start again
            self._deadlines = [(f.deadline, opaque) for opaque, f in self._pending.items() if f.deadline != math.inf]
            heapq.heapify(self._deadlines)
        else:
            heapq.heappush(self._deadlines, (future.deadline, request.opaque))
        if future.deadline < self._expiry_deadline:
            self._arm(future.deadline)
        return future

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        request.opaque = self._next_opaque()
        request.flag |= FLAG_ONEWAY
        await self._send(request)

    async def _send(self, command: RemotingCommand) -> None:
        if self.closed_reason is not None:
            raise RemotingError(f"connection closed: {self.closed_reason}")
        try:
            await self.connection.send(command)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            raise RemotingError(f"send failed: {e}") from None

    async def run(self) -> None:
        """Read replies until the stream ends; every pending call then fails. A call whose
        deadline passes first fails with RemotingTimeoutError."""
        reason = None
        try:
            async with trio.open_nursery() as nursery:
                if self._call_at is not None:  # the given timers expire the calls
                    self._expiry_deadline = math.inf
                    self._arm(self._earliest_deadline())
                else:
                    nursery.start_soon(self._expire_at_deadlines)
                reason = await self.connection.serve(self._dispatch)
                nursery.cancel_scope.cancel()
        finally:
            self._expiry, self._expiry_deadline = None, -math.inf
            self.closed_reason = reason or "closed"
            why = f"connection closed: {self.closed_reason}"
            for future in list(self._pending.values()):
                future.put(RemotingError(why))
            self._pending.clear()
            self._deadlines.clear()
            await self.connection.aclose()

    async def _expire_at_deadlines(self) -> None:
        """Without given timers: asleep until the earliest call's deadline, then expire."""
        while True:
            deadline = self._earliest_deadline()
            with trio.CancelScope(deadline=deadline) as self._expiry:
                self._expiry_deadline = deadline
                await trio.sleep_forever()
            self._expire(trio.current_time())

    def _arm(self, deadline: float) -> None:
        """Make sure the calls are looked at by `deadline`."""
        self._expiry_deadline = deadline
        if self._call_at is None:
            self._expiry.deadline = deadline
        elif deadline < math.inf:
            self._call_at(deadline, self._on_expiry_timer)

    def _on_expiry_timer(self) -> None:
        now = self._now()
        if now < self._expiry_deadline:
            return  # a timer armed before an earlier one: that one took over
        self._expire(now)
        if self._expiry_deadline != -math.inf:  # still reading
            self._arm(self._earliest_deadline())

    def _earliest_deadline(self) -> float:
        deadlines, pending = self._deadlines, self._pending
        while deadlines:
            deadline, opaque = deadlines[0]
            future = pending.get(opaque)
            if future is not None and future.deadline == deadline:
                return deadline
            if future is None or future.deadline == math.inf:  # answered; no deadline (pushed when it gets one)
                heapq.heappop(deadlines)
            else:  # moved since
                heapq.heapreplace(deadlines, (future.deadline, opaque))
        return math.inf

    def _expire(self, now: float) -> None:
        deadlines, pending = self._deadlines, self._pending
        expired = []
        while deadlines and deadlines[0][0] <= now:
            _, opaque = heapq.heappop(deadlines)
            future = pending.get(opaque)
            if future is None:
                continue
            if future.deadline <= now:
                expired.append(opaque)
            elif future.deadline != math.inf:  # moved since (no deadline: pushed when it gets one)
                heapq.heappush(deadlines, (future.deadline, opaque))
        for opaque in sorted(expired):  # in the order they were sent
            future = pending.pop(opaque, None)
            if future is not None:  # (an earlier one's callback may have ended it)
                future.put(RemotingTimeoutError(f"no reply to request {future.code} within {future.timeout:g} s"))

    def _dispatch(self, command: RemotingCommand) -> None:
        """A reply to the call it answers; a request from the peer to on_request, whose answer,
        if it returns one, goes back on this connection (a broker forwarding mqadmin's
        GET_CONSUMER_RUNNING_INFO waits for it)."""
        if command.flag & FLAG_RESPONSE:
            future = self._pending.pop(command.opaque, None)
            if future is None:
                log.debug("reply with unknown opaque %s dropped", command.opaque)
            else:
                future.put(command)
        elif self._on_request is not None:
            reply = self._on_request(command)
            if reply is not None and not command.flag & FLAG_ONEWAY:
                self.connection.send_soon(reply)

    async def aclose(self) -> None:
        await self.connection.aclose()


@asynccontextmanager
async def open_remoting_client(stream: trio.abc.Stream, **kwargs) -> AsyncIterator[RemotingClient]:
    client = RemotingClient(stream, **kwargs)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.run)
        try:
            yield client
        finally:
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def connect(host: str, port: int, **kwargs) -> AsyncIterator[RemotingClient]:
    stream = await trio.open_tcp_stream(host, port)
    async with open_remoting_client(stream, **kwargs) as client:
        yield client


__all__ = ["RemotingClient", "RemotingError", "RemotingTimeoutError", "ResponseFuture", "connect",
           "open_remoting_client", "ProtocolError"]
