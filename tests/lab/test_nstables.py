"""`ns.tables` records of rows (schema 4, lab/run/nstables.py): what the lab writes, merged as every
reader merges it, is the NameServer's tables; a record holds the rows that changed and no others."""

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.run.nstables import TABLES, merge_tables, row_changes, snapshot
from nameserver.routes import DataVersion, RouteInfoManager, TopicConfig


def canonical(tables: dict) -> dict:
    """Tables as plain data whose order means nothing (a cluster's names are a set in 4.9.8)."""
    return {**tables, "clusterAddrTable": {c: sorted(names) for c, names in tables["clusterAddrTable"].items()}}


_names = st.sampled_from(["broker-a", "broker-b", "broker-c"])
_ops = st.one_of(
    st.tuples(st.just("register"), _names, st.integers(0, 1), st.sampled_from(["x:1", "x:2", "x:3"]),
              st.sampled_from(["C1", "C2"]), st.sampled_from(["ch1", "ch2"]), st.integers(1, 3),
              st.lists(st.sampled_from(["T1", "T2", "T3"]), max_size=3), st.sampled_from([None, [], ["f:1"]]),
              st.sampled_from(["ha:1", "ha:2"])),
    st.tuples(st.just("unregister"), _names, st.integers(0, 1), st.sampled_from(["x:1", "x:2", "x:3"]),
              st.sampled_from(["C1", "C2"])),
    st.tuples(st.just("scan"), st.integers(0, 200)),
    st.tuples(st.just("close"), st.sampled_from(["ch1", "ch2"])),
    st.tuples(st.just("delete"), st.sampled_from(["T1", "T2"]), st.sampled_from([None, "C1"])),
    st.tuples(st.just("wipe"), _names),
)


def apply(rim: RouteInfoManager, op, now: float) -> None:
    kind, *args = op
    if kind == "register":
        name, broker_id, addr, cluster, channel, counter, topics, filters, ha = args
        rim.register_broker(cluster, addr, name, broker_id, ha, DataVersion(1, counter),
                            {t: TopicConfig(t, 4, 4, 6) for t in topics}, filters, channel, now)
    elif kind == "unregister":
        name, broker_id, addr, cluster = args
        rim.unregister_broker(cluster, addr, name, broker_id)
    elif kind == "scan":
        rim.scan_not_active_broker(now + args[0])
    elif kind == "close":
        rim.on_channel_destroy(args[0], "nobody:1")
    elif kind == "delete":
        rim.delete_topic(*args)
    else:
        rim.wipe_write_perm_of_broker(args[0])


def _unordered_dels(record: dict) -> dict:
    def sort(rows):
        return sorted(rows) if isinstance(rows, list) else {k: sort(v) for k, v in rows.items()}
    return {**record, **({"del": sort(record["del"])} if "del" in record else {})}


@settings(max_examples=300, deadline=None)
@given(st.lists(_ops, max_size=30))
def test_records_of_rows_merged_are_the_nameservers_tables(ops):
    rim = RouteInfoManager()
    rim.track_changes()
    written = merge_tables({}, snapshot(rim), name_sets=True)  # what the lab compares with: its first record, then rows
    read = merge_tables({}, snapshot(rim))  # what a reader holds: the same
    now = 0.0
    for op in ops:
        now += 10
        before = canonical({t: {k: v if not isinstance(v, (dict, list)) else type(v)(v)
                                for k, v in rows.items()} for t, rows in read.items()})
        apply(rim, op, now)
        touched = rim.take_changes()
        record = row_changes(written, rim, touched)
        # The lab's rows are those comparing every row finds (the workshop's way), no fewer; rows
        # deleted may come in another order (a scan removes in its own order), which no reader sees.
        assert _unordered_dels(record) == _unordered_dels(row_changes(written, rim, None)), op
        merge_tables(written, record, name_sets=True)
        record = msgpack.unpackb(msgpack.packb(record), raw=False)  # as a reader gets it from the log
        merge_tables(read, record)
        assert canonical(read) == canonical(snapshot(rim)) == canonical(written), op
        # Only what changed: a record is empty when the tables are as they were.
        assert bool(record) == (canonical(read) != before), op


def test_one_registration_among_thousands_writes_that_brokers_rows_alone():
    rim = RouteInfoManager()
    rim.track_changes()
    read = merge_tables({}, snapshot(rim), name_sets=True)
    for i in range(2000):
        rim.register_broker("DefaultCluster", f"10.9.{i // 250}.{i % 250}:10911", f"flood-{i}", 0, "ha",
                            DataVersion(1, 1), {"TopicTest": TopicConfig("TopicTest", 4, 4, 6)}, None, "flood", 0.0)
        record = row_changes(read, rim, rim.take_changes())
        merge_tables(read, record, name_sets=True)

    assert record == {"set": {
        "topicQueueTable": {"TopicTest": {"flood-1999": [4, 4, 6, 0]}},
        "brokerAddrTable": {"flood-1999": {"cluster": "DefaultCluster", "brokerAddrs": {"0": "10.9.7.249:10911"}}},
        "clusterAddrTable": {"DefaultCluster": ["flood-1999"]},
        "brokerLiveTable": {"10.9.7.249:10911": {"dataVersion": [1, 1], "haServerAddr": "ha"}},
    }}
    assert len(read["brokerLiveTable"]) == 2000 and len(read["clusterAddrTable"]["DefaultCluster"]) == 2000


def test_older_logs_whole_tables_still_merge_and_damaged_fields_are_skipped():
    # Schemas 1-3 carried tables whole (schema 3 only those that changed).
    whole = {"brokerLiveTable": {"a:1": {"dataVersion": [1, 1], "haServerAddr": "h"}},
             "clusterAddrTable": {"C": ["broker-a"]}}
    tables = merge_tables({}, whole)
    assert tables["brokerLiveTable"] == whole["brokerLiveTable"] and tables["topicQueueTable"] == {}
    merge_tables(tables, {"brokerLiveTable": {}})
    assert tables["brokerLiveTable"] == {} and tables["clusterAddrTable"] == {"C": ["broker-a"]}
    # a record of rows never changes the whole tables it was merged from
    merge_tables(tables, {"set": {"clusterAddrTable": {"C": ["broker-b"]}}})
    assert whole["clusterAddrTable"] == {"C": ["broker-a"]} and tables["clusterAddrTable"] == {"C": ["broker-a", "broker-b"]}
    # fields of the wrong shape, as a damaged or hostile log has them
    for damaged in ({"set": 7}, {"set": {"topicQueueTable": {"T": 3}}}, {"del": {"brokerLiveTable": {"x": 1}}},
                    {"del": {"clusterAddrTable": ["C"]}}, {"set": {"nope": {}}}, {"topicQueueTable": [1]}):
        merge_tables(tables, damaged)
    assert set(tables) == set(TABLES) and tables["clusterAddrTable"] == {"C": ["broker-a", "broker-b"]}
