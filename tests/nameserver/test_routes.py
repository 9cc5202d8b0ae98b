"""RouteInfoManager against every rule of spec §4 (4.9.8), driven directly with `now` passed in."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nameserver.routes import DataVersion, QueueData, RouteInfoManager, TopicConfig

A0, A1 = "10.0.0.1:10911", "10.0.1.1:10911"  # h.addr("broker-a", 0), h.addr("broker-a", 1)
B0 = "10.0.0.2:10911"  # h.addr("broker-b", 0)
DV1, DV2 = DataVersion(1_700_000_000_000, 1), DataVersion(1_700_000_000_000, 2)


# --- registration (§4.2) -------------------------------------------------------------------------------

def test_master_and_slave_are_registered_under_their_broker_ids(routes):
    routes.register("broker-a", 0)
    routes.register("broker-a", 1)

    assert routes.addrs("broker-a") == {0: A0, 1: A1}
    assert routes.rim.broker_addr_table["broker-a"].cluster == "DefaultCluster"
    assert list(routes.rim.cluster_addr_table) == ["DefaultCluster"]
    assert list(routes.rim.cluster_addr_table["DefaultCluster"]) == ["broker-a"]
    assert set(routes.rim.broker_live_table) == {A0, A1}
    assert routes.rim.broker_live_table[A1].ha_server_addr == "10.0.1.1:10912"


def test_a_slave_result_carries_its_live_masters_ha_and_master_address(routes):
    master = routes.register("broker-a", 0)
    slave = routes.register("broker-a", 1)

    assert (master.ha_server_addr, master.master_addr) == (None, None)
    assert (slave.ha_server_addr, slave.master_addr) == ("10.0.0.1:10912", A0)


def test_a_slave_result_has_no_master_when_none_registered(routes):
    slave = routes.register("broker-a", 1)
    assert (slave.ha_server_addr, slave.master_addr) == (None, None)


def test_a_slave_result_has_no_master_once_the_master_expired(routes):
    routes.register("broker-a", 0, now=0)
    routes.register("broker-a", 1, now=0)
    routes.register("broker-a", 1, now=100)
    routes.rim.scan_not_active_broker(now=121)  # the master expires, the slave does not

    slave = routes.register("broker-a", 1, now=125)
    assert routes.addrs("broker-a") == {1: A1}
    assert (slave.ha_server_addr, slave.master_addr) == (None, None)


def test_a_slave_result_has_no_master_when_the_master_is_not_live(routes):
    # brokerAddrs names a master but brokerLiveTable has no entry for it.
    routes.register("broker-a", 0)
    del routes.rim.broker_live_table[A0]
    slave = routes.register("broker-a", 1)
    assert (slave.ha_server_addr, slave.master_addr) == (None, None)


@pytest.mark.parametrize("with_old_master", [False, True])
def test_the_same_address_under_a_new_id_replaces_the_old_id(routes, with_old_master):
    """Slave -> master switch: an ip:port appears under one id only."""
    if with_old_master:
        routes.register("broker-a", 0, broker_addr="10.9.9.9:10911")
    routes.register("broker-a", 1, broker_addr=A1)
    routes.register("broker-a", 0, broker_addr=A1)

    assert routes.addrs("broker-a") == {0: A1}
    route = routes.rim.pickup_topic_route_data("TopicTest")
    assert route.broker_datas[0].broker_addrs == {0: A1}


def test_queue_data_comes_only_from_masters(routes, h):
    routes.register("broker-a", 1, table=h.topics("SlaveOnly", queues=8))
    assert routes.rim.topic_queue_table == {}
    assert routes.rim.pickup_topic_route_data("SlaveOnly") is None

    routes.register("broker-a", 0, table=h.topics("TopicTest", queues=4, perm=7, sys_flag=1))
    assert routes.rim.topic_queue_table == {"TopicTest": {"broker-a": QueueData("broker-a", 4, 4, 7, 1)}}


def test_the_topic_table_is_applied_on_first_registration_and_only_when_the_data_version_changes(routes, h):
    first = routes.register(table=h.topics("TopicTest", queues=4), version=DV1)
    assert first.topics_applied and routes.queue("TopicTest").read_queue_nums == 4

    # Same data version, different table contents: the NameServer does not look at the table.
    same = routes.register(table=h.topics("TopicTest", "NewTopic", queues=16, perm=2), version=DV1, now=30)
    assert not same.topics_applied
    assert routes.queue("TopicTest") == QueueData("broker-a", 4, 4, 6, 0)
    assert "NewTopic" not in routes.rim.topic_queue_table

    bumped = routes.register(table=h.topics("TopicTest", "NewTopic", queues=16, perm=2), version=DV2, now=60)
    assert bumped.topics_applied
    assert routes.queue("TopicTest") == QueueData("broker-a", 16, 16, 2, 0)
    assert routes.queue("NewTopic") == QueueData("broker-a", 16, 16, 2, 0)


def test_a_data_version_differing_only_in_timestamp_counts_as_changed(routes, h):
    routes.register(table=h.topics("TopicTest", queues=4), version=DataVersion(1, 5))
    result = routes.register(table=h.topics("TopicTest", queues=8), version=DataVersion(2, 5))
    assert result.topics_applied and routes.queue("TopicTest").read_queue_nums == 8


def test_a_new_master_id_applies_the_table_even_with_an_unchanged_data_version(routes, h):
    """registerFirst: the address was live as a slave with this dataVersion, but id 0 is new."""
    routes.register("broker-a", 1, broker_addr=A1, table=h.topics("TopicTest"), version=DV1)
    result = routes.register("broker-a", 0, broker_addr=A1, table=h.topics("TopicTest"), version=DV1)
    assert result.topics_applied
    assert routes.queue("TopicTest") == QueueData("broker-a", 4, 4, 6, 0)


def test_a_lazy_table_is_not_read_when_the_data_version_is_unchanged(routes):
    class Untouchable(dict):
        def values(self):
            raise AssertionError("the topic table was read")

        def __iter__(self):
            raise AssertionError("the topic table was read")

    routes.register(version=DV1)
    routes.register(version=DV1, table=Untouchable(), now=30)  # no error: never read
    routes.register("broker-a", 1, version=DV2, table=Untouchable())  # slaves: never read


def test_a_table_that_fails_to_load_leaves_every_table_untouched(routes):
    """A lazy body whose topic table turns out corrupt must not leave a half-registered broker
    (a BrokerData without a live entry would never expire)."""
    class Corrupt(dict):
        def items(self):
            raise ValueError("corrupt topic table")

    with pytest.raises(ValueError):
        routes.register(table=Corrupt())
    assert routes.rim.cluster_addr_table == {} and routes.rim.broker_addr_table == {}
    assert routes.rim.broker_live_table == {} and routes.rim.topic_queue_table == {}
    assert routes.rim.generation == 0


def test_registration_merges_a_partial_table_and_never_deletes_topics(routes, h):
    routes.register(table=h.topics("T1", "T2"), version=DV1)
    routes.register(table=h.topics("T3", queues=8), version=DV2)  # registerIncrementBrokerData

    assert list(routes.rim.topic_queue_table) == ["T1", "T2", "T3"]
    assert routes.queue("T3").read_queue_nums == 8


def test_two_masters_share_a_topic(routes, h):
    routes.register("broker-a", 0, table=h.topics("Shared", queues=4))
    routes.register("broker-b", 0, table=h.topics("Shared", queues=8))

    # 4.9.8 lists them as the topic's HashMap<brokerName, QueueData> iterates (16 buckets):
    # String.hashCode spread, & 15, puts broker-b in bucket 8 and broker-a in 11.
    route = routes.rim.pickup_topic_route_data("Shared")
    assert [(q.broker_name, q.read_queue_nums) for q in route.queue_datas] == [("broker-b", 8), ("broker-a", 4)]
    assert [b.broker_name for b in route.broker_datas] == ["broker-b", "broker-a"]


def test_the_filter_server_list_is_set_removed_by_an_empty_list_and_untouched_by_none(routes):
    routes.register(filters=["10.1.1.1:9999"])
    assert routes.rim.filter_server_table == {A0: ["10.1.1.1:9999"]}

    routes.register(filters=None, now=1)  # legacy body: no list at all
    assert routes.rim.filter_server_table == {A0: ["10.1.1.1:9999"]}

    routes.register(filters=["10.1.1.2:9999"], now=2)
    assert routes.rim.filter_server_table == {A0: ["10.1.1.2:9999"]}

    routes.register(filters=[], now=3)
    assert routes.rim.filter_server_table == {}


# --- unregister (§4.3) ---------------------------------------------------------------------------------

def test_unregister_removes_one_id(routes):
    routes.register("broker-a", 0)
    routes.register("broker-a", 1, filters=["10.1.1.1:9999"])

    removed = routes.unregister("broker-a", 1)
    assert routes.addrs("broker-a") == {0: A0}
    assert A1 not in routes.rim.broker_live_table and A1 not in routes.rim.filter_server_table
    assert (removed.reason, removed.broker_name_removed, removed.removed_topics) == ("unregistered", False, [])


def test_unregistering_the_last_address_removes_broker_name_cluster_and_emptied_topics(routes, h):
    routes.register("broker-a", 0, table=h.topics("OnlyA", "Shared"))
    routes.register("broker-b", 0, cluster="OtherCluster", table=h.topics("Shared"))

    removed = routes.unregister("broker-a", 0)

    assert "broker-a" not in routes.rim.broker_addr_table
    assert list(routes.rim.cluster_addr_table) == ["OtherCluster"]
    assert list(routes.rim.topic_queue_table) == ["Shared"]
    assert list(routes.rim.topic_queue_table["Shared"]) == ["broker-b"]
    assert routes.rim.pickup_topic_route_data("OnlyA") is None
    assert removed.broker_name_removed and removed.removed_topics == ["OnlyA"]


def test_unregistering_one_broker_keeps_the_cluster_of_the_others(routes):
    routes.register("broker-a", 0)
    routes.register("broker-b", 0)
    routes.unregister("broker-a", 0)
    assert list(routes.rim.cluster_addr_table["DefaultCluster"]) == ["broker-b"]


def test_master_gone_slave_alive_keeps_queue_data_and_the_route_lists_only_the_slave(routes):
    routes.register("broker-a", 0)
    routes.register("broker-a", 1)

    routes.unregister("broker-a", 0)

    route = routes.rim.pickup_topic_route_data("TopicTest")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    assert [b.broker_addrs for b in route.broker_datas] == [{1: A1}]


def test_unregistering_an_unknown_broker_changes_nothing_visible(routes):
    routes.register("broker-a", 0)
    before = routes.snapshot()
    routes.unregister("broker-x", 0)
    assert routes.snapshot() == before


# --- scanNotActiveBroker (§4.5) -------------------------------------------------------------------------

@pytest.mark.parametrize("elapsed, expired", [
    (0, False), (119.999, False), (120.0, False), (120.001, True), (600, True),
])
def test_scan_expires_brokers_silent_for_more_than_120_seconds(routes, elapsed, expired):
    routes.register(now=10)

    removed = routes.rim.scan_not_active_broker(now=10 + elapsed)

    assert (A0 not in routes.rim.broker_live_table) is expired
    assert ("broker-a" not in routes.rim.broker_addr_table) is expired
    assert (routes.rim.pickup_topic_route_data("TopicTest") is None) is expired
    assert [channel for _, channel in removed] == ([routes.channel(A0)] if expired else [])


def test_scan_reports_what_each_expiry_removed(routes, h):
    routes.register("broker-a", 0, table=h.topics("OnlyA"), now=0)
    routes.register("broker-b", 0, table=h.topics("OnlyB"), now=50)

    removed = routes.rim.scan_not_active_broker(now=121)

    assert len(removed) == 1
    info, channel = removed[0]
    assert channel is routes.channel(A0)
    assert (info.broker_addr, info.reason, info.broker_name, info.broker_id, info.cluster_name) == (
        A0, "expired", "broker-a", 0, "DefaultCluster")
    assert info.broker_name_removed and info.removed_topics == ["OnlyA"]
    assert list(routes.rim.topic_queue_table) == ["OnlyB"]


def test_a_broker_refreshed_at_t_lives_until_t_plus_120(routes):
    routes.register(now=0)
    routes.register(now=100)  # the 30 s re-registration, unchanged

    assert routes.rim.scan_not_active_broker(now=200) == []
    assert routes.rim.scan_not_active_broker(now=220) == []
    assert len(routes.rim.scan_not_active_broker(now=220.5)) == 1


def test_scan_returns_the_channel_of_every_expired_broker(routes):
    routes.register("broker-a", 0, now=0)
    routes.register("broker-a", 1, now=0)
    routes.register("broker-b", 0, now=0)

    removed = routes.rim.scan_not_active_broker(now=500)

    assert [ch for _, ch in removed] == [routes.channel(A0), routes.channel(A1), routes.channel(B0)]
    assert routes.rim.broker_addr_table == {} and routes.rim.cluster_addr_table == {}
    assert routes.rim.topic_queue_table == {}


def test_the_expiry_is_configurable(h):
    routes = h.Routes(expiry=10)
    routes.register(now=0)
    assert routes.rim.scan_not_active_broker(now=10) == []
    assert len(routes.rim.scan_not_active_broker(now=10.5)) == 1


# --- onChannelDestroy (§4.6) ---------------------------------------------------------------------------

def test_a_closed_registration_channel_removes_its_broker_at_once(routes, h):
    routes.register("broker-a", 0, table=h.topics("OnlyA"))
    routes.register("broker-b", 0, table=h.topics("OnlyB"))

    removed = routes.rim.on_channel_destroy(routes.channel(A0), "10.0.0.1:53412")

    assert (removed.broker_addr, removed.reason, removed.broker_name, removed.broker_id) == (
        A0, "channel_closed", "broker-a", 0)
    assert removed.broker_name_removed and removed.removed_topics == ["OnlyA"]
    assert A0 not in routes.rim.broker_live_table
    assert "broker-a" not in routes.rim.broker_addr_table
    assert list(routes.rim.topic_queue_table) == ["OnlyB"]


def test_closing_an_unrelated_channel_is_a_no_op(routes, h):
    routes.register("broker-a", 0)
    before, generation = routes.snapshot(), routes.rim.generation

    assert routes.rim.on_channel_destroy(h.Channel("a producer"), "10.0.0.99:40000") is None
    assert routes.snapshot() == before and routes.rim.generation == generation
    assert A0 in routes.rim.broker_live_table


def test_closing_a_brokers_old_channel_after_it_reregistered_on_a_new_one_is_a_no_op(routes, h):
    old, new = h.Channel("old"), h.Channel("new")
    routes.register(channel=old, now=0)
    routes.register(channel=new, now=30)

    assert routes.rim.on_channel_destroy(old, "10.0.0.1:53412") is None
    assert routes.addrs("broker-a") == {0: A0}


def test_closing_a_slave_channel_keeps_the_master(routes):
    routes.register("broker-a", 0)
    routes.register("broker-a", 1)

    routes.rim.on_channel_destroy(routes.channel(A1), "10.0.1.1:53412")

    assert routes.addrs("broker-a") == {0: A0}
    assert routes.queue("TopicTest") is not None


def test_an_unknown_channel_falls_back_to_the_remote_address(routes, h):
    """RocketMQ's fallback: the peer address is used when no live entry holds the channel."""
    routes.register("broker-a", 0)
    removed = routes.rim.on_channel_destroy(h.Channel("unknown"), A0)
    assert removed is not None and removed.broker_addr == A0
    assert "broker-a" not in routes.rim.broker_addr_table


