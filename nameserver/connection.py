"""One connection's commands, whatever carries them: the edge every server and client reads through.

A byte stream (TCP) carries frames: a reader task decodes them and writes the replies. A stream
that carries objects (the lab's simulated network, chaos/network.py — duck-typed, as nameserver
knows nothing of chaos) carries the commands themselves: no bytes are made, and each arrival is
handled where it lands, without a task waking for it. That is most of what makes a simulated run
fast; the handlers are the same plain functions either way. A command goes over as it is, not a
copy: RemotingCommand.request() and response() build it as its peer would decode it from its bytes
(tests/nameserver/test_protocol.py proves that), and once sent it is the peer's — every sender
builds a new command for each send and no one changes a command sent or received.

A peer that writes bytes on an object stream (a test poking a simulated broker with raw frames)
is decoded as on TCP and answered in bytes: a connection answers in the form it is spoken to.
"""

from __future__ import annotations

import logging
from typing import Callable

import trio

from .protocol import FRAME_MAX_LENGTH, FrameDecoder, RemotingCommand, encode

log = logging.getLogger("nameserver.connection")

RECEIVE_SIZE = 65536

# A command in, its reply out (or None: oneway, answered later, or a response to our own call).
Handler = Callable[[RemotingCommand], RemotingCommand | None]


def carries_objects(stream: trio.abc.Stream) -> bool:
    return getattr(stream, "carries_objects", False)


class Connection:
    def __init__(self, stream: trio.abc.Stream, max_frame_length: int = FRAME_MAX_LENGTH):
        self.stream = stream
        self.objects = carries_objects(stream)
        self.decoder = FrameDecoder(max_frame_length)
        self._peer_writes_bytes = not self.objects
        self._send_lock = trio.Lock()
        self.end_reason: str | None = None  # set once the connection is done for

    # --- in ---------------------------------------------------------------------------------------

    def _decode(self, data: bytes) -> list[RemotingCommand]:
        self._peer_writes_bytes = True
        commands = self.decoder.feed(data)
        if self.decoder.error is not None:
            log.warning("closing connection from %s: %s", remote_address(self.stream), self.decoder.error)
            self.end_reason = f"decode error: {self.decoder.error}"
        return commands

    async def serve(self, handle: Handler) -> str:
        """Hand every command that arrives to `handle` and send its reply, until the connection
        ends or carries something undecodable; why it ended. Cancelled, it can be called again."""
        if self.end_reason is not None:
            await trio.lowlevel.checkpoint()
            return self.end_reason
        if self.objects:
            return await self._serve_objects(handle)
        try:
            while self.end_reason is None:
                data = await self.stream.receive_some(RECEIVE_SIZE)
                if not data:
                    self.end_reason = "closed by peer"
                    break
                replies = [encode(reply) for reply in map(handle, self._decode(data)) if reply is not None]
                if replies:
                    await self._send_bytes(b"".join(replies) if len(replies) > 1 else replies[0])
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            self.end_reason = f"connection error: {e.__cause__ or e}"
        return self.end_reason

    async def _serve_objects(self, handle: Handler) -> str:
        ended = trio.Event()

        def on_object(payload) -> None:
            for command in (payload,) if type(payload) is RemotingCommand else self._decode(payload):
                reply = handle(command)
                if reply is not None:
                    try:
                        self.send_nowait(reply)
                    except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                        self.end_reason = f"connection error: {e}"
                        break
            if self.end_reason is not None:
                ended.set()

        def on_end(error: Exception | None) -> None:
            if self.end_reason is None:
                self.end_reason = "closed by peer" if error is None else f"connection error: {error}"
            ended.set()

        self.stream.set_receiver(on_object, on_end)
        await ended.wait()
        return self.end_reason

    # --- out --------------------------------------------------------------------------------------

    def send_nowait(self, command: RemotingCommand) -> None:
        """On an object stream only: queue `command` to the peer at once."""
        if self._peer_writes_bytes:
            data = encode(command)
            self.stream.send_object(data, len(data))
        else:
            self.stream.send_object(command, lambda: len(encode(command)))

    async def send(self, command: RemotingCommand) -> None:
        if self.objects:
            await trio.lowlevel.checkpoint_if_cancelled()
            self.send_nowait(command)
        else:
            await self._send_bytes(encode(command))

    async def _send_bytes(self, data: bytes) -> None:
        # Under a lock, so frames written by several tasks never interleave. A free lock is taken
        # without a schedule point: the write is the checkpoint (and the one that blocks, if any).
        lock = self._send_lock
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self.stream.send_all(data)
        finally:
            lock.release()

    def send_soon(self, command: RemotingCommand, nursery: trio.Nursery) -> None:
        """A reply sent later than its request (a held pull, a notification), from anywhere, even
        outside a task. Lost if the connection is gone meanwhile: that is the reader's business."""
        if self.objects:
            try:
                self.send_nowait(command)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        else:
            nursery.start_soon(self._send_quietly, command)

    async def _send_quietly(self, command: RemotingCommand) -> None:
        try:
            await self.send(command)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


def remote_address(stream: trio.abc.Stream) -> str:
    sock = getattr(stream, "socket", None)
    if sock is not None:
        try:
            host, port = sock.getpeername()[:2]
            return f"{host}:{port}"
        except OSError:
            return "?"
    return str(getattr(stream, "remote_addr", "?"))
