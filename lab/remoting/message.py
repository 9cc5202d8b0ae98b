"""The message model and RocketMQ's byte formats for it (MessageDecoder, CommitLog): pure functions.

- The commit-log record: what a broker stores and what PULL_MESSAGE returns, back to back.
- The batch body of SEND_BATCH_MESSAGE: one short record per message.
- Properties: `name\\u0001value\\u0002name\\u0001value`.
- The offset msgId: store host + commit-log offset as 32 upper-case hex digits.

Hosts are IPv4 `ip:port` strings. A host that is not one (a simulated peer is known by its node
name) is written as 0.0.0.0:0; IPv6 hosts are not supported, which the C++ client cannot read either.
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from nameserver.protocol import crc32

MESSAGE_MAGIC_CODE = 0xDAA320A7
NAME_VALUE_SEPARATOR = "\u0001"
PROPERTY_SEPARATOR = "\u0002"
TOPIC_MAX_LENGTH = 127  # the topic length is one signed byte in the V1 record

# MessageSysFlag bits that change the record's layout
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20

# TOTALSIZE MAGICCODE BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
# BORNHOST(ip, port) STORETIMESTAMP STOREHOST(ip, port) RECONSUMETIMES PREPAREDTRANSACTIONOFFSET
_HEAD = struct.Struct(">iIiiiqqiq4siq4siiq")
# + BODYLEN(4) + TOPICLEN(1) + PROPERTIESLEN(2): 91 bytes around body, topic and properties.
RECORD_OVERHEAD = _HEAD.size + 4 + 1 + 2
# SEND_BATCH_MESSAGE entry: TOTALSIZE MAGICCODE(0) BODYCRC(0) FLAG BODYLEN
_BATCH_HEAD = struct.Struct(">iiiii")
_BODY_LEN = struct.Struct(">i")
_PROPS_LEN = struct.Struct(">h")


class MessageFormatError(ValueError):
    """Bytes that are not the record format they should be."""


@dataclass(slots=True)
class MessageExt:
    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0  # ms
    born_host: str = "0.0.0.0:0"
    store_timestamp: int = 0  # ms
    store_host: str = "0.0.0.0:0"
    queue_offset: int = 0  # logical, within (topic, queue_id)
    commit_log_offset: int = 0  # physical, within the broker's commit log
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


# --- properties ---------------------------------------------------------------------------------------

def encode_properties(properties: dict[str, str]) -> str:
    """messageProperties2String: no trailing separator, as 4.9.8 writes it."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in properties.items())


def decode_properties(text: str) -> dict[str, str]:
    """string2messageProperties; tolerates the trailing separator the C++ client sends."""
    properties = {}
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep:
            properties[name] = value
    return properties


# --- hosts and ids ------------------------------------------------------------------------------------

# A run knows a handful of hosts and meets them in every record: parse each once.
@functools.lru_cache(maxsize=1024)
def _pack_host(host: str) -> tuple[bytes, int]:
    ip, _, port = host.rpartition(":")
    try:
        return ipaddress.IPv4Address(ip).packed, int(port)
    except ValueError:
        return bytes(4), 0


@functools.lru_cache(maxsize=1024)
def _unpack_host(ip: bytes, port: int) -> str:
    return f"{ipaddress.IPv4Address(ip)}:{port}"


def offset_msg_id(store_host: str, commit_log_offset: int) -> str:
    """MessageDecoder.createMessageId: the 'offsetMsgId' a send reply carries as msgId."""
    ip, port = _pack_host(store_host)
    return struct.pack(">4siq", ip, port, commit_log_offset).hex().upper()


# --- commit-log records -------------------------------------------------------------------------------

def record_size(body: bytes, topic: str, properties: str) -> int:
    """CommitLog.calMsgLength with IPv4 hosts."""
    return RECORD_OVERHEAD + len(body) + len(topic.encode()) + len(properties.encode())


def encode_message(msg: MessageExt) -> bytes:
    topic = msg.topic.encode()
    properties = encode_properties(msg.properties).encode()
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MessageFormatError(f"topic of {len(topic)} bytes exceeds {TOPIC_MAX_LENGTH}")
    if len(properties) > 0x7FFF:
        raise MessageFormatError(f"properties of {len(properties)} bytes exceed 32767")
    born_ip, born_port = _pack_host(msg.born_host)
    store_ip, store_port = _pack_host(msg.store_host)
    size = RECORD_OVERHEAD + len(msg.body) + len(topic) + len(properties)
    head = _HEAD.pack(
        size, MESSAGE_MAGIC_CODE, crc32(msg.body), msg.queue_id, msg.flag, msg.queue_offset,
        msg.commit_log_offset, msg.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG),
        msg.born_timestamp, born_ip, born_port, msg.store_timestamp, store_ip, store_port,
        msg.reconsume_times, msg.prepared_transaction_offset)
    return b"".join((head, struct.pack(">i", len(msg.body)), msg.body,
                     struct.pack(">B", len(topic)), topic, struct.pack(">h", len(properties)), properties))


