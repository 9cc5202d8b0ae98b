"""RocketMQ remoting as chaos's links see it (chaos/wire_codec.py's WireCodec): request and response
codes by name, the flags of a reply and a oneway request, frames cut from a relay's byte stream, a
request answered in the peer's stead, a route reply in the other JSON dialect. The lab gives it to
every network it builds (lab/run/networks.py)."""

from __future__ import annotations

import dataclasses
import re
import struct
from typing import NamedTuple

from nameserver.protocol import FLAG_ONEWAY, FLAG_RESPONSE, FRAME_MAX_LENGTH, RemotingCommand, RequestCode, \
    ResponseCode, SerializeType
from nameserver.protocol.frames import FrameDecoder, encode
from nameserver.protocol.headers import ProtocolError, decode_header

# The requests a NameServer serves under RouteInfoManager's read-write lock: while a `slow` request
# holds it (REGISTER_BROKER of a 10,000-topic broker, say), these wait for it, as route reads do.
ROUTE_TABLE_CODES = frozenset({
    RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER, RequestCode.GET_ROUTEINFO_BY_TOPIC,
    RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.DELETE_TOPIC_IN_NAMESRV,
    RequestCode.GET_TOPICS_BY_CLUSTER, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, RequestCode.GET_UNIT_TOPIC_LIST,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
})


_BROKER_ADDRS = re.compile(rb'"brokerAddrs":\{[^{}]*\}')
_UNQUOTED_KEY = re.compile(rb'(?<=[{,])(-?\d+):')
_QUOTED_KEY = re.compile(rb'(?<=[{,])"(-?\d+)":')


def rewrite_keys(body: bytes, keys: str) -> bytes:
    """A JSON route (or cluster) body with every brokerAddrs object's keys written `keys`."""
    if keys == "quoted":
        return _BROKER_ADDRS.sub(lambda m: _UNQUOTED_KEY.sub(rb'"\1":', m.group(0)), body)
    return _BROKER_ADDRS.sub(lambda m: _QUOTED_KEY.sub(rb"\1:", m.group(0)), body)


# --- frames on a byte stream, for the socket relays ---------------------------------------------------

_WORDS = struct.Struct(">ii")


class Frame(NamedTuple):
    """A whole remoting frame as it crossed the wire, and what its header says."""

    data: bytes
    code: int
    flag: int
    opaque: int
    serialize_type: int


class FrameCutter:
    """Bytes in, pieces out: whole frames (Frame) when asked to cut, the bytes as they came
    otherwise. It always knows where the frames begin, so it can start cutting at the next one
    whenever a fault appears, and passes bytes through unbuffered while there is none. A stream
    that is not remoting frames (a length or header that does not parse) is passed as it comes
    from then on."""

    def __init__(self):
        self._buffer = bytearray()  # while cutting: the next frame, not yet whole
        self._left = 0  # bytes of the current frame, passed uncut, still to come
        self._partial = b""  # a frame's first bytes (fewer than 8), passed uncut
        self.raw = False  # not a remoting stream: never cut

    def feed(self, data: bytes, cut: bool) -> list[Frame | bytes]:
        if self.raw:
            return [data] if data else []
        pieces: list[Frame | bytes] = []
        if self._partial:  # its length is in the bytes that went before and these
            need = 8 - len(self._partial)
            if len(data) < need:
                self._partial += data
                return [data] if data else []
            length, word = _WORDS.unpack(self._partial + data[:need])
            if not _plausible(length, word & 0xFFFFFF):
                self.raw = True
                return [data]
            self._left, self._partial = length + 4 - len(self._partial), b""
        if self._left:  # the rest of a frame begun uncut
            head, data = data[:self._left], data[self._left:]
            self._left -= len(head)
            pieces.append(head)
        if not cut and not self._buffer:
            return pieces + self._pass(data)
        buf = self._buffer
        buf += data
        while len(buf) >= 8:
            length, word = _WORDS.unpack_from(buf, 0)
            header_length = word & 0xFFFFFF
            if not _plausible(length, header_length):
                return self._give_up(pieces)
            if not cut:
                data = bytes(buf)
                buf.clear()
                return pieces + self._pass(data)
            if len(buf) < 8 + header_length:
                break
            try:
                cmd = decode_header(word >> 24, bytes(buf[8:8 + header_length]))
            except ProtocolError:
                return self._give_up(pieces)
            if len(buf) < length + 4:
                break
            pieces.append(Frame(bytes(buf[:length + 4]), cmd.code, cmd.flag, cmd.opaque, word >> 24))
            del buf[:length + 4]
        return pieces

    def _pass(self, data: bytes) -> list[bytes]:
        """`data` on as it is (it begins a frame), noting where its frames end."""
        if not data:
            return []
        pos, size = 0, len(data)
        while size - pos >= 8:
            length, word = _WORDS.unpack_from(data, pos)
            if not _plausible(length, word & 0xFFFFFF):
                self.raw = True
                return [data]
            pos += length + 4
        if pos >= size:
            self._left = pos - size
        else:
            self._partial = data[pos:]
        return [data]

    def _give_up(self, pieces: list) -> list:
        self.raw = True
        if self._buffer:
            pieces.append(bytes(self._buffer))
            self._buffer.clear()
        return pieces


