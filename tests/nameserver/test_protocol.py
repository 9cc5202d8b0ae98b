"""The sans-I/O remoting codec: frames, the three header serialisations, limits and errors.

Wire examples are copied from the RocketMQ spec (§1) and from a capture of the real C++ client, so
these tests pin the exact bytes a Java or C++ peer sends and expects.
"""

from __future__ import annotations

import json
import struct
from dataclasses import replace

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nameserver.protocol import (
    FLAG_ONEWAY, FLAG_RESPONSE, FRAME_MAX_LENGTH, LANGUAGES, FrameDecoder, HeaderError,
    ProtocolError, RemotingCommand, SerializeType, encode,
)

JSON, ROCKETMQ, MSGPACK = SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK


# --- helpers ------------------------------------------------------------------------------------

def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame built by hand from the spec's layout, independently of `encode`."""
    return (struct.pack(">i", 4 + len(header) + len(body))
            + struct.pack(">I", (serialize_type << 24) | len(header)) + header + body)


def decode_one(data: bytes) -> RemotingCommand:
    decoder = FrameDecoder()
    commands = decoder.feed(data)
    assert decoder.error is None, decoder.error
    assert decoder.buffered == 0
    assert len(commands) == 1
    return commands[0]


def decode_error(data: bytes) -> ProtocolError:
    decoder = FrameDecoder()
    assert decoder.feed(data) == []
    assert isinstance(decoder.error, ProtocolError)
    return decoder.error


def rmq_header(code=105, language=0, version=409, opaque=0, flag=0, remark=b"", ext=()) -> bytes:
    """A ROCKETMQ binary header per spec §1.3; `ext` holds (key, value) byte pairs."""
    entries = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    return (struct.pack(">hbhii", code, language, version, opaque, flag)
            + struct.pack(">i", len(remark)) + remark + struct.pack(">i", len(entries)) + entries)


# --- round trips ---------------------------------------------------------------------------------

ROUND_TRIP_CASES = {
    "bare request": RemotingCommand(code=105),
    "ext fields": RemotingCommand(code=105, opaque=7,
                                  ext_fields={"topic": "TopicTest", "queueId": "0"}),
    "body": RemotingCommand(code=103, opaque=1, body=b"\x00\x01\xff binary {not json}"),
    "remark": RemotingCommand(code=17, flag=FLAG_RESPONSE, remark="No topic route info"),
    "non-ascii remark": RemotingCommand(code=1, flag=FLAG_RESPONSE, remark="主题不存在: é ✓ 😀"),
    "oneway": RemotingCommand(code=34, flag=FLAG_ONEWAY, ext_fields={"clientID": "10.0.0.1@1"}),
    "everything": RemotingCommand(
        code=310, opaque=-2147483648, flag=FLAG_RESPONSE | FLAG_ONEWAY,
        ext_fields={"a": "1", "ü": "wert ✓", "b": "x" * 300}, remark="r", body=b"b" * 1000,
        language="CPP", version=63),
    "max ints": RemotingCommand(code=32767, opaque=2147483647, flag=0, version=32767, language="GO"),
    "negative code": RemotingCommand(code=-1, opaque=-1, language="NODE_JS", version=0),
}


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("cmd", ROUND_TRIP_CASES.values(), ids=ROUND_TRIP_CASES.keys())
def test_round_trip(cmd: RemotingCommand, serialize_type: SerializeType):
    cmd = replace(cmd, serialize_type=serialize_type)
    data = encode(cmd)
    assert data[4] == serialize_type  # the high byte of the header-length word
    decoded = decode_one(data)
    assert decoded == cmd
    assert decoded.is_response == bool(cmd.flag & 1)
    assert decoded.is_oneway == bool(cmd.flag & 2)


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_empty_body_decodes_as_no_body(serialize_type):
    decoded = decode_one(encode(RemotingCommand(code=1, body=b"", serialize_type=serialize_type)))
    assert decoded.body is None


