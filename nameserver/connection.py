"""One connection's commands, whatever carries them: the edge every server and client reads through.

A byte stream (TCP) carries frames: a reader task decodes them and writes the replies. A stream
that carries objects carries the commands themselves: no bytes are made, and each arrival is
handled where it lands, without a task waking for it (the stream offers `set_receiver` and
`send_object`; the lab's simulated network, chaos/network.py, is one). Whoever builds the
connection says which it is (`objects`), as it chose the stream. The handlers are the same plain
functions either way. A command goes over as it is, not a copy: RemotingCommand.request() and
response() build it as its peer would decode it from its bytes (tests/nameserver/test_protocol.py
proves that), and once sent it is the peer's — every sender builds a new command for each send and
no one changes a command sent or received.

A peer that writes bytes on an object stream (a test poking a simulated broker with raw frames)
is decoded as on TCP and answered in bytes: a connection answers in the form it is spoken to.

A connection owns its outbound path, as a Netty channel does. A reply sent later than its request
(a held pull, a notification, an asynchronous call) is queued with `send_soon` from anywhere, and
the connection's own writer task, which runs while it serves, writes the queue in order. Once the
connection has ended, `send_soon` drops what it is given, quietly: Netty's write to an inactive
channel. Nothing sent later ever raises at its sender, so one peer's death cannot fail the request
of another that happened to cause the send.

A reply that cannot be encoded (a lone surrogate is fine: it goes out as "?", as Java's
String.getBytes writes it; a field too large for a ROCKETMQ header is not) is answered with
SYSTEM_ERROR instead; a handler that raises is a bug of the server's: serve() returns with the
reason, and the caller closes this one connection.

A server closes a connection idle for its serverChannelMaxIdleTimeSeconds (close_idle_channels,
one task for all of them; the NameServer's and the broker's, as both run 4.9.8's
NettyRemotingServer). Idle means no whole request read: bytes of a frame that never completes do
not count, so a half frame or a frame fed a byte a second is dropped as a silent connection is.
Netty's all-idle counts any byte, but every RocketMQ request has a caller's timeout of seconds (3 s
a send, 6 s a registration, a pull's suspend time), so a frame still incomplete after the idle
time has no one waiting for its answer; what it buffered (what arrived, never the length it
announced) goes with the connection.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable, Container, Iterable

import trio

from .protocol import FRAME_MAX_LENGTH, FrameDecoder, RemotingCommand, ResponseCode, encode

log = logging.getLogger("nameserver.connection")

RECEIVE_SIZE = 65536
IDLE_CHECK_INTERVAL = 1.0  # how often an idle-close task with the idle time 0 (off) looks again

# A command in, its reply out (or None: oneway, answered later, or a response to our own call).
Handler = Callable[[RemotingCommand], RemotingCommand | None]


class Connection:
    def __init__(self, stream: trio.abc.Stream, max_frame_length: int = FRAME_MAX_LENGTH, *,
                 objects: bool = False, remote_addr: str | None = None):
        """`objects`: whether `stream` carries commands whole (see the module's doc); a byte
        stream unless the builder says so. `remote_addr`: the peer, for logs and channels, where
        the stream has no socket to ask (remote_address)."""
        self.stream = stream
        self.objects = objects
        self.remote_addr = remote_address(stream) if remote_addr is None else remote_addr
        self.decoder = FrameDecoder(max_frame_length)
        self._peer_writes_bytes = not self.objects
        self._send_lock = trio.Lock()
        self._outbox: list[bytes] = []  # frames queued by send_soon, for the writer
        self._writer: trio.lowlevel.Task | None = None  # the writer, parked while the outbox is empty
        self.end_reason: str | None = None  # set once the connection is done for
        self.handler_error: Exception | None = None  # what the handler raised, if that ended it

    # --- in ---------------------------------------------------------------------------------------

    def _decode(self, data: bytes) -> list[RemotingCommand]:
        self._peer_writes_bytes = True
        commands = self.decoder.feed(data)
        if self.decoder.error is not None:
            log.warning("closing connection from %s: %s", self.remote_addr, self.decoder.error)
            self._end(f"decode error: {self.decoder.error}")
        return commands

    def _end(self, reason: str) -> None:
        if self.end_reason is None:
            self.end_reason = reason
        self._outbox.clear()  # nobody reads it now

    async def serve(self, handle: Handler) -> str:
        """Hand every command that arrives to `handle` and send its reply, until the connection
        ends or carries something undecodable; why it ended. Replies queued by `send_soon` are
        written meanwhile. A handler that raises ends the connection, with the error as the reason."""
        if self.end_reason is not None:
            await trio.lowlevel.checkpoint()
            return self.end_reason
        try:
            if self.objects:
                await self._serve_objects(handle)
            else:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write_outbox)
                    await self._serve_bytes(handle)
                    nursery.cancel_scope.cancel()
        finally:
            self._end("closed")
        return self.end_reason

    def _handler_failed(self, error: Exception) -> None:
        """The handler's bug: it costs this connection, and says why."""
        self.handler_error = error
        log.error("closing connection from %s: handling a request failed", self.remote_addr,
                  exc_info=error)
        self._end(f"internal error: {type(error).__name__}: {error}")

    async def _serve_bytes(self, handle: Handler) -> None:
        try:
            while self.end_reason is None:
                data = await self.stream.receive_some(RECEIVE_SIZE)
                if not data:
                    self._end("closed by peer")
                    break
                replies = [encode_reply(reply) for reply in map(handle, self._decode(data)) if reply is not None]
                if replies:
                    await self._send_bytes(b"".join(replies) if len(replies) > 1 else replies[0])
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            self._end(f"connection error: {e.__cause__ or e}")
        except Exception as e:
            self._handler_failed(e)

    async def _serve_objects(self, handle: Handler) -> None:
        ended = trio.Event()
        failure: list[Exception] = []

        def on_object(payload) -> None:
            if failure:
                return  # serve() is about to report it and end
            try:
                for command in (payload,) if type(payload) is RemotingCommand else self._decode(payload):
                    reply = handle(command)
                    if reply is not None:
                        self.send_soon(reply)
            except Exception as e:  # raised in the network's callback: serve() reports it
                failure.append(e)
            if failure or self.end_reason is not None:
                ended.set()

        def on_end(error: Exception | None) -> None:
            self._end("closed by peer" if error is None else f"connection error: {error}")
            ended.set()

        self.stream.set_receiver(on_object, on_end)
        await ended.wait()
        if failure:
            self._handler_failed(failure[0])

    # --- out --------------------------------------------------------------------------------------

    def send_nowait(self, command: RemotingCommand) -> None:
        """On an object stream only: queue `command` to the peer at once."""
        if self._peer_writes_bytes:
            data = encode_reply(command)
            self.stream.send_object(data, len(data))
        else:
            self.stream.send_object(command, wire_size)

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

    def send_soon(self, command: RemotingCommand) -> None:
        """Send `command` later than its request (a held pull, a notification, an asynchronous
        call), from anywhere, even outside a task. Dropped once the connection has ended: a
        connection that is gone is the reader's business, not the sender's. Raises only for a
        request that cannot be encoded (see encode_reply)."""
        if self.end_reason is not None:
            return
        if self.objects:
            try:
                self.send_nowait(command)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                self._end(f"connection error: {e}")
            return
        self._outbox.append(encode_reply(command))
        writer, self._writer = self._writer, None
        if writer is not None:
            trio.lowlevel.reschedule(writer)

    async def _write_outbox(self) -> None:
        """The writer: what send_soon queued, in order, while the connection serves."""
        while True:
            if not self._outbox:
                self._writer = trio.lowlevel.current_task()

                def abort(_) -> trio.lowlevel.Abort:
                    self._writer = None
                    return trio.lowlevel.Abort.SUCCEEDED

                await trio.lowlevel.wait_task_rescheduled(abort)
                continue
            data = b"".join(self._outbox)
            self._outbox.clear()
            try:
                await self._send_bytes(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                self._end(f"connection error: {e.__cause__ or e}")
                return

    async def aclose(self) -> None:
        self._end("closed")
        await trio.aclose_forcefully(self.stream)


def wire_size(command: RemotingCommand) -> int:
    """A command's size on the wire, for a simulated link that must know it (a bandwidth toxic)."""
    return len(encode_reply(command))


def encode_reply(command: RemotingCommand) -> bytes:
    """encode(command); a reply that cannot be encoded becomes SYSTEM_ERROR with the reason (one that
    echoes a hostile request, say), so a peer's odd request costs it one answer. A request that
    cannot be encoded is its sender's error: it raises."""
    try:
        return encode(command)
    except Exception as e:
        if not command.is_response:
            raise
        log.warning("a reply (code %s, opaque %s) cannot be encoded: %s", command.code, command.opaque, e)
        return encode(RemotingCommand(ResponseCode.SYSTEM_ERROR, _int32(command.opaque), command.flag,
                                      None, f"reply cannot be encoded: {type(e).__name__}",
                                      None, serialize_type=command.serialize_type))


def _int32(value: object) -> int:
    return value if type(value) is int and -2**31 <= value < 2**31 else 0


def remote_address(stream: trio.abc.Stream) -> str:
    """host:port of a socket stream's peer (trio's and nameserver.tcp's streams, and wrappers of
    them, have `socket`); "?" when it cannot tell."""
    sock = getattr(stream, "socket", None)
    if sock is not None:
        try:
            host, port = sock.getpeername()[:2]
            return f"{host}:{port}"
        except OSError:
            return "?"
    return "?"


# --- idle connections ---------------------------------------------------------------------------------

def idle_channels(channels: Iterable, idle: float, now: float, spared: Container = ()) -> tuple[list, float]:
    """The channels (each with `last_activity`, the time of its last request read) idle for `idle`
    seconds at `now`, but for those `spared`, and when the next of the others may be: now + idle at
    the latest, which also covers a channel opened after this look."""
    expired, wake = [], now + idle
    for channel in channels:
        expiry = channel.last_activity + idle
        if expiry <= now:
            if channel not in spared:
                expired.append(channel)
        elif expiry < wake:
            wake = expiry
    return expired, wake


async def close_idle_channels(channels: Iterable, idle_time: Callable[[], float],
                              sleep_until: Callable[[float], Awaitable[None]], *,
                              spared: Callable[[], Container] | None = None) -> None:
    """Close (`channel.close(reason)`) each of `channels` idle for idle_time() seconds, as Netty's
    IdleStateHandler does for RocketMQ; an idle time of 0 turns it off (looked at again every
    second). `spared()`, if given, the channels another rule closes (a broker's registered clients).

    One task for all connections, because re-arming a per-connection cancel-scope deadline on every
    read went through trio's deadline heap each time, ~8% of the NameServer's CPU in the
    route-query benchmark; a read only stamps channel.last_activity. This task sleeps until the
    earliest expiry: reads only move expiries later."""
    while True:
        idle = idle_time()
        now = trio.current_time()
        if idle > 0:
            expired, wake = idle_channels(list(channels), idle, now, spared() if spared is not None else ())
            for channel in expired:
                channel.close(f"idle for {idle:g} s")
        else:
            wake = now + IDLE_CHECK_INTERVAL
        await sleep_until(wake)