# --- pickupTopicRouteData (§4.4) -----------------------------------------------------------------------

def test_route_for_an_unknown_topic_is_none(routes):
    routes.register()
    assert routes.rim.pickup_topic_route_data("Nope") is None


def test_route_for_a_topic_whose_brokers_are_all_gone_is_none(routes):
    routes.register("broker-a", 0)
    routes.rim.topic_queue_table["Orphan"] = {"broker-gone": QueueData("broker-gone", 4, 4, 6, 0)}
    assert routes.rim.pickup_topic_route_data("Orphan") is None


def test_route_lists_queue_data_and_broker_data_of_the_topic_only(routes, h):
    routes.register("broker-a", 0, table=h.topics("TopicTest", "Other"))
    routes.register("broker-a", 1)
    routes.register("broker-b", 0, table=h.topics("Other"))

    route = routes.rim.pickup_topic_route_data("TopicTest")

    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6, 0)]
    assert [(b.cluster, b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
        ("DefaultCluster", "broker-a", {0: A0, 1: A1})]
    assert route.filter_server_table == {} and route.order_topic_conf is None


def test_a_returned_route_is_a_copy(routes):
    routes.register("broker-a", 0, filters=["10.1.1.1:9999"])
    route = routes.rim.pickup_topic_route_data("TopicTest")

    route.broker_datas[0].broker_addrs[7] = "1.2.3.4:1"
    route.broker_datas[0].cluster = "Changed"
    route.filter_server_table[A0].append("1.2.3.4:2")
    route.queue_datas.clear()

    again = routes.rim.pickup_topic_route_data("TopicTest")
    assert again.broker_datas[0].broker_addrs == {0: A0}
    assert again.broker_datas[0].cluster == "DefaultCluster"
    assert again.filter_server_table == {A0: ["10.1.1.1:9999"]}
    assert len(again.queue_datas) == 1
    assert routes.addrs("broker-a") == {0: A0}


def test_filter_server_table_lists_only_addresses_with_filter_servers(routes):
    routes.register("broker-a", 0, filters=["10.1.1.1:9999", "10.1.1.2:9999"])
    routes.register("broker-a", 1)
    routes.register("broker-b", 0, filters=["10.2.2.2:9999"], table={})  # not in this topic's route

    route = routes.rim.pickup_topic_route_data("TopicTest")
    assert route.filter_server_table == {A0: ["10.1.1.1:9999", "10.1.1.2:9999"]}


# --- write permission (§3.5, §4.7) -----------------------------------------------------------------------

def test_wipe_write_perm_clears_the_write_bit_of_every_topic_of_the_broker(routes, h):
    routes.register("broker-a", 0, table={**h.topics("RW", perm=6), **h.topics("RWI", perm=7),
                                          **h.topics("RO", perm=4)})
    routes.register("broker-b", 0, table=h.topics("RW", perm=6))

    assert routes.rim.wipe_write_perm_of_broker("broker-a") == 3

    assert [routes.queue(t).perm for t in ("RW", "RWI", "RO")] == [4, 5, 4]
    assert routes.queue("RW", "broker-b").perm == 6
    assert {q.broker_name: q.perm for q in routes.rim.pickup_topic_route_data("RW").queue_datas} == {
        "broker-a": 4, "broker-b": 6}


def test_add_write_perm_sets_read_write_overwriting_other_bits(routes, h):
    routes.register("broker-a", 0, table={**h.topics("RO", perm=4), **h.topics("RWI", perm=7),
                                          **h.topics("W", perm=2)})
    assert routes.rim.add_write_perm_of_broker("broker-a") == 3
    assert [routes.queue(t).perm for t in ("RO", "RWI", "W")] == [6, 6, 6]


@pytest.mark.parametrize("op", ["wipe_write_perm_of_broker", "add_write_perm_of_broker"])
def test_write_perm_of_an_unknown_broker_touches_nothing(routes, op):
    routes.register()
    generation = routes.rim.generation
    assert getattr(routes.rim, op)("broker-x") == 0
    assert routes.rim.generation == generation and routes.queue("TopicTest").perm == 6


@pytest.mark.parametrize("next_version, perm_after", [(DV1, 4), (DV2, 6)])
def test_a_wiped_perm_is_restored_only_by_a_registration_with_a_changed_data_version(
        routes, next_version, perm_after):
    routes.register(version=DV1, now=0)
    routes.rim.wipe_write_perm_of_broker("broker-a")

    routes.register(version=next_version, now=30)

    assert routes.queue("TopicTest").perm == perm_after


# --- delete topic, topic lists (§3.7, §3.10, §4.7) --------------------------------------------------------

def test_delete_topic_without_cluster_removes_it_everywhere(routes, h):
    routes.register("broker-a", 0, table=h.topics("T", "Keep"))
    routes.register("broker-b", 0, cluster="C2", table=h.topics("T"))

    routes.rim.delete_topic("T")

    assert list(routes.rim.topic_queue_table) == ["Keep"]
    assert routes.rim.pickup_topic_route_data("T") is None


def test_delete_topic_with_cluster_removes_only_that_clusters_queue_data(routes, h):
    routes.register("broker-a", 0, cluster="C1", table=h.topics("T"))
    routes.register("broker-b", 0, cluster="C2", table=h.topics("T"))

    routes.rim.delete_topic("T", "C1")
    assert list(routes.rim.topic_queue_table["T"]) == ["broker-b"]

    routes.rim.delete_topic("T", "NoSuchCluster")
    assert list(routes.rim.topic_queue_table["T"]) == ["broker-b"]

    routes.rim.delete_topic("T", "C2")
    assert "T" not in routes.rim.topic_queue_table


@pytest.mark.parametrize("next_version, recreated", [(DV1, False), (DV2, True)])
def test_a_deleted_topic_comes_back_with_the_next_changed_registration(routes, next_version, recreated):
    routes.register(version=DV1, now=0)
    routes.rim.delete_topic("TopicTest")
    routes.register(version=next_version, now=30)
    assert ("TopicTest" in routes.rim.topic_queue_table) is recreated


def test_all_topics_and_topics_by_cluster(routes, h):
    routes.register("broker-a", 0, cluster="C1", table=h.topics("A1", "Shared"))
    routes.register("broker-b", 0, cluster="C2", table=h.topics("B1", "Shared"))
    routes.register("broker-c", 1, cluster="C3", table=h.topics("SlaveOnly"))

    assert routes.rim.get_all_topic_list() == ["A1", "Shared", "B1"]
    assert routes.rim.get_topics_by_cluster("C1") == ["A1", "Shared"]
    assert routes.rim.get_topics_by_cluster("C2") == ["Shared", "B1"]
    assert routes.rim.get_topics_by_cluster("C3") == []
    assert routes.rim.get_topics_by_cluster("Unknown") == []


def test_system_topic_list_is_cluster_and_broker_names_plus_one_address(routes, h):
    assert routes.rim.get_system_topic_list() == ([], None)

    routes.register("broker-a", 0, cluster="C1")
    routes.register("broker-a", 1, cluster="C1")
    routes.register("broker-b", 0, cluster="C1")
    routes.register("broker-c", 0, cluster="C2")

    # A fresh HashSet (16 buckets) of the names: broker-b 8, broker-c 9, broker-a 11, C1 14, C2 15.
    topics, broker_addr = routes.rim.get_system_topic_list()
    assert topics == ["broker-b", "broker-c", "broker-a", "C1", "C2"]
    # The first BrokerData in brokerAddrTable's order (128 buckets: broker-b 88, broker-c 89,
    # broker-a 91), its first id.
    assert broker_addr == h.addr("broker-b", 0)


def test_unit_topic_lists_follow_the_sys_flag_bits(routes, h):
    routes.register("broker-a", 0, table={
        **h.topics("Plain", sys_flag=0), **h.topics("Unit", sys_flag=1),
        **h.topics("UnitSub", sys_flag=2), **h.topics("Both", sys_flag=3)})

    assert routes.rim.get_unit_topics() == ["Unit", "Both"]
    assert routes.rim.get_has_unit_sub_topic_list() == ["UnitSub", "Both"]
    assert routes.rim.get_has_unit_sub_un_unit_topic_list() == ["UnitSub"]


def test_unit_flags_are_read_from_the_first_queue_data_of_a_topic(routes, h):
    # "First" in the topic's HashMap order: broker-b (bucket 8) before broker-a (bucket 11),
    # whatever order they registered in.
    routes.register("broker-a", 0, table=h.topics("Mixed", sys_flag=0))
    routes.register("broker-b", 0, table=h.topics("Mixed", sys_flag=1))
    routes.register("broker-a", 0, table=h.topics("Other", sys_flag=1), version=DataVersion(2, 2))
    routes.register("broker-b", 0, table=h.topics("Other", sys_flag=0), version=DataVersion(2, 2))
    assert routes.rim.get_unit_topics() == ["Mixed"]


# --- QUERY_DATA_VERSION semantics (§3.9) -----------------------------------------------------------------

def test_data_version_change_detection(routes):
    assert routes.rim.is_broker_topic_config_changed(A0, DV1)  # unknown broker
    assert routes.rim.query_broker_topic_config(A0) is None

    routes.register(version=DV1)

    assert not routes.rim.is_broker_topic_config_changed(A0, DV1)
    assert routes.rim.is_broker_topic_config_changed(A0, DV2)
    assert routes.rim.is_broker_topic_config_changed(A0, DataVersion(DV1.timestamp + 1, DV1.counter))
    assert routes.rim.query_broker_topic_config(A0) == DV1


def test_refreshing_the_timestamp_keeps_a_broker_alive(routes):
    routes.register(now=0)
    routes.rim.update_broker_info_update_timestamp(A0, now=100)
    routes.rim.update_broker_info_update_timestamp("10.9.9.9:1", now=100)  # unknown: ignored

    assert routes.rim.scan_not_active_broker(now=200) == []
    assert "10.9.9.9:1" not in routes.rim.broker_live_table
    assert len(routes.rim.scan_not_active_broker(now=221)) == 1


# --- generation: what makes caching encoded routes correct ------------------------------------------------

def _reregister_unchanged(routes):
    routes.register("broker-a", 0, filters=["10.1.1.1:9999"], now=30)
    routes.register("broker-a", 1, now=30)


NO_VISIBLE_CHANGE = {
    "re-registration with unchanged data": _reregister_unchanged,
    "re-registration unchanged version, other table": lambda r: r.register(
        "broker-a", 0, table={"X": TopicConfig("X", 1, 1)}, filters=["10.1.1.1:9999"], now=30),
    "legacy re-registration without a filter list": lambda r: r.register(filters=None, now=30),
    "scan expiring nothing": lambda r: r.rim.scan_not_active_broker(now=60),
    "timestamp refresh": lambda r: r.rim.update_broker_info_update_timestamp(A0, now=60),
    "unrelated channel closed": lambda r: r.rim.on_channel_destroy(object(), "1.2.3.4:5"),
    "wipe of an unknown broker": lambda r: r.rim.wipe_write_perm_of_broker("broker-x"),
}

VISIBLE_CHANGE = {
    "new broker": lambda r: r.register("broker-b", 0),
    "new slave": lambda r: r.register("broker-a", 2),
    "slave switches to master": lambda r: r.register("broker-a", 0, broker_addr=A1),
    "changed topic table": lambda r: r.register(
        "broker-a", 0, version=DV2, filters=["10.1.1.1:9999"], table={"TopicTest": TopicConfig("TopicTest", 8, 8)}),
    "filter list changed": lambda r: r.register("broker-a", 0, filters=["10.1.1.2:9999"]),
    "filter list removed": lambda r: r.register("broker-a", 0, filters=[]),
    "unregister slave": lambda r: r.unregister("broker-a", 1),
    "unregister master": lambda r: r.unregister("broker-a", 0),
    "expiry": lambda r: r.rim.scan_not_active_broker(now=500),
    "channel closed": lambda r: r.rim.on_channel_destroy(r.channel(A1), "x"),
    "wipe": lambda r: r.rim.wipe_write_perm_of_broker("broker-a"),
    "delete topic": lambda r: r.rim.delete_topic("TopicTest"),
    "delete topic in cluster": lambda r: r.rim.delete_topic("TopicTest", "DefaultCluster"),
}


def _populated(h):
    routes = h.Routes()
    routes.register("broker-a", 0, filters=["10.1.1.1:9999"], now=0)
    routes.register("broker-a", 1, now=0)
    return routes


@pytest.mark.parametrize("op", NO_VISIBLE_CHANGE.values(), ids=NO_VISIBLE_CHANGE.keys())
def test_generation_stays_when_nothing_visible_changes(h, op):
    routes = _populated(h)
    before, generation = routes.snapshot(), routes.rim.generation
    op(routes)
    assert routes.snapshot() == before
    assert routes.rim.generation == generation


@pytest.mark.parametrize("op", VISIBLE_CHANGE.values(), ids=VISIBLE_CHANGE.keys())
def test_generation_moves_on_every_visible_change(h, op):
    routes = _populated(h)
    before, generation = routes.snapshot(), routes.rim.generation
    op(routes)
    assert routes.snapshot() != before
    assert routes.rim.generation != generation


def test_add_write_perm_after_wipe_moves_generation(routes):
    routes.register()
    routes.rim.wipe_write_perm_of_broker("broker-a")
    generation = routes.rim.generation
    routes.rim.add_write_perm_of_broker("broker-a")
    assert routes.rim.generation != generation and routes.queue("TopicTest").perm == 6


_names = st.sampled_from(["broker-a", "broker-b"])
_ops = st.one_of(
    st.tuples(st.just("register"), _names, st.integers(0, 2), st.sampled_from(["C1", "C2"]),
              st.integers(1, 3), st.sampled_from([None, [], ["f:1"], ["f:2"]]),
              st.lists(st.sampled_from(["T1", "T2", "T3"]), max_size=3), st.integers(4, 7)),
    st.tuples(st.just("unregister"), _names, st.integers(0, 2)),
    st.tuples(st.just("scan"), st.integers(0, 200)),
    st.tuples(st.just("close"), _names, st.integers(0, 2)),
    st.tuples(st.just("wipe"), _names),
    st.tuples(st.just("add"), _names),
    st.tuples(st.just("delete"), st.sampled_from(["T1", "T2"]), st.sampled_from([None, "C1", "C2"])),
    st.tuples(st.just("refresh"), _names, st.integers(0, 2)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_ops, max_size=25))
def test_an_unchanged_generation_always_means_unchanged_routes(h, ops):
    """Property: a cached route body keyed by generation is never stale."""
    routes = h.Routes()
    now = 0.0
    for op in ops:
        now += 10
        before, generation = routes.snapshot(), routes.rim.generation
        kind, *args = op
        if kind == "register":
            name, broker_id, cluster, counter, filters, names, perm = args
            routes.register(name, broker_id, cluster=cluster, version=DataVersion(1, counter),
                            filters=filters, table=h.topics(*names, perm=perm), now=now)
        elif kind == "unregister":
            routes.unregister(args[0], args[1])
        elif kind == "scan":
            routes.rim.scan_not_active_broker(now=now + args[0])
        elif kind == "close":
            routes.rim.on_channel_destroy(routes.channel(h.addr(*args)), "x")
        elif kind == "wipe":
            routes.rim.wipe_write_perm_of_broker(args[0])
        elif kind == "add":
            routes.rim.add_write_perm_of_broker(args[0])
        elif kind == "delete":
            routes.rim.delete_topic(*args)
        elif kind == "refresh":
            routes.rim.update_broker_info_update_timestamp(h.addr(*args), now)
        if routes.rim.generation == generation:
            assert routes.snapshot() == before, op


# --- cost: a removal touches the removed broker's rows only (issue 34) ------------------------------

class _Counting(dict):
    """A table that counts the entries any walk over it visits, and fails past a budget (so the
    walking code of old fails at once rather than after billions of steps)."""

    visited = 0
    budget = 0

    def _count(self, it):
        for x in it:
            _Counting.visited += 1
            if _Counting.visited > _Counting.budget:
                raise AssertionError(f"a walk over the tables passed {_Counting.budget} entries")
            yield x

    def __iter__(self):
        return self._count(super().__iter__())

    def keys(self):
        return list(self._count(super().keys()))

    def values(self):
        return list(self._count(super().values()))

    def items(self):
        return list(self._count(super().items()))


def _silent_brokers(h, count: int):
    """`count` brokers with distinct names, one topic each, all in DefaultCluster; walks of the
    tables are counted from then on."""
    routes = h.Routes()
    for i in range(count):
        name = f"flood-{i}"
        routes.register(name, 0, broker_addr=f"10.9.{i // 250}.{i % 250}:10911", table=h.topics(f"T{i}"),
                        channel=routes.channel("flood"), now=0)
    rim = routes.rim
    for table in ("topic_queue_table", "broker_addr_table", "cluster_addr_table", "broker_live_table",
                  "filter_server_table"):
        setattr(rim, table, _Counting(getattr(rim, table)))
    _Counting.visited = 0
    return routes


@pytest.mark.parametrize("removal", ["unregister", "channel closed"])
def test_removing_one_broker_visits_none_of_the_5000_others(h, removal):
    routes = _silent_brokers(h, 5000)
    routes.register("broker-a", 0, table=h.topics("TopicTest", "T7"), now=0)
    _Counting.visited, _Counting.budget = 0, 50

    if removal == "unregister":
        removed = routes.unregister("broker-a", 0)
    else:
        removed = routes.rim.on_channel_destroy(routes.channel(A0), "x")

    assert (removed.broker_name, removed.broker_name_removed, removed.removed_topics) == ("broker-a", True, ["TopicTest"])
    assert "broker-a" not in routes.rim.broker_addr_table and list(routes.rim.topic_queue_table["T7"]) == ["flood-7"]
    assert _Counting.visited <= 50


def test_a_scan_expiring_5000_silent_brokers_walks_the_live_table_once(h):
    routes = _silent_brokers(h, 5000)
    _Counting.visited, _Counting.budget = 0, 3 * 5000

    removed = routes.rim.scan_not_active_broker(now=121)

    assert len(removed) == 5000 and all(r.broker_name_removed for r, _ in removed)
    assert not routes.rim.broker_addr_table and not routes.rim.topic_queue_table and not routes.rim.cluster_addr_table
    assert _Counting.visited <= 3 * 5000


class _WalkingRouteInfoManager(RouteInfoManager):
    """4.9.8's way, as this manager did it before its indexes: every lookup a walk over the tables,
    in Java's order. The reference the indexed lookups must agree with."""

    def _owner_of(self, broker_addr):
        for broker_name in self.java_broker_names():
            for broker_id in self.java_broker_ids(broker_name):
                if self.broker_addr_table[broker_name].broker_addrs[broker_id] == broker_addr:
                    return self.broker_addr_table[broker_name], broker_id
        return None

    def _cluster_holding(self, broker_name):
        return next((c for c in self.java_clusters() if broker_name in self.cluster_addr_table[c]), None)

    def _remove_topic_by_broker_name(self, broker_name):
        emptied = []
        for topic, queue_map in self.topic_queue_table.items():
            if queue_map.pop(broker_name, None) is not None and not queue_map:
                emptied.append(topic)
        for topic in emptied:
            del self.topic_queue_table[topic]
            self._inner_gone("queues", topic)
        return emptied

    def on_channel_destroy(self, channel, remote_addr):
        matches = [a for a in self.java_order_live() if self.broker_live_table[a].channel is channel]
        broker_addr = matches[0] if matches else remote_addr
        if broker_addr not in self.broker_live_table and not self._owner_of(broker_addr):
            return None
        self.broker_live_table.pop(broker_addr, None)
        return self._remove_broker_addr(broker_addr, "channel_closed")

    def java_order_live(self):
        from nameserver.java_order import hashmap_order
        return hashmap_order(self.broker_live_table, self._capacity["live"])


def _indexes_of(rim) -> tuple:
    """The indexes as the tables say they must be."""
    names_at, clusters_of, topics_of, addrs_on = {}, {}, {}, {}
    for name, bd in rim.broker_addr_table.items():
        for a in bd.broker_addrs.values():
            names_at.setdefault(a, set()).add(name)
    for cluster, names in rim.cluster_addr_table.items():
        for name in names:
            clusters_of.setdefault(name, set()).add(cluster)
    for topic, queue_map in rim.topic_queue_table.items():
        for name in queue_map:
            topics_of.setdefault(name, set()).add(topic)
    for a, live in rim.broker_live_table.items():
        addrs_on.setdefault(live.channel, set()).add(a)
    return names_at, clusters_of, topics_of, addrs_on


def _held_indexes(rim) -> tuple:
    return tuple({k: set(v) for k, v in index.items() if v}
                 for index in (rim._names_at, rim._clusters_of, rim._topics_of, rim._addrs_on))


def _removal(r):
    return None if r is None else (r.broker_addr, r.reason, r.broker_name, r.broker_id, r.cluster_name,
                                   r.broker_name_removed, r.removed_topics)


_shared_names = st.sampled_from(["broker-a", "broker-b", "broker-c"])
_shared_ops = st.one_of(
    # an address may be registered under several names, a name in several clusters, one channel
    # may carry several addresses: the cases where Java's order picks the winner
    st.tuples(st.just("register"), _shared_names, st.integers(0, 1), st.sampled_from(["x:1", "x:2", "x:3"]),
              st.sampled_from(["C1", "C2", "C3"]), st.sampled_from(["ch1", "ch2"]), st.integers(1, 3),
              st.lists(st.sampled_from(["T1", "T2", "T3", "T4"]), max_size=3)),
    st.tuples(st.just("unregister"), _shared_names, st.integers(0, 1), st.sampled_from(["x:1", "x:2", "x:3"]),
              st.sampled_from(["C1", "C2", "C3"])),
    st.tuples(st.just("scan"), st.integers(0, 200)),
    st.tuples(st.just("close"), st.sampled_from(["ch1", "ch2", "ch3"]), st.sampled_from(["x:1", "x:9"])),
    st.tuples(st.just("delete"), st.sampled_from(["T1", "T2"]), st.sampled_from([None, "C1", "C2"])),
    st.tuples(st.just("wipe"), _shared_names),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_shared_ops, max_size=30))