@pytest.mark.parametrize("serialize_type", [JSON, MSGPACK])
def test_map_headers_keep_empty_strings_and_empty_ext(serialize_type):
    # Only the binary header turns zero lengths into null; JSON and msgpack keep "" and {}.
    cmd = RemotingCommand(code=1, ext_fields={}, remark="", serialize_type=serialize_type)
    assert decode_one(encode(cmd)) == cmd
    cmd = RemotingCommand(code=1, ext_fields={"k": ""}, serialize_type=serialize_type)
    assert decode_one(encode(cmd)).ext_fields == {"k": ""}


def test_rocketmq_header_turns_empty_remark_and_values_into_null():
    cmd = RemotingCommand(code=1, ext_fields={"k": "", "v": "1"}, remark="", serialize_type=ROCKETMQ)
    decoded = decode_one(encode(cmd))
    assert decoded.remark is None
    assert decoded.ext_fields == {"v": "1"}


def test_request_constructor_flattens_fields_and_sets_oneway():
    cmd = RemotingCommand.request(
        103, {"brokerId": 0, "compressed": False, "enableActingMaster": True, "zoneName": None,
              "brokerName": "broker-a"},
        body=b"{}", oneway=True, opaque=9, version=401, serialize_type=ROCKETMQ)
    assert cmd.ext_fields == {"brokerId": "0", "compressed": "false", "enableActingMaster": "true",
                              "brokerName": "broker-a"}
    assert cmd.flag == FLAG_ONEWAY and cmd.is_oneway and not cmd.is_response
    decoded = decode_one(encode(cmd))
    assert decoded == cmd
    assert decoded.require_int("brokerId") == 0
    assert decoded.bool_field("enableActingMaster") is True
    assert decoded.bool_field("compressed") is False
    assert RemotingCommand.request(105).flag == 0


# --- JSON header: the spec's examples byte for byte -------------------------------------------------

SPEC_REQUEST_HEADER = (b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
                       b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}')
SPEC_RESPONSE_HEADER = (b'{"code":0,"flag":1,"language":"JAVA","opaque":7,'
                        b'"serializeTypeCurrentRPC":"JSON","version":409}')
ROUTE_BODY = b'{"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}'


def test_json_request_matches_spec_example_byte_for_byte():
    cmd = RemotingCommand(code=105, ext_fields={"topic": "TopicTest"}, flag=0, language="JAVA",
                          opaque=7, version=409)
    data = encode(cmd)
    # length = 4 + 131 (header) + 0 (body) = 0x87; type 0 << 24 | 131 = 0x83; both big-endian
    assert data == b"\x00\x00\x00\x87\x00\x00\x00\x83" + SPEC_REQUEST_HEADER
    assert len(SPEC_REQUEST_HEADER) == 0x83


def test_json_response_matches_spec_example_byte_for_byte():
    cmd = RemotingCommand(code=0, flag=1, language="JAVA", opaque=7, version=409, body=ROUTE_BODY)
    data = encode(cmd)
    # length = 4 + 95 + 57 = 156 = 0x9c; headerLenAndType = 95 = 0x5f
    assert data == b"\x00\x00\x00\x9c\x00\x00\x00\x5f" + SPEC_RESPONSE_HEADER + ROUTE_BODY
    assert encode(RemotingCommand(code=0, flag=1, language="JAVA", opaque=7, version=409)) == (
        b"\x00\x00\x00\x63\x00\x00\x00\x5f" + SPEC_RESPONSE_HEADER)


def test_json_header_omits_null_fields_and_writes_utf8_raw():
    header = encode(RemotingCommand(code=1, remark="é✓", language="GO", version=317))[8:]
    assert header == ('{"code":1,"flag":0,"language":"GO","opaque":0,"remark":"é✓",'
                      '"serializeTypeCurrentRPC":"JSON","version":317}').encode()


@pytest.mark.parametrize("header, expected", [
    (SPEC_REQUEST_HEADER, RemotingCommand(code=105, ext_fields={"topic": "TopicTest"}, language="JAVA",
                                          opaque=7, version=409)),
    (SPEC_RESPONSE_HEADER, RemotingCommand(code=0, flag=1, language="JAVA", opaque=7, version=409)),
], ids=["request", "response"])
def test_spec_examples_decode(header, expected):
    assert decode_one(frame(header)) == expected


