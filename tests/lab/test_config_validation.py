"""Values that make no sense are refused with one line naming where they were set; a valid file is
taken whole, however its keys depend on each other."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.config import POSITIVE_DURATIONS, ConfigError, LabConfig, load_config

NSLAB = str(Path(sys.executable).with_name("nslab"))


def test_a_file_that_lengthens_two_dependent_lists_is_taken(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text('[producer]\nsendLatencyFaultEnable = true\n'
                    'latencyMax = [50, 100, 550, 1000, 2000, 3000, 15000, 30000]\n'
                    'notAvailableDuration = [0, 0, 30000, 60000, 120000, 180000, 600000, 900000]\n')
    config = load_config(path)
    assert config.producer.latencyMax[-1] == 30000 and config.producer.notAvailableDuration[-1] == 900000


def test_two_overrides_that_depend_on_each_other_are_taken():
    config = load_config(None, ["producer.latencyMax=50,100", "producer.notAvailableDuration=0,30000"])
    assert config.producer.notAvailableDuration == [0, 30000]


def test_a_section_that_stays_inconsistent_is_refused_at_its_line(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text('[cluster]\nnameservers = 2\n\n[producer]\nlatencyMax = [50, 100]\n')
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == (f"{path}:5: [producer] latencyMax: producer.notAvailableDuration must have as many "
                                "entries as producer.latencyMax (it is 0,0,30000,60000,120000,180000,600000)")


@pytest.mark.parametrize("key", POSITIVE_DURATIONS)
def test_a_period_or_timeout_of_zero_is_refused(key):
    with pytest.raises(ConfigError, match=rf"^--set {key}=0s: {key} must be positive \(it is 0\)$"):
        load_config(None, [f"{key}=0s"])


@pytest.mark.parametrize("setting, why", [
    ("cluster.nameservers=0", "cluster.nameservers must be within 1..32 (it is 0)"),
    ("cluster.queuesPerTopic=0", "cluster.queuesPerTopic must be within 1..1024 (it is 0)"),
    ("cluster.slavesPerBroker=10", "cluster.slavesPerBroker must be within 0..9"),
    ("cluster.slavesPerBroker=-1", "cluster.slavesPerBroker must be within 0..9"),
    ("cluster.topics=0", "cluster.topics must be within 1..50000 (or give topicNames) (it is 0)"),
    ("cluster.brokers=", "cluster.brokers must name 1..64 broker groups (it is )"),
    ("broker.brokerPermission=9", "broker.brokerPermission must be a permission within 0..7"),
    ("broker.defaultTopicQueueNums=0", "broker.defaultTopicQueueNums must be within 1..1024 (it is 0)"),
    ("producer.retryTimesWhenSendFailed=-1", "producer.retryTimesWhenSendFailed must be within 0..32 (it is -1)"),
    ("producer.messageSize=0", "producer.messageSize must be within 1..4194304 bytes"),
    ("producer.rate=0", "producer.rate must be positive"),
    ("consumer.pullBatchSize=0", "consumer.pullBatchSize must be within 1..1024"),
    ("network.loss=1.5", "network.loss must be within 0..1"),
])
def test_a_count_or_value_out_of_range_is_refused(setting, why):
    with pytest.raises(ConfigError, match="^" + re.escape(f"--set {setting}: {why}")):
        load_config(None, [setting])


def test_the_defaults_are_valid_and_zero_idle_time_turns_the_idle_close_off():
    LabConfig().validate()
    assert load_config(None, ["nameserver.serverChannelMaxIdleTimeSeconds=0s"]).nameserver.serverChannelMaxIdleTimeSeconds == 0


def test_the_cli_refuses_a_zero_poll_interval_in_one_line():
    result = subprocess.run([NSLAB, "up", "--headless", "--sim", "--set", "client.pollNameServerInterval=0s"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == ("nslab up: --set client.pollNameServerInterval=0s: client.pollNameServerInterval "
                             "must be positive (it is 0)\n")


def _nslab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, timeout=20)


def _refused(result: subprocess.CompletedProcess, line: str) -> None:
    assert (result.returncode, result.stderr) == (2, line + "\n"), result.stderr


@pytest.mark.parametrize("setting, why", [
    # a million topics spun at 100 % CPU deaf to signals; a hundred million NameServers and a 2 GB
    # body ran out of memory; a duration of eleven thousand years was taken
    ("cluster.topics=1000000", "cluster.topics must be within 1..50000 (or give topicNames) (it is 1000000)"),
    ("cluster.nameservers=100000000", "cluster.nameservers must be within 1..32 (it is 100000000)"),
    ("producer.messageSize=2000000000", "producer.messageSize must be within 1..4194304 bytes (RocketMQ refuses "
                                        "an empty body and, by its maxMessageSize, one over 4 MiB) (it is 2000000000)"),
    ("client.pollNameServerInterval=99999999999999h",
     "client.pollNameServerInterval must be within 0..86400 s (a day) (it is 3.6e+17)"),
    ("cluster.producers=100000", "cluster.producers must be within 0..64 (it is 100000)"),
    ("producer.rate=1e9", "producer.rate must be positive, at most 10000 messages per second (it is 1e+09)"),
    ("cluster.queuesPerTopic=5000", "cluster.queuesPerTopic must be within 1..1024 (it is 5000)"),
    ("consumer.consumeFromWhere=CONSUME_FROM_TIMESTAMP", "consumer.consumeFromWhere must be one of "
     "CONSUME_FROM_LAST_OFFSET, CONSUME_FROM_FIRST_OFFSET (it is CONSUME_FROM_TIMESTAMP)"),
    ("cluster.nameservers=1e8", "cluster.nameservers: expected a whole number, got '1e8'"),
    ("cluster.topicNames=Orders,Pay Later", "cluster.topicNames must be RocketMQ topic names: 1..127 of letters, "
                                            "digits, '%', '|', '-', '_' (it is Orders,Pay Later)"),
    ("cluster.brokers=a:b", "cluster.brokers must be names of 1..64 letters, digits, '-', '_' or '.' (it is a:b)"),
])
def test_a_value_out_of_range_is_one_line_naming_key_value_and_range(setting, why):
    began = time.monotonic()
    _refused(_nslab("up", "--headless", "--sim", "--set", setting), f"nslab up: --set {setting}: {why}")
    assert time.monotonic() - began < 10


def test_topics_times_queues_are_bounded_together():
    result = _nslab("up", "--headless", "--sim", "--set", "cluster.topics=50000", "--set", "cluster.queuesPerTopic=16")
    _refused(result, "nslab up: --set cluster.queuesPerTopic=16: cluster.queuesPerTopic × topics × broker groups "
                    "must be at most 400,000 queues in all (here 1,600,000) (it is 16)")


def test_a_known_section_that_is_not_a_table_is_named_as_such(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text("cluster = 5\n")  # it said "unknown section [cluster]"
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == f"{path}:1: cluster must be a table: [cluster] and its keys"
