"""A raw RocketMQ client for tests over real sockets: whole frames in and out, and an abrupt exit."""

import socket
import struct

import trio

from nameserver.protocol import FrameDecoder, RemotingCommand, encode


class Raw:
    """A client dialled straight at a node's port, reading whole frames as it goes."""

    def __init__(self, stream: trio.SocketStream):
        self.stream = stream
        self.decoder = FrameDecoder()
        self.arrived: list[RemotingCommand] = []

    @classmethod
    async def dial(cls, address: str) -> "Raw":
        host, _, port = address.rpartition(":")
        return cls(await trio.open_tcp_stream(host, int(port)))

    async def send(self, command: RemotingCommand) -> None:
        await self.stream.send_all(encode(command))

    async def frame(self) -> RemotingCommand:
        while not self.arrived:
            data = await self.stream.receive_some(65536)
            assert data, "connection closed"
            self.arrived += self.decoder.feed(data)
        return self.arrived.pop(0)

    async def reset(self) -> None:
        """Leave abruptly: the kernel sends an RST, as for a process killed mid-conversation."""
        self.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await self.stream.aclose()