def _plausible(length: int, header_length: int) -> bool:
    return 4 <= length and length + 4 <= FRAME_MAX_LENGTH and header_length <= length - 4


def _code(text: object, names: type, what: str) -> int:
    word = str(text).strip()
    if word.lstrip("-").isdigit():
        return int(word)
    try:
        return int(names[word.upper()])
    except KeyError:
        raise ValueError(f"unknown {what} code {word!r}: a number or a name such as {next(iter(names)).name}") \
            from None


def _name(code: int, names: type) -> str:
    try:
        return names(code).name
    except ValueError:
        return str(code)


class RemotingWireCodec:
    """RocketMQ 4.9.8's remoting protocol, for chaos's request faults."""

    default_answer = ResponseCode.SYSTEM_BUSY  # as a broker under load answers
    table_codes = ROUTE_TABLE_CODES

    def request_code(self, text: object) -> int:
        """A request code by RocketMQ's name (`REGISTER_BROKER`) or number (`103`)."""
        return _code(text, RequestCode, "request")

    def response_code(self, text: object) -> int:
        return _code(text, ResponseCode, "response")

    def request_name(self, code: int) -> str:
        return _name(code, RequestCode)

    def response_name(self, code: int) -> str:
        return _name(code, ResponseCode)

    def is_reply(self, flag: int) -> bool:
        return bool(flag & FLAG_RESPONSE)

    def is_oneway(self, flag: int) -> bool:
        return bool(flag & FLAG_ONEWAY)

    def answer(self, request: RemotingCommand, code: int, remark: str | None) -> RemotingCommand:
        return request.response(code, remark)

    def rewrite(self, reply: RemotingCommand, keys: str) -> RemotingCommand:
        """A reply with its JSON body in the dialect fault's form (a msgpack body has no dialect)."""
        if not reply.body or reply.serialize_type == SerializeType.MSGPACK:
            return reply
        return dataclasses.replace(reply, body=rewrite_keys(reply.body, keys))

    def cutter(self) -> FrameCutter:
        return FrameCutter()

    def answer_frame(self, request: Frame, code: int, remark: str | None) -> bytes:
        """The reply to a request, given in the peer's stead: the request's opaque and serialize type."""
        cmd = RemotingCommand(request.code, request.opaque, 0, serialize_type=request.serialize_type)
        return encode(cmd.response(code, remark))

    def rewrite_frame(self, reply: Frame, keys: str) -> bytes:
        whole = FrameDecoder().feed(reply.data)  # its header read already: it decodes
        return encode(self.rewrite(whole[0], keys)) if whole else reply.data


REMOTING = RemotingWireCodec()
