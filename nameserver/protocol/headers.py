"""The three header serialisations: JSON (fastjson's), ROCKETMQ (binary) and MSGPACK (nslab's)."""

from __future__ import annotations

import json
import struct

import msgpack

from .codes import LANGUAGE_CODE, LANGUAGES, SerializeType
from .command import RemotingCommand, stringify


class ProtocolError(Exception):
    """The byte stream cannot be decoded; the connection it came from must be closed."""


# --- encoding -----------------------------------------------------------------------------------

def encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == SerializeType.JSON:
        return _encode_json(cmd)
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return _encode_rocketmq(cmd)
    if cmd.serialize_type == SerializeType.MSGPACK:
        return msgpack.packb(_header_map(cmd), unicode_errors=UTF8_AS_JAVA)
    raise ProtocolError(f"unknown serialize type {cmd.serialize_type}")


def _header_map(cmd: RemotingCommand) -> dict:
    header: dict = {"code": cmd.code}
    if cmd.ext_fields is not None:
        header["extFields"] = cmd.ext_fields
    header["flag"] = cmd.flag
    header["language"] = cmd.language
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["version"] = cmd.version
    return header


# Strings go out as Java's String.getBytes(UTF-8) writes them: a lone surrogate (a JSON request
# may carry one as "\ud800") becomes "?". Python would refuse to encode it at all.
UTF8_AS_JAVA = "replace"

# fastjson's defaults: keys in alphabetical order, nulls omitted, UTF-8 as is, no spaces. Built
# once: json.dumps with these arguments builds a new JSONEncoder on every call, ~2 us of the ~6 us
# a reply header costs (benchmarks/bench_route_queries.py). The encoder holds no per-call state.
_JSON_HEADER_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _encode_json(cmd: RemotingCommand) -> bytes:
    if cmd.ext_fields is None and cmd.remark is None and type(cmd.opaque) is int:
        # A header with neither extFields nor remark (every found route's reply) is the same
        # bytes as the last one of its code, flag, language and version but for the opaque:
        # the encoder's output is kept as the bytes around it. ~0.5 us instead of ~4 us. The
        # types are part of the key: 1, True and 1.0 are equal keys but encode differently.
        shape = (cmd.code, cmd.flag, cmd.language, cmd.version,
                 type(cmd.code), type(cmd.flag), type(cmd.language), type(cmd.version))
        pieces = _JSON_SHAPES.get(shape)
        if pieces is None:
            pieces = _json_shape(cmd)
            if len(_JSON_SHAPES) < 1024:  # a handful in practice: one per reply code
                _JSON_SHAPES[shape] = pieces
        return b"%b%d%b" % (pieces[0], cmd.opaque, pieces[1])
    return _encode_json_map(_header_map(cmd))


def _encode_json_map(header: dict) -> bytes:
    header["serializeTypeCurrentRPC"] = "JSON"
    return _JSON_HEADER_ENCODER.encode(header).encode("utf-8", UTF8_AS_JAVA)


_JSON_SHAPES: dict[tuple, tuple[bytes, bytes]] = {}
_OPAQUE_ZERO = b',"opaque":0,'  # keys sort as code, flag, language, opaque, serializeType..., version


def _json_shape(cmd: RemotingCommand) -> tuple[bytes, bytes]:
    header = _header_map(cmd)
    header["opaque"] = 0
    # The marker cannot occur inside a string value, where every quote is escaped.
    head, tail = _encode_json_map(header).split(_OPAQUE_ZERO)
    return head + b',"opaque":', b"," + tail


_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag


def _encode_rocketmq(cmd: RemotingCommand) -> bytes:
    if not -32768 <= cmd.code <= 32767 or not -32768 <= cmd.version <= 32767:
        raise ProtocolError(f"code {cmd.code} / version {cmd.version} do not fit a ROCKETMQ header")
    parts = [_FIXED.pack(cmd.code, LANGUAGE_CODE.get(cmd.language, LANGUAGE_CODE["OTHER"]),
                         cmd.version, cmd.opaque, cmd.flag)]
    remark = cmd.remark.encode("utf-8", UTF8_AS_JAVA) if cmd.remark else b""
    parts.append(struct.pack(">i", len(remark)))
    parts.append(remark)
    ext = bytearray()
    for key, value in (cmd.ext_fields or {}).items():
        k, v = key.encode("utf-8", UTF8_AS_JAVA), value.encode("utf-8", UTF8_AS_JAVA)
        ext += struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
    parts.append(struct.pack(">i", len(ext)))
    parts.append(bytes(ext))
    return b"".join(parts)


# --- decoding -----------------------------------------------------------------------------------

# The C scanner json.loads ends in, and the JSON decoder it belongs to (json.loads' defaults).
_JSON_SCAN = json.JSONDecoder().scan_once


def _loads_json(data: bytes) -> object:
    """json.loads(data), in half the time for the usual header.

    json.loads(bytes) spends half its ~3.5 us outside the C scanner: detect_encoding in Python,
    then two regular-expression whitespace skips. A header starting with '{' whose second byte is
    not NUL is UTF-8 to detect_encoding (no BOM, not UTF-16/32), so it is decoded as json.loads
    would and handed to the scanner; only if the scanner consumes it all is its value taken.
    Everything else (trailing whitespace, other encodings, any error) goes through json.loads,
    which gives the same value or the same error as before.
    """
    if data[:1] == b"{" and data[1:2] != b"\x00":
        try:
            text = data.decode("utf-8", "surrogatepass")
            value, end = _JSON_SCAN(text, 0)
        except (ValueError, StopIteration, RecursionError):
            pass
        else:
            if end == len(text):
                return value
    return json.loads(data)