def test_real_cpp_client_first_request_decodes():
    data = (b'\x00\x00\x00\xc1\x00\x00\x00\xbd{"code":105,"extFields":{"AccessKey":"","OnsChannel":'
            b'"ALIYUN","Signature":"N/YT7X6tJe5UfutmW+uNwTTJ7Fc=","topic":"TopicTest"},"flag":0,'
            b'"language":"CPP","opaque":0,"remark":"","version":63}\n')
    length, word = struct.unpack(">ii", data[:8])
    assert word == 0xBD == len(data) - 8  # the trailing newline counts in the header length
    assert length == 0xC1 == 4 + word
    cmd = decode_one(data)
    assert cmd == RemotingCommand(
        code=105, opaque=0, flag=0, remark="", language="CPP", version=63, serialize_type=JSON,
        ext_fields={"AccessKey": "", "OnsChannel": "ALIYUN",
                    "Signature": "N/YT7X6tJe5UfutmW+uNwTTJ7Fc=", "topic": "TopicTest"})
    assert cmd.require("topic") == "TopicTest"
    assert not cmd.is_response and not cmd.is_oneway


@pytest.mark.parametrize("pack", [
    lambda h: frame(json.dumps(h).encode(), serialize_type=0),
    lambda h: frame(msgpack.packb(h), serialize_type=0x4D),
], ids=["json", "msgpack"])
def test_ext_field_numbers_and_booleans_are_normalised_to_strings(pack):
    # The C++ client sends e.g. "queueId":0 and "sysFlag":4 as JSON numbers.
    header = {"code": 310, "language": "CPP", "version": 63, "opaque": 3, "extFields": {
        "queueId": 0, "sysFlag": 4, "unitMode": False, "batch": True, "bornTimestamp": "1700000000000",
        "maxMsgNums": -32, "gone": None, "props": {"b": [1, "x"]}}}
    cmd = decode_one(pack(header))
    assert cmd.ext_fields == {
        "queueId": "0", "sysFlag": "4", "unitMode": "false", "batch": "true",
        "bornTimestamp": "1700000000000", "maxMsgNums": "-32", "props": '{"b":[1,"x"]}'}
    assert cmd.require_int("queueId") == 0
    assert cmd.bool_field("batch") is True and cmd.bool_field("unitMode") is False
    assert cmd.field("gone") is None


def test_json_header_frame_type_byte_wins_and_missing_fields_default():
    # serializeTypeCurrentRPC is informational; the high byte decides. Unknown keys are ignored and
    # a Go client omits serializeTypeCurrentRPC altogether.
    cmd = decode_one(frame(b'{"code":34,"serializeTypeCurrentRPC":"ROCKETMQ","unknown":[1,{}]}'))
    assert cmd == RemotingCommand(code=34, opaque=0, flag=0, language="JAVA", version=0,
                                  serialize_type=JSON)


# --- ROCKETMQ binary header ------------------------------------------------------------------------

# code 105 | language CPP (1) | version 409 | opaque 7 | flag 1 | remark "ok" | ext {topic: TopicTest}
RMQ_HEADER = (b"\x00\x69" b"\x01" b"\x01\x99" b"\x00\x00\x00\x07" b"\x00\x00\x00\x01"
              b"\x00\x00\x00\x02" b"ok"
              b"\x00\x00\x00\x14" b"\x00\x05" b"topic" b"\x00\x00\x00\x09" b"TopicTest")
RMQ_CMD = RemotingCommand(code=105, language="CPP", version=409, opaque=7, flag=1, remark="ok",
                          ext_fields={"topic": "TopicTest"}, serialize_type=ROCKETMQ)


