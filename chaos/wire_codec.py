"""What chaos needs to know of the protocol its links carry, and nothing more.

chaos knows no protocol: a request fault acts on "the requests of one code", and the network cuts
byte streams into frames, answers a request in the peer's stead or rewrites a reply. Whoever builds
the network passes a WireCodec that does those things for its protocol (the lab passes RocketMQ's
remoting: lab/remoting/wire_codec.py). Commands (what a simulated link carries as objects) and
frames (what a relay cuts from bytes) both show `code`, `flag` and `opaque`.
"""

from __future__ import annotations

from typing import Protocol


class Frame(Protocol):
    """One whole frame cut from a byte stream, as it crossed the wire."""

    data: bytes
    code: int
    flag: int
    opaque: int


class FrameCutter(Protocol):
    def feed(self, data: bytes, cut: bool) -> list[Frame | bytes]:
        """Bytes in, pieces out: whole frames when asked to cut, the bytes as they came otherwise
        (they must still track where frames begin, to start cutting at the next one)."""


class WireCodec(Protocol):
    default_answer: int  # the response code an `answer` fault gives unless told another
    table_codes: frozenset[int]  # requests that wait behind a `slow` one (one table lock on the peer)

    def request_code(self, text: str) -> int: ...  # by name or number; ValueError saying what it takes
    def response_code(self, text: str) -> int: ...
    def request_name(self, code: int) -> str: ...
    def response_name(self, code: int) -> str: ...
    def is_reply(self, flag: int) -> bool: ...
    def is_oneway(self, flag: int) -> bool: ...

    # A simulated link's commands
    def answer(self, request, code: int, remark: str | None) -> object: ...
    def rewrite(self, reply, keys: str) -> object: ...  # a dialect fault's reply

    # A relay's byte streams
    def cutter(self) -> FrameCutter: ...
    def answer_frame(self, request: Frame, code: int, remark: str | None) -> bytes: ...
    def rewrite_frame(self, reply: Frame, keys: str) -> bytes: ...
