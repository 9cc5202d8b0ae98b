"""RocketMQ remoting protocol, sans-I/O: frames, headers, codes and fastjson's JSON dialect."""

import zlib

from .codes import (
    CURRENT_VERSION, FLAG_ONEWAY, FLAG_RESPONSE, LANGUAGES, RequestCode, ResponseCode, SerializeType,
)
from .command import HeaderError, RemotingCommand
from .frames import FRAME_MAX_LENGTH, FrameDecoder, encode
from .headers import ProtocolError


def crc32(data: bytes) -> int:
    """UtilAll.crc32: CRC-32 masked to a non-negative Java int."""
    return zlib.crc32(data) & 0x7FFFFFFF


__all__ = [
    "CURRENT_VERSION", "FLAG_ONEWAY", "FLAG_RESPONSE", "FRAME_MAX_LENGTH", "FrameDecoder",
    "HeaderError", "LANGUAGES", "ProtocolError", "RemotingCommand", "RequestCode", "ResponseCode",
    "SerializeType", "crc32", "encode",
]
