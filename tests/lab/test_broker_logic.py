"""The broker's decisions without trio: pull answers, consumer groups, the topic table."""

import math

import pytest

from lab.broker.consumer_manager import ConsumerData, ConsumerManager, HeartbeatError, parse_heartbeat
from lab.broker.pull import consumer_offset_reply, decide_pull
from lab.broker.topic_config import TopicConfigManager
from nameserver.protocol import ResponseCode
from nameserver.routes import DataVersion, TopicConfig

OK, NOT_FOUND, RETRY, MOVED = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                               ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED)


def pull(offset, max_offset, *, min_offset=0, max_nums=32, is_slave=False, slave_read_enable=True,
         slave_available=True, lag_threshold=100):
    return tuple(decide_pull(offset=offset, max_nums=max_nums, min_offset=min_offset, max_offset=max_offset,
                             is_slave=is_slave, slave_read_enable=slave_read_enable,
                             slave_available=slave_available, lag_threshold=lag_threshold))


@pytest.mark.parametrize("offset, max_offset, min_offset, expected", [
    (0, 10, 0, (OK, 10, 0, 10)),  # (code, nextBeginOffset, suggestWhichBrokerId, found)
    (8, 50, 0, (OK, 40, 0, 32)),  # at most maxMsgNums
    (10, 10, 0, (NOT_FOUND, 10, 0, 0)),  # up to date: long polling holds it
    (0, 0, 0, (NOT_FOUND, 0, 0, 0)),  # empty queue, first pull
    (5, 0, 0, (MOVED, 0, 0, 0)),  # empty queue, an offset from elsewhere
    (3, 10, 5, (MOVED, 5, 0, 0)),  # before the first message kept
    (12, 10, 0, (MOVED, 0, 0, 0)),  # beyond the end: back to the start when nothing was deleted
    (12, 10, 5, (MOVED, 10, 0, 0)),  # ... and to the end otherwise
])
def test_a_master_answers_a_pull_as_rocketmq_does(offset, max_offset, min_offset, expected):
    assert pull(offset, max_offset, min_offset=min_offset) == expected


def test_a_master_suggests_its_slave_only_to_a_far_lagging_consumer_when_the_slave_can_serve():
    assert pull(0, 500)[2] == 1
    assert pull(500 - 32 - 100, 500)[2] == 0  # exactly at the threshold after this batch
    assert pull(0, 500, slave_available=False)[2] == 0
    assert pull(0, 500, slave_read_enable=False)[2] == 0


def test_a_slave_never_moves_a_consumer_and_sends_it_back_to_the_master_unless_it_lags():
    assert pull(12, 10, is_slave=True) == (RETRY, 12, 0, 0)
    assert pull(10, 10, is_slave=True) == (NOT_FOUND, 10, 0, 0)
    assert pull(0, 10, is_slave=True) == (OK, 10, 0, 10)
    assert pull(0, 500, is_slave=True, slave_available=False) == (OK, 32, 1, 32)
    assert pull(0, 500, is_slave=True, slave_read_enable=False) == (OK, 32, 0, 32)


def test_a_new_group_starts_at_0_while_the_queue_still_starts_there():
    assert consumer_offset_reply(7, 0) == 7
    assert consumer_offset_reply(None, 0) == 0
    assert consumer_offset_reply(None, 3) is None  # 22 QUERY_NOT_FOUND


# --- consumer groups -------------------------------------------------------------------------------

def consumer(group="cg", topics=("T",)):
    return ConsumerData(group, "CONSUME_PASSIVELY", "CLUSTERING", topics)


def test_membership_changes_are_reported_and_repeated_heartbeats_are_not():
    manager = ConsumerManager()
    assert manager.register_consumer(consumer(), "b", "chan-b", now=0)
    assert manager.register_consumer(consumer(), "a", "chan-a", now=0)
    assert not manager.register_consumer(consumer(), "a", "chan-a", now=30)
    assert manager.register_consumer(consumer(topics=("T", "U")), "a", "chan-a", now=30)  # new subscription
    assert manager.get_all_client_id("cg") == ["a", "b"]
    assert manager.get_all_channel("cg") == ["chan-b", "chan-a"]


def test_a_groups_subscriptions_follow_each_heartbeat_even_one_it_has_seen_before():
    def subscriptions(**versions):
        return tuple({"topic": topic, "subVersion": version} for topic, version in versions.items())

    manager, a, b = ConsumerManager(), subscriptions(T=1, U=1), subscriptions(T=2)
    for client, subs, now in (("a", a, 0), ("a", a, 30), ("b", b, 31)):
        manager.register_consumer(consumer(topics=("T", "U"))._replace(subscriptions=subs), client, client, now)
    table = manager.consumer_table["cg"].subscription_table
    assert table == {"T": {"topic": "T", "subVersion": 2}}  # b names T alone, with a newer version
    manager.register_consumer(consumer(topics=("T", "U"))._replace(subscriptions=a), "a", "a", now=60)
    assert table == {"T": {"topic": "T", "subVersion": 2}, "U": {"topic": "U", "subVersion": 1}}  # a's U again