def test_rocketmq_header_decodes_hand_built_bytes():
    assert rmq_header(105, 1, 409, 7, 1, b"ok", [(b"topic", b"TopicTest")]) == RMQ_HEADER
    assert decode_one(frame(RMQ_HEADER, b"body", serialize_type=1)) == replace(RMQ_CMD, body=b"body")


def test_rocketmq_header_encodes_to_spec_layout():
    data = encode(RMQ_CMD)
    assert data[8:] == RMQ_HEADER
    assert data[:8] == struct.pack(">ii", 4 + len(RMQ_HEADER), 0x01000000 | len(RMQ_HEADER))
    assert len(encode(RemotingCommand(code=1, serialize_type=ROCKETMQ))) == 8 + 21  # fixed part only


def test_rocketmq_zero_lengths_decode_as_absent():
    header = rmq_header(ext=[(b"empty", b""), (b"", b"keyless"), (b"brokerName", b"broker-a")])
    cmd = decode_one(frame(header, serialize_type=1))
    assert cmd.ext_fields == {"brokerName": "broker-a"}
    assert cmd.remark is None
    assert cmd.field("empty") is None
    bare = decode_one(frame(rmq_header(), serialize_type=1))
    assert bare.ext_fields is None and bare.remark is None and bare.body is None


@pytest.mark.parametrize("byte, language", [(0, "JAVA"), (1, "CPP"), (9, "GO"), (12, "RUST"),
                                            (13, "NODE_JS"), (14, "OTHER"), (-1, "OTHER")])
def test_rocketmq_language_byte(byte, language):
    assert decode_one(frame(rmq_header(language=byte), serialize_type=1)).language == language


def test_rocketmq_unknown_language_name_encodes_as_other():
    data = encode(RemotingCommand(code=1, language="COBOL", serialize_type=ROCKETMQ))
    assert data[8 + 2] == 7  # OTHER
    assert decode_one(data).language == "OTHER"


@pytest.mark.parametrize("cmd", [RemotingCommand(code=40000, serialize_type=ROCKETMQ),
                                 RemotingCommand(code=1, version=-40000, serialize_type=ROCKETMQ)],
                         ids=["code", "version"])
def test_rocketmq_header_rejects_values_beyond_int16(cmd):
    with pytest.raises(ProtocolError, match="do not fit"):
        encode(cmd)


@pytest.mark.parametrize("header, message", [
    (rmq_header()[:12], "truncated"),
    (rmq_header()[:20], "truncated"),
    (rmq_header(remark=b"ok")[:-5], "remark length 2"),
    (rmq_header()[:13] + struct.pack(">i", -1) + b"\x00\x00\x00\x00", "remark length -1"),
    (rmq_header()[:17] + struct.pack(">i", 99), "extFields length 99"),
    (rmq_header(ext=[(b"k" * 6, b"v")])[:21] + b"\x00\x10" + b"k" * 6 + b"\x00\x00\x00\x01v",
     "extFields key length 16"),
    (rmq_header(ext=[(b"k", b"v")])[:24] + b"\x00\x00\x00\x09v", "extFields value length 9"),
    (rmq_header(ext=[(b"k", b"v")])[:24] + b"\xff\xff\xff\xffv", "extFields value length -1"),
    (rmq_header(remark=b"\xff\xfe"), "not UTF-8"),
    (rmq_header(ext=[(b"\xc3", b"v")]), "not UTF-8"),
], ids=["short fixed part", "short ext length", "remark past end", "negative remark",
        "ext past end", "key past ext", "value past ext", "negative value", "remark utf8", "key utf8"])
def test_rocketmq_malformed_headers(header, message):
    err = decode_error(frame(header, serialize_type=1))
    assert message in str(err)


# --- Hypothesis: any split, any garbage ----------------------------------------------------------