def decode_header(serialize_type: int, data: bytes) -> RemotingCommand:
    if serialize_type == SerializeType.JSON:
        try:
            header = _loads_json(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:  # deep nesting recurses
            raise ProtocolError(f"undecodable JSON header: {e}") from None
        return _from_map(header, SerializeType.JSON)
    if serialize_type == SerializeType.ROCKETMQ:
        return _decode_rocketmq(data)
    if serialize_type == SerializeType.MSGPACK:
        try:
            header = msgpack.unpackb(data, raw=False, strict_map_key=False)
        except Exception as e:  # msgpack raises a handful of unrelated types for bad input
            raise ProtocolError(f"undecodable msgpack header: {e}") from None
        return _from_map(header, SerializeType.MSGPACK)
    raise ProtocolError(f"unknown serialize type {serialize_type}")


def _int(header: dict, key: str) -> int:
    value = header.get(key, 0)
    if type(value) is not int:  # bool is an int subclass and not a valid code
        raise ProtocolError(f"header field {key!r} is not an integer: {value!r}")
    return value


def _from_map(header: object, serialize_type: SerializeType) -> RemotingCommand:
    if not isinstance(header, dict):
        raise ProtocolError(f"header is not an object: {type(header).__name__}")
    language = header.get("language", "JAVA")
    remark = header.get("remark")
    ext = header.get("extFields")
    if not isinstance(language, str):
        raise ProtocolError(f"header field 'language' is not a string: {language!r}")
    if remark is not None and not isinstance(remark, str):
        raise ProtocolError(f"header field 'remark' is not a string: {remark!r}")
    if ext is not None and not isinstance(ext, dict):
        raise ProtocolError(f"header field 'extFields' is not an object: {ext!r}")
    code, opaque, flag = header.get("code", 0), header.get("opaque", 0), header.get("flag", 0)
    version = header.get("version", 0)
    # Checked inline, with _int only to name a bad field, in the order RemotingCommand's
    # arguments were once evaluated: code, opaque, flag, extFields entries, version.
    if type(code) is not int or type(opaque) is not int or type(flag) is not int:
        _int(header, "code"), _int(header, "opaque"), _int(header, "flag")
    ext_fields = normalise_ext(ext) if ext is not None else None
    if type(version) is not int:
        _int(header, "version")
    # Positional: the dataclass __init__ with keywords costs twice as much on every request.
    return RemotingCommand(code, opaque, flag, ext_fields, remark, None, language, version, serialize_type)


def normalise_ext(ext: dict) -> dict[str, str]:
    for key, value in ext.items():
        if type(key) is not str or type(value) is not str:
            break
    else:  # all strings, as Java sends them: the decoder's own new dict is the result as it is
        return ext
    # The C++ client sends some fields as JSON numbers. Accept both.
    out: dict[str, str] = {}
    for key, value in ext.items():
        if value is None:
            continue
        if isinstance(value, (dict, list)):
            try:  # msgpack can nest bytes or bytes keys, which JSON cannot hold
                value = json.dumps(value, separators=(",", ":"))
            except (TypeError, ValueError, RecursionError) as e:
                raise ProtocolError(
                    f"header field 'extFields' entry {key!r} cannot be flattened: {e}") from None
        out[str(key)] = stringify(value)
    return out


def _decode_rocketmq(data: bytes) -> RemotingCommand:
    try:
        code, lang, version, opaque, flag = _FIXED.unpack_from(data, 0)
        pos = _FIXED.size
        (remark_len,) = struct.unpack_from(">i", data, pos)
        pos += 4
        _check_len(remark_len, pos, data, "remark")
        remark = data[pos:pos + remark_len].decode() if remark_len else None
        pos += remark_len
        (ext_len,) = struct.unpack_from(">i", data, pos)
        pos += 4
        _check_len(ext_len, pos, data, "extFields")
        end = pos + ext_len
        ext: dict[str, str] | None = {} if ext_len else None
        while pos < end:
            (klen,) = struct.unpack_from(">h", data, pos)
            pos += 2
            _check_len(klen, pos, data, "extFields key", end)
            key = data[pos:pos + klen].decode()
            pos += klen
            (vlen,) = struct.unpack_from(">i", data, pos)
            pos += 4
            _check_len(vlen, pos, data, "extFields value", end)
            value = data[pos:pos + vlen].decode()
            pos += vlen
            if klen and vlen:  # a zero length decodes as null
                ext[key] = value
    except struct.error:
        raise ProtocolError("truncated ROCKETMQ header") from None
    except UnicodeDecodeError as e:
        raise ProtocolError(f"ROCKETMQ header is not UTF-8: {e}") from None
    language = LANGUAGES[lang] if 0 <= lang < len(LANGUAGES) else "OTHER"
    return RemotingCommand(
        code=code, opaque=opaque, flag=flag, ext_fields=ext, remark=remark,
        language=language, version=version, serialize_type=SerializeType.ROCKETMQ,
    )


def _check_len(length: int, pos: int, data: bytes, what: str, end: int | None = None) -> None:
    limit = len(data) if end is None else end
    if length < 0 or pos + length > limit:
        raise ProtocolError(f"bad ROCKETMQ header: {what} length {length}")