def test_indexed_removals_agree_with_walking_every_table(h, ops):
    """Property: the same results, tables (in their order) and Java-ordered answers as the walks,
    and indexes that hold exactly what the tables say (none left behind to grow)."""
    ours, walking = RouteInfoManager(), _WalkingRouteInfoManager()
    channels = {name: h.Channel(name) for name in ("ch1", "ch2", "ch3")}
    now = 0.0
    for op in ops:
        now += 10
        kind, *args = op
        results = []
        for rim in (ours, walking):
            if kind == "register":
                name, broker_id, broker_addr, cluster, channel, counter, names = args
                result = rim.register_broker(cluster, broker_addr, name, broker_id, "ha", DataVersion(1, counter),
                                             h.topics(*names), None, channels[channel], now)
            elif kind == "unregister":
                name, broker_id, broker_addr, cluster = args
                result = _removal(rim.unregister_broker(cluster, broker_addr, name, broker_id))
            elif kind == "scan":
                result = [(_removal(r), ch) for r, ch in rim.scan_not_active_broker(now + args[0])]
            elif kind == "close":
                result = _removal(rim.on_channel_destroy(channels[args[0]], args[1]))
            elif kind == "delete":
                result = rim.delete_topic(*args)
            else:
                result = rim.wipe_write_perm_of_broker(args[0])
            results.append(result)
        assert results[0] == results[1], op
        for table in ("topic_queue_table", "broker_addr_table", "cluster_addr_table", "broker_live_table",
                      "filter_server_table"):
            assert list(getattr(ours, table).items()) == list(getattr(walking, table).items()), (op, table)
        assert ours.java_cluster_info() == walking.java_cluster_info()
        assert ours.get_all_topic_list() == walking.get_all_topic_list()
        assert _held_indexes(ours) == _indexes_of(ours), op
        assert ours._position.keys() == {(table, key) for table, rows in (
            ("topics", ours.topic_queue_table), ("brokers", ours.broker_addr_table),
            ("clusters", ours.cluster_addr_table), ("live", ours.broker_live_table)) for key in rows}, op