# Non-empty strings and bodies, so every serialize type round-trips exactly.
short_text = st.text(min_size=1, max_size=12)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2 ** 15), 2 ** 15 - 1),
    opaque=st.integers(-(2 ** 31), 2 ** 31 - 1),
    flag=st.integers(0, 3),
    ext_fields=st.none() | st.dictionaries(short_text, short_text, max_size=4),
    remark=st.none() | short_text,
    body=st.none() | st.binary(min_size=1, max_size=40),
    language=st.sampled_from(LANGUAGES),
    version=st.integers(-(2 ** 15), 2 ** 15 - 1),
    serialize_type=st.sampled_from(SerializeType),
).map(lambda c: c if c.ext_fields or c.serialize_type != ROCKETMQ else replace(c, ext_fields=None))


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in zip(points, points[1:])]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cmds=st.lists(commands, min_size=1, max_size=5), cuts=st.lists(st.integers(0, 10 ** 6)))
def test_any_split_of_a_stream_decodes_to_the_same_commands(cmds, cuts):
    frames = [encode(c) for c in cmds]
    stream = b"".join(frames)
    ends = [sum(map(len, frames[:i + 1])) for i in range(len(frames))]

    whole = FrameDecoder()
    assert whole.feed(stream) == cmds  # several frames in one feed

    decoder, out, fed = FrameDecoder(), [], 0
    for piece in chunks(stream, cuts):
        out += decoder.feed(piece)
        fed += len(piece)
        # a frame is returned as soon as its last byte arrives, never later
        assert len(out) == sum(end <= fed for end in ends)
        assert decoder.buffered == fed - max([0] + [e for e in ends if e <= fed])
    assert out == cmds
    assert decoder.error is None and decoder.buffered == 0


@settings(max_examples=20, deadline=None)
@given(cmds=st.lists(commands, min_size=1, max_size=3))
def test_byte_by_byte_feeding(cmds):
    decoder = FrameDecoder()
    stream = b"".join(map(encode, cmds))
    out = []
    for i in range(len(stream)):
        out += decoder.feed(stream[i:i + 1])
    assert out == cmds and decoder.buffered == 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (st.lists(inner, max_size=3)
                   | st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8)
msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2 ** 63), 2 ** 64 - 1) | st.floats()
    | st.text(max_size=5) | st.binary(max_size=5),
    lambda inner: (st.lists(inner, max_size=3)
                   | st.dictionaries(st.text(max_size=3) | st.integers(-9, 9) | st.binary(max_size=3),
                                     inner, max_size=3)),
    max_leaves=8)


def header_maps(values):
    """Header-shaped maps whose fields are often well typed (so decoding gets past them), else any."""
    well_typed = {
        "code": st.integers(-5, 500), "flag": st.integers(0, 3), "opaque": st.integers(-9, 2 ** 31),
        "version": st.integers(0, 500), "language": st.text(max_size=4), "remark": st.text(max_size=4),
        "extFields": st.dictionaries(st.text(max_size=3), values, max_size=3)}
    fields = {k: strategy | values for k, strategy in well_typed.items()}
    return st.fixed_dictionaries({}, optional=fields) | values


garbage_frames = st.one_of(
    st.binary(max_size=64),
    st.builds(frame, st.binary(max_size=40), st.binary(max_size=8), st.sampled_from([0, 1, 0x4D, 7])),
    st.builds(lambda h, b: frame(json.dumps(h).encode(), b), header_maps(json_values),
              st.binary(max_size=4)),
    st.builds(lambda h: frame(msgpack.packb(h), serialize_type=0x4D), header_maps(msgpack_values)),
    st.builds(lambda c, at, byte: (lambda d: d[:at % len(d)] + bytes([byte]) + d[at % len(d) + 1:])(
        encode(c)), commands, st.integers(0, 10 ** 6), st.integers(0, 255)),
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(garbage_frames, min_size=1, max_size=4), cuts=st.lists(st.integers(0, 10 ** 6)))
def test_garbage_yields_commands_or_a_protocol_error_only(pieces, cuts):
    decoder = FrameDecoder(max_frame_length=4096)
    for chunk in chunks(b"".join(pieces), cuts):
        out = decoder.feed(chunk)  # must never raise
        assert all(isinstance(c, RemotingCommand) for c in out)
        if decoder.error is not None:
            assert isinstance(decoder.error, ProtocolError)
            assert decoder.buffered == 0
    if decoder.error is not None:
        assert decoder.feed(encode(RemotingCommand(code=1))) == []


