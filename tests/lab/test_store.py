"""MessageStore: offsets, reads, replication, and the file that outlives a killed broker."""

import pytest

from lab.remoting.message import MessageExt, decode_messages, encode_message, offset_msg_id
from lab.broker.store import MessageStore

HOST = "127.0.0.1:10911"


def put(store, body, *, topic="T", queue_id=0, at=0):
    return store.put(MessageExt(topic=topic, body=body, queue_id=queue_id, store_host=HOST, store_timestamp=at))


def bodies(records):
    return [decode_messages(r)[0].body for r in records]


def test_queues_count_logical_offsets_apart_while_the_commit_log_counts_bytes():
    store = MessageStore()
    a0, b0, a1 = put(store, b"a0"), put(store, b"b0", queue_id=1), put(store, b"a1")
    assert [a0.queue_offset, b0.queue_offset, a1.queue_offset] == [0, 0, 1]
    record = len(store.get("T", 0, 0, 1)[0])
    assert [a0.commit_log_offset, b0.commit_log_offset, a1.commit_log_offset] == [0, record, 2 * record]
    assert a1.msg_id == offset_msg_id(HOST, 2 * record)
    assert (store.min_offset("T", 0), store.max_offset("T", 0), store.max_offset("T", 7)) == (0, 2, 0)
    assert bodies(store.get("T", 0, 0, 32)) == [b"a0", b"a1"]
    assert bodies(store.get("T", 0, 1, 32)) == [b"a1"] and store.get("T", 0, 2, 32) == []
    assert store.lookup(b0.commit_log_offset).body == b"b0" and store.lookup(1) is None


def test_search_by_store_time_and_earliest_store_time():
    store = MessageStore()
    for at in (1000, 2000, 3000):
        put(store, b"x", at=at)
    assert [store.search_offset("T", 0, t) for t in (0, 2000, 2500, 9999)] == [0, 1, 2, 3]
    assert (store.store_time("T", 0, 0), store.store_time("T", 1, 0)) == (1000, -1)  # a queue's earliest


def test_a_replica_takes_the_masters_records_at_the_masters_offsets():
    master, replica = MessageStore(), MessageStore()
    for i in range(5):
        put(master, f"m{i}".encode(), queue_id=i % 2)
    first = master.read_commit_log(0, 1)  # at least one whole record, however small the limit
    assert replica.put_replica(first) == 1
    assert replica.put_replica(master.read_commit_log(replica.max_physical_offset, 1 << 20)) == 4
    assert replica.max_physical_offset == master.max_physical_offset
    assert bodies(replica.get("T", 1, 0, 32)) == [b"m1", b"m3"]
    with pytest.raises(ValueError, match="does not continue"):
        replica.put_replica(first)


def test_the_file_keeps_messages_and_offsets_across_a_reopen(tmp_path):
    path = tmp_path / "store.msgpack"
    store = MessageStore(path)
    put(store, b"kept")
    put(store, b"also kept", topic="U", queue_id=2)
    store.commit_offset("cg", "T", 0, 1)
    store.close()  # not needed for durability: put and commit_offset flush before returning

    reopened = MessageStore(path)
    assert bodies(reopened.get("T", 0, 0, 32)) == [b"kept"] and bodies(reopened.get("U", 2, 0, 32)) == [b"also kept"]
    assert reopened.consumer_offsets == {("cg", "T", 0): 1}
    assert put(reopened, b"next").commit_log_offset == store.max_physical_offset
    reopened.close()


def test_a_torn_last_record_is_dropped_and_later_appends_still_read_back(tmp_path):
    path = tmp_path / "store.msgpack"
    store = MessageStore(path)
    put(store, b"whole")
    put(store, b"torn")
    store.close()
    path.write_bytes(path.read_bytes()[:-3])  # the process died mid-write

    reopened = MessageStore(path)
    assert bodies(reopened.get("T", 0, 0, 32)) == [b"whole"]
    put(reopened, b"after")
    reopened.close()
    again = MessageStore(path)
    assert bodies(again.get("T", 0, 0, 32)) == [b"whole", b"after"]
    again.close()


def test_an_unchanged_consumer_offset_is_not_written_again(tmp_path):
    path = tmp_path / "store.msgpack"
    store = MessageStore(path)
    store.commit_offset("cg", "T", 0, 5)
    size = path.stat().st_size
    store.commit_offset("cg", "T", 0, 5)  # clients resend unchanged offsets every 5 s
    assert path.stat().st_size == size
    store.close()


def test_put_assigns_offsets_to_the_record_it_writes():
    store = MessageStore()
    put(store, b"first")
    msg = MessageExt(topic="T", body=b"second", store_host=HOST)
    store.put(msg)
    assert store.get("T", 0, 1, 1) == [encode_message(msg)]
