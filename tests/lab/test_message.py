"""The commit-log record, batch bodies, properties and the offset msgId, byte for byte."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.remoting.message import (
    MESSAGE_MAGIC_CODE, MessageExt, MessageFormatError, decode_batch, decode_messages, decode_properties,
    encode_batch, encode_message, encode_properties, offset_msg_id, record_size,
)

texts = st.text(st.characters(blacklist_characters="\u0001\u0002", blacklist_categories=("Cs",)), max_size=20)
names = st.text(st.characters(blacklist_characters="\u0001\u0002", blacklist_categories=("Cs",)), min_size=1, max_size=10)
hosts = st.builds(lambda a, b, port: f"10.{a}.{b}.1:{port}", st.integers(0, 255), st.integers(0, 255),
                  st.integers(0, 65535))


def message(**overrides) -> MessageExt:
    fields = dict(topic="TopicTest", body=b"hello", queue_id=3, flag=7, properties={"TAGS": "a"}, sys_flag=1,
                  born_timestamp=1_700_000_000_123, born_host="10.0.0.9:50000", store_timestamp=1_700_000_000_456,
                  store_host="10.0.0.5:10911", queue_offset=12, commit_log_offset=4096, reconsume_times=2,
                  prepared_transaction_offset=0)
    return MessageExt(**{**fields, **overrides})


def test_a_record_is_91_bytes_plus_body_topic_and_properties():
    data = encode_message(message())
    # 91 + len("hello") + len("TopicTest") + len("TAGS\x01a")
    assert len(data) == 91 + 5 + 9 + 6 == record_size(b"hello", "TopicTest", "TAGS\u0001a")
    size, magic = struct.unpack_from(">iI", data)
    assert (size, magic) == (len(data), MESSAGE_MAGIC_CODE)
    assert data[84:] == struct.pack(">i", 5) + b"hello" + b"\x09TopicTest" + struct.pack(">h", 6) + b"TAGS\x01a"


@given(topic=names, body=st.binary(max_size=64), properties=st.dictionaries(names, texts, max_size=4),
       born=hosts, store=hosts, queue_offset=st.integers(0, 2**62), physical=st.integers(0, 2**62))
def test_records_round_trip(topic, body, properties, born, store, queue_offset, physical):
    msg = message(topic=topic, body=body, properties=properties, born_host=born, store_host=store,
                  queue_offset=queue_offset, commit_log_offset=physical)
    assert decode_messages(encode_message(msg)) == [msg]


def test_a_pull_body_is_records_back_to_back():
    first, second = message(body=b"one"), message(body=b"two", queue_offset=13, commit_log_offset=4096 + 114)
    assert decode_messages(encode_message(first) + encode_message(second)) == [first, second]


def test_a_truncated_or_foreign_record_is_an_error_not_a_wrong_message():
    data = encode_message(message())
    with pytest.raises(MessageFormatError):
        decode_messages(data[:-1])
    with pytest.raises(MessageFormatError):
        decode_messages(data[:4] + b"\x00\x00\x00\x00" + data[8:])


def test_a_host_that_is_not_ipv4_is_stored_as_zeros():
    msg = message(born_host="producer-0")
    assert decode_messages(encode_message(msg))[0].born_host == "0.0.0.0:0"


def test_the_offset_msg_id_is_store_ip_port_and_commit_log_offset_in_upper_case_hex():
    assert offset_msg_id("127.0.0.1:10911", 0x1234) == "7F000001" "00002A9F" "0000000000001234"


def test_properties_have_no_trailing_separator_and_tolerate_one():
    assert encode_properties({"TAGS": "a", "KEYS": "k"}) == "TAGS\u0001a\u0002KEYS\u0001k"
    assert decode_properties("TAGS\u0001a\u0002KEYS\u0001k\u0002") == {"TAGS": "a", "KEYS": "k"}
    assert decode_properties("") == {}


def test_batch_bodies_round_trip_and_reject_a_bad_size():
    entries = [(0, b"a", {"UNIQ_KEY": "1"}), (4, b"bb", {})]
    data = encode_batch(entries)
    assert len(data) == (22 + 1 + len("UNIQ_KEY\u00011")) + (22 + 2)
    assert decode_batch(data) == entries
    with pytest.raises(MessageFormatError):
        decode_batch(data[:-1])