def test_a_reconnected_client_is_listed_once():
    manager = ConsumerManager()
    manager.register_consumer(consumer(), "a", "old", now=0)
    manager.register_consumer(consumer(), "a", "new", now=1)
    assert manager.get_all_client_id("cg") == ["a"]
    assert manager.do_channel_close_event("old") == ["cg"] and manager.get_all_client_id("cg") == ["a"]


def test_closed_unregistered_and_silent_clients_leave():
    manager = ConsumerManager(channel_expired_timeout=120)
    for client, group in (("a", "g1"), ("a", "g2"), ("b", "g1"), ("c", "g1")):
        manager.register_consumer(consumer(group), client, f"chan-{client}", now=0)
    manager.register_consumer(consumer("g1"), "c", "chan-c", now=100)
    assert manager.do_channel_close_event("chan-a") == ["g1", "g2"]
    assert "g2" not in manager.consumer_table
    assert manager.unregister_consumer("g1", "chan-b") and not manager.unregister_consumer("g1", "chan-b")
    assert manager.scan_not_active_channel(now=200) == []
    assert manager.scan_not_active_channel(now=221) == [("g1", "chan-c")]
    assert manager.get_all_client_id("g1") == []


def test_heartbeats_from_java_and_cpp_clients_read_the_same():
    java = {"clientID": "c", "consumerDataSet": [{
        "groupName": "cg", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [{"topic": "T"}, {"topic": "%RETRY%cg"}]}],
        "producerDataSet": [{"groupName": "pg"}]}
    cpp = {"clientID": "c", "consumerDataSet": [{
        "groupName": "cg", "consumeType": 1, "messageModel": 1, "consumeFromWhere": 0,
        "subscriptionDataSet": [{"topic": "T", "subVersion": "1"}, {"topic": "%RETRY%cg"}]}]}
    java_data, cpp_data = parse_heartbeat(java), parse_heartbeat(cpp)
    assert java_data.client_id == cpp_data.client_id == "c"
    assert [c[:5] for c in java_data.consumers] == [c[:5] for c in cpp_data.consumers] == [
        ("cg", "CONSUME_PASSIVELY", "CLUSTERING", ("T", "%RETRY%cg"), "CONSUME_FROM_LAST_OFFSET")]
    assert cpp_data.consumers[0].subscriptions[0]["subVersion"] == 1  # sent as "1"
    assert (java_data.producers, cpp_data.producers) == (("pg",), ())
    assert parse_heartbeat({"clientID": "p", "producerDataSet": [{"groupName": "pg"}]}).consumers == []
    for bad in ({}, {"clientID": "c", "consumerDataSet": [{"groupName": "g", "messageModel": 7}]}, []):
        with pytest.raises(HeartbeatError):
            parse_heartbeat(bad)


# --- topics --------------------------------------------------------------------------------------

def manager(auto_create=True, table=None):
    return TopicConfigManager({} if table is None else table, auto_create_topic_enable=auto_create,
                              default_topic_queue_nums=8, now_ms=1000)


def test_an_unknown_topic_inherits_from_tbw102_and_bumps_the_data_version():
    topics = manager()
    created = topics.create_topic_in_send_message_method("New", "TBW102", 4, 0, now_ms=2000)
    assert created == TopicConfig("New", 4, 4, 6)
    assert topics.data_version == DataVersion(2000, 1) and topics.select("New") == created
    assert topics.create_topic_in_send_message_method("New2", "TBW102", 16, 0, now_ms=2000).write_queue_nums == 8


def test_without_auto_create_or_an_inheritable_default_nothing_is_created():
    assert "TBW102" not in manager(auto_create=False).topic_config_table
    disabled = manager(auto_create=False, table={"TBW102": TopicConfig("TBW102", 8, 8, 7)})
    assert disabled.create_topic_in_send_message_method("New", "TBW102", 4, 0, now_ms=0) is None
    plain = manager(table={"Base": TopicConfig("Base", 8, 8, 6)})
    assert plain.create_topic_in_send_message_method("New", "Base", 4, 0, now_ms=0) is None
    assert plain.data_version == DataVersion(1000, 0)


def test_retry_topics_are_created_once():
    topics = manager()
    assert topics.create_topic_in_send_message_back_method("%RETRY%g", 1, 6, 0, now_ms=5)[1]
    assert not topics.create_topic_in_send_message_back_method("%RETRY%g", 1, 6, 0, now_ms=6)[1]
    assert topics.data_version.counter == 1


def test_a_broker_that_is_not_read_write_registers_its_own_permission_for_every_topic():
    table = {"T": TopicConfig("T", 4, 4, 6, topic_sys_flag=1)}
    topics = manager(table=table)
    assert topics.registered_table(6) is table
    assert {tc.perm for tc in topics.registered_table(4).values()} == {4}
