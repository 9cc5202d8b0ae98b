"""A remoting client on any trio stream: requests matched to responses by opaque, timeouts,
oneway sends. The lab's brokers and clients, the tests and the benchmarks all talk through it."""

from __future__ import annotations

import itertools
import logging
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable, Iterator

import trio

from .protocol import FrameDecoder, ProtocolError, RemotingCommand, encode
from .protocol.codes import FLAG_ONEWAY

log = logging.getLogger("nameserver.client")


class RemotingError(Exception):
    """The call could not complete: timeout, closed or broken connection, undecodable reply."""


class RemotingTimeoutError(RemotingError):
    pass


class RemotingClient:
    def __init__(self, stream: trio.abc.Stream, *, opaques: Iterator[int] | None = None,
                 on_request: Callable[[RemotingCommand], None] | None = None):
        self.stream = stream
        self._opaques = opaques if opaques is not None else itertools.count()
        self._pending: dict[int, trio.MemorySendChannel] = {}
        self._send_lock = trio.Lock()
        self._on_request = on_request  # server-initiated requests (e.g. NOTIFY_CONSUMER_IDS_CHANGED)
        self.closed_reason: str | None = None

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        request.opaque = next(self._opaques)
        send, receive = trio.open_memory_channel(1)
        self._pending[request.opaque] = send
        try:
            with trio.move_on_after(timeout) as scope:
                await self._send(request)
                reply = await receive.receive()
            if scope.cancelled_caught:
                raise RemotingTimeoutError(f"no reply to request {request.code} within {timeout:g} s")
            if isinstance(reply, RemotingError):
                raise reply
            return reply
        finally:
            self._pending.pop(request.opaque, None)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        request.opaque = next(self._opaques)
        request.flag |= FLAG_ONEWAY
        await self._send(request)

    async def _send(self, command: RemotingCommand) -> None:
        if self.closed_reason is not None:
            raise RemotingError(f"connection closed: {self.closed_reason}")
        try:
            async with self._send_lock:
                await self.stream.send_all(encode(command))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            raise RemotingError(f"send failed: {e}") from None

    async def run(self) -> None:
        """Read replies until the stream ends; every pending call then fails."""
        decoder = FrameDecoder()
        reason = "closed by peer"
        try:
            while True:
                data = await self.stream.receive_some(65536)
                if not data:
                    break
                for command in decoder.feed(data):
                    self._dispatch(command)
                if decoder.error is not None:
                    reason = f"decode error: {decoder.error}"
                    log.warning("closing connection: %s", decoder.error)
                    break
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            reason = f"connection error: {e}"
        finally:
            self.closed_reason = reason
            for send in list(self._pending.values()):
                send.send_nowait(RemotingError(f"connection closed: {reason}"))
            self._pending.clear()
            await trio.aclose_forcefully(self.stream)

    def _dispatch(self, command: RemotingCommand) -> None:
        if command.is_response:
            send = self._pending.pop(command.opaque, None)
            if send is None:
                log.debug("reply with unknown opaque %s dropped", command.opaque)
            else:
                send.send_nowait(command)
        elif self._on_request is not None:
            self._on_request(command)

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


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


__all__ = ["RemotingClient", "RemotingError", "RemotingTimeoutError", "connect",
           "open_remoting_client", "ProtocolError"]