@pytest.mark.parametrize("serialize_type, pack, values", [
    (0, lambda h: json.dumps(h).encode(), json_values),
    (0x4D, msgpack.packb, msgpack_values),
], ids=["json", "msgpack"])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_header_map_decodes_or_is_a_protocol_error(serialize_type, pack, values, data):
    header = data.draw(header_maps(values))
    decoder = FrameDecoder()
    out = decoder.feed(frame(pack(header), serialize_type=serialize_type))
    if decoder.error is not None:
        assert isinstance(decoder.error, ProtocolError) and out == []
        return
    [cmd] = out
    assert [cmd.code, cmd.flag, cmd.opaque] == [header.get(k, 0) for k in ("code", "flag", "opaque")]
    assert cmd.remark == header.get("remark") and cmd.serialize_type == serialize_type
    assert all(isinstance(v, str) for v in (cmd.ext_fields or {}).values())
    assert set(cmd.ext_fields or {}) == {str(k) for k, v in (header.get("extFields") or {}).items()
                                         if v is not None}


GOOD = encode(RemotingCommand(code=2))


@pytest.mark.parametrize("data", [
    frame(b"[" * 100_000),
    frame(b'{"code":1,"extFields":{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"),
    frame(msgpack.packb({"code": 1, "extFields": {"a": [b"x"]}}), serialize_type=0x4D),
    frame(msgpack.packb({"code": 1, "extFields": {"a": {b"k": 1}}}), serialize_type=0x4D),
], ids=["json nesting", "json nesting in extFields", "msgpack bytes in list", "msgpack bytes key"])
def test_unflattenable_headers_are_protocol_errors(data):
    # Nesting deeper than Python's recursion limit must not escape as RecursionError, and msgpack
    # values JSON cannot hold (bytes) must not escape as TypeError.
    decoder = FrameDecoder()
    assert decoder.feed(GOOD + data) == [decode_one(GOOD)]
    assert isinstance(decoder.error, ProtocolError)


def test_msgpack_nesting_at_its_own_limit_never_escapes():
    # 1020 nested arrays: msgpack accepts them, flattening them to JSON text may hit the recursion
    # limit. Either outcome is fine; an exception out of feed is not.
    nested = (msgpack.packb({"code": 1, "extFields": {"a": None}})[:-1]  # drop the nil
              + b"\x91" * 1020 + b"\x90")  # 1020 one-element arrays around an empty one
    decoder = FrameDecoder()
    out = decoder.feed(frame(nested, serialize_type=0x4D))
    if decoder.error is None:
        assert out[0].field("a") == "[" * 1021 + "]" * 1021
    else:
        assert isinstance(decoder.error, ProtocolError) and out == []


# --- limits and malformed frames -------------------------------------------------------------------

def test_oversized_frame_is_rejected_on_its_length_prefix_alone():
    decoder = FrameDecoder()
    length = FRAME_MAX_LENGTH - 4 + 1  # whole frame one byte over 16 MiB
    assert decoder.feed(struct.pack(">i", length)[:3]) == []
    assert decoder.error is None
    assert decoder.feed(struct.pack(">i", length)[3:]) == []
    assert "exceeds the limit of 16777216" in str(decoder.error)
    assert decoder.buffered == 0


def test_frame_of_exactly_16_mib_is_awaited():
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">i", FRAME_MAX_LENGTH - 4) + b"\x00\x00\x00\x02{}") == []
    assert decoder.error is None
    assert decoder.buffered == 10  # waiting for the rest of the body


LIMIT_HEADER = encode(RemotingCommand(code=1))[8:]


def limit_frame(total: int) -> bytes:
    return frame(LIMIT_HEADER, b"b" * (total - 8 - len(LIMIT_HEADER)))


