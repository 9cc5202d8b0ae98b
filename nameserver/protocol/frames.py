"""Remoting frames on a byte stream: a sans-I/O incremental decoder and an encoder.

    int32 length | int32 (serializeType << 24 | headerLength) | header | body
    length = 4 + headerLength + bodyLength   (the length field itself not counted)
"""

from __future__ import annotations

import struct

from .command import RemotingCommand
from .headers import ProtocolError, decode_header, encode_header

# Netty's LengthFieldBasedFrameDecoder limit: the whole frame, length prefix included.
FRAME_MAX_LENGTH = 16 * 1024 * 1024

_PREFIX = struct.Struct(">ii")


def encode(cmd: RemotingCommand) -> bytes:
    header = encode_header(cmd)
    if len(header) > 0xFFFFFF:
        raise ProtocolError(f"header of {len(header)} bytes does not fit 24 bits")
    body = cmd.body or b""
    prefix = _PREFIX.pack(4 + len(header) + len(body), (int(cmd.serialize_type) << 24) | len(header))
    return b"".join((prefix, header, body))


class FrameDecoder:
    """Bytes in, commands out, for any split of the stream.

    After a malformed frame, `error` is set and the decoder returns nothing more: the stream cannot
    be resynchronised, so the connection must be closed. Frames complete before the bad one are
    still returned, as Netty would have dispatched them.
    """

    def __init__(self, max_frame_length: int = FRAME_MAX_LENGTH):
        self.max_frame_length = max_frame_length
        self.error: ProtocolError | None = None
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        if self.error is not None:
            return []
        buf = self._buffer
        buf += data
        commands: list[RemotingCommand] = []
        pos = 0
        # Header and body are copied once each, out of a view of the buffer: bytes(buf[a:b]) would
        # copy twice (slice, then bytes), ~0.3 ms more for a 1.5 MB REGISTER_BROKER body. The view
        # must be released before the buffer is resized.
        try:
            with memoryview(buf) as view:
                while len(buf) - pos >= 4:
                    (length,) = struct.unpack_from(">i", buf, pos)
                    if length < 4:
                        raise ProtocolError(f"bad frame length {length}")
                    if length + 4 > self.max_frame_length:
                        raise ProtocolError(
                            f"frame of {length + 4} bytes exceeds the limit of {self.max_frame_length}")
                    if len(buf) - pos - 4 < length:
                        break
                    (word,) = struct.unpack_from(">I", buf, pos + 4)
                    serialize_type, header_length = word >> 24, word & 0xFFFFFF
                    if header_length > length - 4:
                        raise ProtocolError(f"bad header length {header_length} in a frame of {length}")
                    start = pos + 8
                    cmd = decode_header(serialize_type, bytes(view[start:start + header_length]))
                    body_start, end = start + header_length, pos + 4 + length
                    cmd.body = bytes(view[body_start:end]) if end > body_start else None
                    commands.append(cmd)
                    pos = end
        except ProtocolError as e:
            self.error = e
            buf.clear()
            return commands
        del buf[:pos]
        return commands