def decode_messages(data: bytes) -> list[MessageExt]:
    """Every record of a concatenation (a pull body, a stretch of commit log)."""
    return _read_records(data, _decode_one)


def _read_records(data: bytes, read_one) -> list:
    """read_one(data, pos) -> (what it read, where the record ends) over every record of `data`;
    a record cut short or garbled is a MessageFormatError naming its position."""
    records, pos = [], 0
    try:
        while pos < len(data):
            record, pos = read_one(data, pos)  # pos stays the failing record's if read_one raises
            records.append(record)
    except (struct.error, UnicodeDecodeError, IndexError) as e:
        raise MessageFormatError(f"truncated or garbled record at byte {pos}: {e}") from None
    return records


class RecordIndex(NamedTuple):
    """A stored record and what a store indexes it by, read without decoding the message."""
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_timestamp: int  # ms
    data: bytes  # the record's own bytes


def index_records(data: bytes) -> list[RecordIndex]:
    """decode_messages for a replica: every record's framing checked the same way, but only what a
    commit log and its consume queues need is read (a slave copies records; it never reads them)."""
    return _read_records(data, _index_one)


def _index_one(data: bytes, pos: int) -> tuple[RecordIndex, int]:
    head, end, _body, _props_at, topic = _frame(data, pos)
    return RecordIndex(topic, head[3], head[5], head[6], head[11], data[pos:end]), end


def _frame(data: bytes, pos: int) -> tuple[tuple, int, slice, int, str]:
    """The record at `pos`, its framing checked: the head's fields, where the record ends, where
    its body lies, where its properties start, and its topic."""
    head = _HEAD.unpack_from(data, pos)
    size, magic, sys_flag = head[0], head[1], head[7]
    if magic != MESSAGE_MAGIC_CODE:
        raise MessageFormatError(f"bad magic code {magic:#x} at byte {pos}")
    if sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG):
        raise MessageFormatError("IPv6 hosts are not supported")
    end = pos + size
    if size < RECORD_OVERHEAD or end > len(data):
        raise MessageFormatError(f"bad record size {size} at byte {pos}")
    body_at = pos + _HEAD.size + 4
    (body_len,) = _BODY_LEN.unpack_from(data, body_at - 4)
    p = body_at + body_len
    topic_len = data[p]
    props_at = p + 1 + topic_len + 2
    (props_len,) = _PROPS_LEN.unpack_from(data, props_at - 2)
    if body_len < 0 or props_at + props_len != end:
        raise MessageFormatError(f"record at byte {pos} does not add up to its size {size}")
    return head, end, slice(body_at, p), props_at, data[p + 1:props_at - 2].decode()


def _decode_one(data: bytes, pos: int) -> tuple[MessageExt, int]:
    head, end, body, props_at, topic = _frame(data, pos)
    (_size, _magic, _crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born_ip,
     born_port, store_ts, store_ip, store_port, reconsume_times, prepared_offset) = head
    # Positional, in the fields' order: a keyword dataclass __init__ costs twice as much per record.
    msg = MessageExt(
        topic, bytes(data[body]), queue_id, flag,
        decode_properties(data[props_at:end].decode()), sys_flag, born_ts, _unpack_host(born_ip, born_port),
        store_ts, _unpack_host(store_ip, store_port), queue_offset, physical_offset, reconsume_times,
        prepared_offset)
    return msg, end


# --- SEND_BATCH_MESSAGE bodies ----------------------------------------------------------------------

def encode_batch(messages: list[tuple[int, bytes, dict[str, str]]]) -> bytes:
    """MessageDecoder.encodeMessages: (flag, body, properties) each."""
    parts = []
    for flag, body, properties in messages:
        props = encode_properties(properties).encode()
        size = _BATCH_HEAD.size + len(body) + 2 + len(props)
        parts += [_BATCH_HEAD.pack(size, 0, 0, flag, len(body)), body, struct.pack(">h", len(props)), props]
    return b"".join(parts)


def decode_batch(data: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    messages, pos = [], 0
    try:
        while pos < len(data):
            size, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(data, pos)
            p = pos + _BATCH_HEAD.size
            body = data[p:p + body_len]
            (props_len,) = struct.unpack_from(">h", data, p + body_len)
            props = data[p + body_len + 2:p + body_len + 2 + props_len].decode()
            if size != _BATCH_HEAD.size + body_len + 2 + props_len or pos + size > len(data):
                raise MessageFormatError(f"bad batch entry size {size} at byte {pos}")
            messages.append((flag, bytes(body), decode_properties(props)))
            pos += size
    except (struct.error, UnicodeDecodeError) as e:
        raise MessageFormatError(f"truncated or garbled batch entry at byte {pos}: {e}") from None
    return messages