def test_frame_limit_boundary_with_a_small_limit():
    limit = 256
    exact = limit_frame(limit)
    assert len(exact) == limit
    decoder = FrameDecoder(max_frame_length=limit)
    [cmd] = decoder.feed(exact)
    assert cmd.code == 1 and cmd.body == b"b" * (limit - 8 - len(LIMIT_HEADER))
    assert decoder.error is None

    decoder = FrameDecoder(max_frame_length=limit)
    assert decoder.feed(limit_frame(limit + 1)[:4]) == []
    assert f"frame of {limit + 1} bytes exceeds the limit of {limit}" in str(decoder.error)


def header_frame(header: bytes | str, serialize_type: int = 0) -> bytes:
    return frame(header.encode() if isinstance(header, str) else header, serialize_type=serialize_type)


@pytest.mark.parametrize("data, message", [
    (struct.pack(">i", -1), "bad frame length -1"),
    (struct.pack(">i", -(2 ** 31)), "bad frame length -2147483648"),
    (struct.pack(">i", 0), "bad frame length 0"),
    (struct.pack(">i", 3) + b"abc", "bad frame length 3"),
    (struct.pack(">ii", 10, 7) + b"{}xxxx", "bad header length 7 in a frame of 10"),
    (struct.pack(">iI", 6, 0x4D000003) + b"xx", "bad header length 3"),
    (header_frame("{}", serialize_type=2), "unknown serialize type 2"),
    (header_frame("{}", serialize_type=0xFF), "unknown serialize type 255"),
    (header_frame('{"code":1'), "undecodable JSON header"),
    (header_frame(b'{"code":1,"remark":"\xff"}'), "undecodable JSON header"),
    (header_frame(""), "undecodable JSON header"),
    (header_frame(b"\xc1", serialize_type=0x4D), "undecodable msgpack header"),
    (header_frame(msgpack.packb({"code": 1})[:-1], serialize_type=0x4D), "undecodable msgpack header"),
    (header_frame("[105]"), "header is not an object: list"),
    (header_frame('"code"'), "header is not an object: str"),
    (header_frame(msgpack.packb(105), serialize_type=0x4D), "header is not an object: int"),
    (header_frame('{"code":"105"}'), "header field 'code' is not an integer: '105'"),
    (header_frame('{"code":true}'), "header field 'code' is not an integer: True"),
    (header_frame('{"code":1.5}'), "header field 'code' is not an integer"),
    (header_frame('{"code":null}'), "header field 'code' is not an integer: None"),
    (header_frame('{"code":1,"opaque":"7"}'), "header field 'opaque' is not an integer"),
    (header_frame('{"code":1,"flag":[1]}'), "header field 'flag' is not an integer"),
    (header_frame('{"code":1,"version":"409"}'), "header field 'version' is not an integer"),
    (header_frame('{"code":1,"language":1}'), "header field 'language' is not a string"),
    (header_frame('{"code":1,"remark":5}'), "header field 'remark' is not a string"),
    (header_frame('{"code":1,"extFields":[]}'), "header field 'extFields' is not an object"),
], ids=lambda v: None if isinstance(v, bytes) else v)
def test_malformed_frames_are_protocol_errors(data, message):
    good = encode(RemotingCommand(code=7, opaque=1)) + encode(RemotingCommand(code=8, opaque=2))
    decoder = FrameDecoder()
    out = decoder.feed(good + data + good)
    assert [c.code for c in out] == [7, 8]  # frames complete before the bad one still come out
    assert isinstance(decoder.error, ProtocolError)
    assert message in str(decoder.error)
    assert decoder.buffered == 0
    assert decoder.feed(good) == []  # the stream cannot be resynchronised


def test_error_in_a_later_feed_keeps_earlier_results():
    decoder = FrameDecoder()
    good = encode(RemotingCommand(code=5))
    assert [c.code for c in decoder.feed(good + good[:3])] == [5]
    assert decoder.feed(good[3:] + b"\xff\xff\xff\xff")[0].code == 5
    assert "bad frame length -1" in str(decoder.error)


