"""The pure parts of the admin answers: BrokerStats' rates, ProducerManager, and the text formats
4.9.8 uses (StoreStatsService, MixAll, TopicValidator)."""

from lab.broker import admin
from lab.broker.producer_manager import ProducerManager
from lab.broker.stats import BrokerStats
from nameserver.routes import DataVersion


def test_put_tps_is_the_rate_over_the_last_10_60_600_s_divided_by_the_uptime_while_younger():
    stats = BrokerStats(boot=100.0)
    for i in range(20):  # 20 puts at 2/s from t=100 to t=109.5
        stats.on_put(100.0 + i * 0.5, 10)
    # at t=110 (10 s old) the 10 s window holds whole seconds 101..110: 18 puts; the longer
    # windows hold all 20 and divide by the uptime
    assert stats.windows(stats.puts, 110.0) == (1.8, 2.0, 2.0)
    # at t=165: nothing in 156..165; seconds 106..109 (8 puts) in the last minute; all 20 in 65 s
    assert stats.windows(stats.puts, 165.0) == (0.0, 8 / 60, 20 / 65)
    assert admin.tps_text(stats.windows(stats.puts, 165.0)) == "0.0 0.13333333333333333 0.3076923076923077"
    assert (stats.puts.total, stats.put_size_total) == (20, 200)
    young = BrokerStats(boot=100.0)
    young.on_put(100.1, 10)
    assert young.windows(young.puts, 100.2) == (1.0, 1.0, 1.0)  # one put in the first 0.2 s: divided by at least 1 s


def test_gets_count_messages_per_group_and_topic_over_a_minute():
    stats = BrokerStats(boot=0.0)
    stats.on_get(30.0, "cg", "T", 32)
    stats.on_get(31.0, "other", "T", 5)
    assert stats.gets.total == 37
    assert stats.group_get_tps(60.0, "cg", "T") == 32 / 60
    assert stats.group_get_tps(200.0, "cg", "T") == 0.0
    assert stats.group_get_tps(60.0, "cg", "Unknown") == 0.0


def test_producers_leave_with_their_connection_an_unregister_or_120_s_of_silence():
    producers = ProducerManager()
    producers.register_producer("pg", "c1", "ch1", 0.0, "CPP", 317)
    producers.register_producer("pg", "c2", "ch2", 100.0)
    assert [i.client_id for i in producers.group_channel_table.get("pg").values()] == ["c1", "c2"]
    assert producers.scan_not_active_channel(121.0) == [("pg", "ch1")]
    producers.do_channel_close_event("ch2")
    assert producers.group_channel_table.get("pg") is None  # an empty group is gone: "not exist"


def test_java_text_formats():
    assert admin.human_readable_byte_count(0) == "0 B"
    assert admin.human_readable_byte_count(1536) == "1.5 KiB"
    assert admin.human_readable_byte_count(5 * 1024 ** 3) == "5.0 GiB"
    assert admin.format_runtime(90_061_000) == "[ 1 days, 1 hours, 1 minutes, 1 seconds ]"
    assert admin.data_version_json(DataVersion(1700000000000, 3)) == '{"counter":3,"timestamp":1700000000000}'
    assert admin.properties_text({"b": True, "a": 1, "c": None}) == "a=1\nb=true\n"


def test_topic_names_as_topic_validator_takes_them():
    reserved = ("DefaultCluster", "broker-a")
    assert admin.check_topic("Topic_1-a|%x", reserved) is None
    assert admin.check_topic("   ", reserved) == "The specified topic is blank."
    assert admin.check_topic(None, reserved) == "The specified topic is blank."
    assert admin.check_topic("OFFSET_MOVED_EVENT", reserved) == "The topic[OFFSET_MOVED_EVENT] is conflict with system topic."


def test_a_count_for_an_earlier_second_lands_in_that_second():
    # A coasting pull's empty answers are counted when someone looks, each at its own second.
    stats = BrokerStats(boot=0.0)
    stats.on_pull(100.5, False)
    stats.on_pull(130.2, False)
    stats.on_pull(115.7, False)  # counted late, for second 115
    assert stats.pulls_miss.total == 3
    assert stats.windows(stats.pulls_miss, 130.9)[0] == 0.1  # 130 alone in the last 10 s
    assert stats.windows(stats.pulls_miss, 130.9)[1] == 3 / 60  # 100, 115 and 130 in the last 60 s
    assert stats.windows(stats.pulls_miss, 710.0)[2] == 2 / 600  # the last 600 s, from 111: 115 and 130


def test_renewals_counted_at_once_read_as_counted_one_by_one():
    # A coasting pull's renewals are counted together when someone looks (a drain: 40 each).
    renewals = [100.2 + 15.003 * i for i in range(200)]  # 3,000 s: old seconds are pruned on the way
    one_by_one, at_once = BrokerStats(boot=0.0), BrokerStats(boot=0.0)
    for at in renewals:
        one_by_one.on_pull(at, False)
    at_once.on_pulls_missed(renewals)
    assert at_once.pulls_miss.total == one_by_one.pulls_miss.total == 200
    for now in (renewals[-1], renewals[-1] + 5, renewals[-1] + 300):
        assert at_once.windows(at_once.pulls_miss, now) == one_by_one.windows(one_by_one.pulls_miss, now) != (0.0, 0.0, 0.0)


def test_disk_ratio_is_used_over_used_plus_usable_rounded_up_to_a_percent(monkeypatch):
    """UtilAll.getDiskPartitionSpaceUsedPercent: blocks reserved for root count neither as used nor
    as usable. A disk of 1000 blocks, 234 in use, 534 usable (232 reserved): 234/768 = 0.3047 ->
    0.31, where (total - usable) / total said 0.466."""
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(1000, 234, 534))
    assert admin.disk_used_ratio("/anywhere") == 0.31
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(1000, 250, 750))
    assert admin.disk_used_ratio("/anywhere") == 0.25  # exact: no rounding up


def test_broker_config_keys_are_4_9_8_s_four_config_classes():
    from lab.broker import broker_config_keys as keys

    # 187 fields, writeBufferHigh/LowWaterMark in both Netty classes: 185 keys
    assert (len(keys.FIELDS), len(keys.DEFAULTS)) == (187, 185)
    configs = keys.all_configs({"brokerName": "broker-a", "haMasterAddress": None}, cpus=2)
    assert "haMasterAddress" not in configs and configs["brokerName"] == "broker-a"
    assert (configs["sendMessageThreadPoolNums"], configs["pullMessageThreadPoolNums"]) == (2, 20)
    assert configs["mappedFileSizeCommitLog"] == 1024 ** 3 and configs["consumerFallbehindThreshold"] == 16 * 1024 ** 3
    assert keys.parse_value("traceOn", "TRUE") is True and keys.parse_value("fileReservedTime", " 48") == 48


def test_properties_text_from_mqadmin_is_read_as_java_properties():
    assert admin.parse_properties("# comment\nbrokerPermission=4\n  fileReservedTime : 48\nmsgTraceTopicName=a\\=b\n") == {
        "brokerPermission": "4", "fileReservedTime": "48", "msgTraceTopicName": "a=b"}
