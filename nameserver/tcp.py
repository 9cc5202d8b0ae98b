"""A lean trio Stream over an accepted TCP socket, for the NameServer's hot path.

trio.SocketStream is general: its send_all and receive_some go through a trio socket object, a
conflict detector, a memoryview and context managers, and each of them ends in a schedule point
(a trip through the run loop). A client that waits for each reply before sending its next request
thus cost the server two reschedules per request, one in receive_some and one in send_all after
the reply was already in the kernel (benchmarks/bench_route_queries.py, closed loop).

RawSocketStream calls the non-blocking stdlib socket directly and parks on trio's epoll only
when the kernel says EAGAIN. Checkpoints:

  receive_some  a full checkpoint (cancel point and schedule point) first, then recv. Yielding
                before rather than after the read means that on a busy server the next request
                has usually arrived by the time this task runs again, so recv takes it without
                an EAGAIN and an epoll round trip. A connection's task therefore yields once per
                read, which keeps every other task running however fast its peer sends.
  send_all      a cancel point; a schedule point only when the kernel buffer is full and it has
                to wait. The connection loop alternates reads and writes, so the read's schedule
                point is enough, and a reply that fits in the socket buffer (the common case)
                costs no reschedule. A task that only ever sends would need its own checkpoints.

Errors read as trio's do: OSError becomes BrokenResourceError (with the OSError as __cause__), or
ClosedResourceError for a socket this end closed; the peer's EOF is b"".

One task per direction at a time, as in the NameServer (no conflict detection).

accept_forever is every accept loop's (NameServer, broker, the lab's link relays): it keeps
accepting through the errors that say the process or system is out of descriptors or memory, as
Netty does, with one log line per 10 s however long that lasts.
"""

from __future__ import annotations

import errno
import logging
import math
import socket
from typing import Callable, NoReturn

import trio
from trio.lowlevel import (
    checkpoint, checkpoint_if_cancelled, notify_closing, wait_readable, wait_writable,
)

DEFAULT_RECEIVE_SIZE = 65536

# accept() errors that say nothing about the listener: out of descriptors (the process's, the
# system's), out of kernel memory, or a connection that died in the backlog. The connection waits
# in the backlog meanwhile; trio's SocketListener retries ECONNABORTED itself and raises the others.
ACCEPT_RETRY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED})
ACCEPT_RETRY_DELAY = 0.1  # a full process gets descriptors back only when connections close: no spin meanwhile
ACCEPT_LOG_INTERVAL = 10.0
_CLOSED_ERRNOS = {errno.EBADF, errno.ENOTSOCK}  # trio's: this end closed the socket


def _raise_stream_error(exc: OSError) -> NoReturn:
    """Raise what trio.SocketStream raises for this socket error."""
    if exc.errno in _CLOSED_ERRNOS:
        raise trio.ClosedResourceError("this socket was already closed") from None
    raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc


class RawSocketStream(trio.abc.Stream):
    """A trio Stream over a connected, non-blocking stdlib socket it owns."""

    def __init__(self, sock: socket.socket):
        sock.setblocking(False)
        self.socket = sock

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if max_bytes is None:
            max_bytes = DEFAULT_RECEIVE_SIZE
        if max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        await checkpoint()  # first: see the module docstring
        while True:
            try:
                return self.socket.recv(max_bytes)
            except BlockingIOError:
                pass
            except OSError as exc:
                _raise_stream_error(exc)
            await wait_readable(self.socket)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await checkpoint_if_cancelled()
        sock = self.socket
        try:
            sent = sock.send(data) if data else 0
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            _raise_stream_error(exc)
        if sent == len(data):
            if not data:  # as trio: a checkpoint, and an error once closed
                if sock.fileno() == -1:
                    raise trio.ClosedResourceError("socket was already closed")
                await checkpoint()
            return
        with memoryview(data) as view:  # the kernel buffer is full: send the rest as it drains
            while sent < len(view):
                await wait_writable(sock)
                try:
                    sent += sock.send(view[sent:])
                except BlockingIOError:
                    pass
                except OSError as exc:
                    _raise_stream_error(exc)

    async def wait_send_all_might_not_block(self) -> None:
        if self.socket.fileno() == -1:
            raise trio.ClosedResourceError
        await wait_writable(self.socket)

    async def aclose(self) -> None:
        if self.socket.fileno() != -1:
            notify_closing(self.socket)  # wakes any task parked on it, and forgets its epoll entry
            self.socket.close()
        await checkpoint()


class RawSocketListener(trio.abc.Listener[RawSocketStream]):
    """Wraps a trio.SocketListener: trio accepts (and sets TCP_NODELAY), RawSocketStream serves."""

    def __init__(self, listener: trio.SocketListener):
        self.listener = listener
        self.socket = listener.socket

    async def accept(self) -> RawSocketStream:
        stream = await self.listener.accept()
        return RawSocketStream(socket.socket(fileno=stream.socket.detach()))

    async def aclose(self) -> None:
        await self.listener.aclose()


class AcceptFailures:
    """Which accept errors to log: the first at once, then at most one per `interval`, saying how
    many went unlogged since. One per process role (a NameServer, a broker, the relays), so a flood
    that lasts writes a bounded log whatever the number of listeners."""

    def __init__(self, interval: float = ACCEPT_LOG_INTERVAL):
        self.interval = interval
        self.unlogged = 0
        self._next = -math.inf

    def line(self, now: float, error: OSError, where: str) -> str | None:
        """The line to log for `error` at `now`, or None when it is one to count only."""
        if now < self._next:
            self.unlogged += 1
            return None
        self._next = now + self.interval
        line = f"{where}: accept failed: {error}; retrying every {ACCEPT_RETRY_DELAY:g} s"
        if self.unlogged:
            line += f" ({self.unlogged} more failures since the last line)"
        self.unlogged = 0
        return line


async def accept_forever(listener: trio.abc.Listener, serve: Callable[[trio.abc.Stream], object],
                         logger: logging.Logger, where: str, failures: AcceptFailures | None = None) -> None:
    """Hand every connection `listener` accepts to `serve` (which starts its task), for ever.
    Errors of ACCEPT_RETRY_ERRNOS are logged as `failures` allows and retried after a pause;
    anything else, ClosedResourceError included, is the caller's."""
    failures = failures or AcceptFailures()
    while True:
        try:
            stream = await listener.accept()
        except OSError as e:
            if e.errno not in ACCEPT_RETRY_ERRNOS:
                raise
            line = failures.line(trio.current_time(), e, where)
            if line is not None:
                logger.error(line)
            await trio.sleep(ACCEPT_RETRY_DELAY)
            continue
        serve(stream)