def test_header_too_long_for_24_bits_is_refused_on_encode():
    with pytest.raises(ProtocolError, match="does not fit 24 bits"):
        encode(RemotingCommand(code=1, remark="x" * 0x1000000, serialize_type=ROCKETMQ))


# --- responses and typed extFields ---------------------------------------------------------------

@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("oneway", [False, True])
def test_response_echoes_opaque_and_serialize_type(serialize_type, oneway):
    request = RemotingCommand.request(105, {"topic": "T"}, oneway=oneway, opaque=-42,
                                      serialize_type=serialize_type)
    response = request.response(17, "No topic route info", ext_fields={"n": 3, "ok": True, "x": None},
                                body=b"{}")
    assert (response.code, response.opaque, response.flag) == (17, -42, FLAG_RESPONSE)
    assert response.is_response and not response.is_oneway
    assert response.serialize_type == serialize_type
    assert response.ext_fields == {"n": "3", "ok": "true"}
    decoded = decode_one(encode(response))
    assert decoded == response
    assert encode(response)[4] == serialize_type
    assert request.response(0).ext_fields is None and request.response(0).remark is None


CMD = RemotingCommand(code=1, ext_fields={"topic": "T", "queueId": "3", "bad": "x1", "neg": "-7",
                                          "t": "TRUE", "f": "false", "y": "yes", "one": "1", "e": ""})


@pytest.mark.parametrize("cmd", [CMD, RemotingCommand(code=1)], ids=["with ext", "no ext"])
def test_require_missing_field_names_it(cmd):
    with pytest.raises(HeaderError, match="missing header field 'brokerName'"):
        cmd.require("brokerName")
    with pytest.raises(HeaderError, match="missing header field 'brokerId'"):
        cmd.require_int("brokerId")
    assert cmd.field("brokerName") is None
    assert cmd.int_field("brokerId") is None and cmd.int_field("brokerId", 5) == 5


def test_typed_accessors():
    assert CMD.require("topic") == "T"
    assert CMD.require("e") == ""  # present but empty is not missing
    assert CMD.require_int("queueId") == 3 and CMD.int_field("neg") == -7
    with pytest.raises(HeaderError, match=r"header field 'bad' is not an integer: 'x1'"):
        CMD.require_int("bad")
    with pytest.raises(HeaderError, match="'e' is not an integer"):
        CMD.int_field("e", 0)
    assert issubclass(HeaderError, ValueError)


@pytest.mark.parametrize("name, default, expected", [
    ("t", False, True), ("f", True, False), ("y", True, False), ("one", True, False),
    ("e", True, False), ("topic", True, False), ("missing", False, False), ("missing", True, True),
])
def test_bool_field_is_javas_parse_boolean(name, default, expected):
    assert CMD.bool_field(name, default) is expected


# --- commands as built: what the simulated network hands over instead of bytes ------------------

lab_values = st.none() | st.text(max_size=8) | st.integers(-(2 ** 40), 2 ** 40) | st.booleans()
lab_fields = st.none() | st.dictionaries(short_text, lab_values, max_size=4)
lab_bodies = st.none() | st.binary(max_size=40)
lab_requests = st.builds(RemotingCommand.request, code=st.integers(0, 2 ** 15 - 1), ext_fields=lab_fields,
                         body=lab_bodies, oneway=st.booleans(), serialize_type=st.sampled_from([JSON, MSGPACK]),
                         opaque=st.integers(-(2 ** 31), 2 ** 31 - 1))


@settings(max_examples=150, deadline=None)
@given(request=lab_requests, code=st.integers(0, 2 ** 15 - 1), remark=st.none() | short_text,
       ext_fields=lab_fields, body=lab_bodies)
def test_a_request_or_reply_as_built_is_what_its_peer_decodes_from_its_bytes(request, code, remark, ext_fields, body):
    # The simulated network hands commands over whole, not their bytes: equal, or a simulated run
    # would differ from the same run over sockets.
    reply = request.response(code, remark, ext_fields=ext_fields, body=body)
    for cmd in (request, reply):
        assert FrameDecoder().feed(encode(cmd)) == [cmd]
