"""Values that make no sense are refused with one line naming where they were set; a valid file is
taken whole, however its keys depend on each other."""

from __future__ import annotations

import re
import subprocess
import sys
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
    ("cluster.nameservers=0", "cluster.nameservers must be at least 1"),
    ("cluster.queuesPerTopic=0", "cluster.queuesPerTopic must be at least 1"),
    ("cluster.slavesPerBroker=10", "cluster.slavesPerBroker must be within 0..9"),
    ("cluster.slavesPerBroker=-1", "cluster.slavesPerBroker must be within 0..9"),
    ("cluster.topics=0", "cluster.topics must be at least 1 (or give topicNames)"),
    ("cluster.brokers=", "cluster.brokers must name at least one broker group"),
    ("broker.brokerPermission=9", "broker.brokerPermission must be a permission within 0..7"),
    ("broker.defaultTopicQueueNums=0", "broker.defaultTopicQueueNums must be at least 1"),
    ("producer.retryTimesWhenSendFailed=-1", "producer.retryTimesWhenSendFailed must not be negative"),
    ("producer.messageSize=0", "producer.messageSize must be at least 1"),
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
