"""The fault vocabulary reads the same fault from the command line and from a scenario table."""

import pytest

from chaos.faults import FaultError, Vocabulary, parse_rate
from chaos.links import Toxic
from nameserver.config import parse_duration

vocab = Vocabulary(parse_duration)


@pytest.mark.parametrize("words, table", [
    (["kill", "broker-a-0"], {"fault": "kill", "node": "broker-a-0"}),
    (["partition", "ns-0,broker-a-0", "/", "ns-1"], {"fault": "partition", "groups": [["ns-0", "broker-a-0"], ["ns-1"]]}),
    (["partition", "a", "->", "b"], {"fault": "partition", "groups": [["a"], ["b"]], "one_way": True}),
    (["heal"], {"fault": "heal"}),
    (["toxic", "broker-a-0:ns-0", "latency", "latency=2s", "jitter=100ms"],
     {"fault": "toxic", "node": "broker-a-0", "peer": "ns-0", "kind": "latency", "latency": "2s", "jitter": "100ms"}),
    (["toxic", "ns-0", "blackhole"], {"fault": "toxic", "node": "ns-0", "kind": "blackhole"}),
])
def test_words_and_tables_mean_the_same_fault(words, table):
    assert vocab.parse_words(words) == vocab.parse_table(table)


def test_toxic_parameters_are_parsed():
    fault = vocab.parse_words(["toxic", "a:b", "bandwidth", "rate=10k"])
    assert fault.nodes == ("a", "b") and fault.toxic == Toxic("bandwidth", rate=10240)
    assert vocab.parse_words(["toxic", "a", "loss", "probability=0.25"]).toxic.probability == 0.25
    assert fault.describe() == "toxic a b bandwidth 10KiB/s"


@pytest.mark.parametrize("words, message", [
    ([], "no fault given"),
    (["explode", "x"], "unknown fault 'explode'"),
    (["kill"], "kill needs a node"),
    (["heal", "now"], "heal takes no arguments"),
    (["partition", "a"], "two or more groups"),
    (["toxic", "a"], "toxic needs a kind"),
    (["toxic", "a", "lag"], "unknown toxic 'lag'"),
    (["toxic", "a", "bandwidth", "rate=fast"], "bad rate 'fast'"),
])
def test_bad_words_are_clear_errors(words, message):
    with pytest.raises(FaultError, match=message):
        vocab.parse_words(words)


def test_rates():
    assert parse_rate("512") == 512 and parse_rate("1.5m") == 1.5 * 1024 * 1024 and parse_rate("10KiB/s") == 10240
