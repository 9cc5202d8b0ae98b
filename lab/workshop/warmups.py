"""Unit tests of the short building exercises (5 to 9): one pure function each.

Each test takes the learner's function and raises AssertionError saying what a user would notice.
One test, one cause: a wrong answer fails the test named after its mistake, and only that one
(tests/workshop/wrong/ holds the known-wrong answers that prove it). Parameters are exercised with
non-default values wherever the function takes them, so hard-coding RocketMQ's defaults fails.
"""

from __future__ import annotations

import copy
import random


def needs(*tests):
    """The test judges one rule on top of these: when one of them failed, this one is skipped (its
    failure would be the same cause again, under another rule's name)."""
    def mark(test):
        test.needs = tests
        return test
    return mark


# --- exercise 5: the expiry scan's decision --------------------------------------------------------

def _live(**beats):
    from lab.workshop.interfaces import BrokerLiveInfo, DataVersion
    return {addr: BrokerLiveInfo(t, DataVersion(), None, "") for addr, t in beats.items()}


def test_expiry_leaves_the_table_alone(expired_brokers):
    table = _live(a=0.0, b=100.0, c=10.0)
    before = copy.deepcopy(table)
    expired_brokers(table, 120.0, 135.0)
    assert table == before, (f"expired_brokers only chooses: the caller removes (the table went from "
                             f"{sorted(before)} to {sorted(table)})")


@needs(test_expiry_leaves_the_table_alone)
def test_expiry_only_the_silent(expired_brokers):
    got = sorted(expired_brokers(_live(a=0.0, b=100.0), 120.0, 125.0))
    assert got == ["a"], f"only brokers silent past the expiry go: b was heard 25 s ago (got {got})"


@needs(test_expiry_leaves_the_table_alone, test_expiry_only_the_silent)
def test_expiry_boundary(expired_brokers):
    table = _live(a=0.0)
    assert list(expired_brokers(table, 120.0, 120.0)) == [], "a broker heard exactly 120 s ago is not expired yet"
    assert list(expired_brokers(table, 120.0, 120.5)) == ["a"], "a broker silent for 120.5 s (expiry 120 s) must expire"


@needs(test_expiry_leaves_the_table_alone)
def test_expiry_every_silent_one_at_once(expired_brokers):
    got = sorted(expired_brokers(_live(a=0.0, c=10.0), 120.0, 135.0))
    assert got == ["a", "c"], f"every broker past the expiry goes in the same scan: a and c (got {got})"


@needs(test_expiry_leaves_the_table_alone, test_expiry_only_the_silent)
def test_expiry_is_a_parameter(expired_brokers):
    got = sorted(expired_brokers(_live(b=100.0), 20.0, 125.0))
    assert got == ["b"], f"expired_time is the expiry: 25 s of silence is past an expiry of 20 s (got {got})"
    got = sorted(expired_brokers(_live(a=0.0), 300.0, 125.0))
    assert got == [], f"expired_time is the expiry: 125 s of silence is within an expiry of 300 s (got {got})"


# --- exercise 6: queue choice -----------------------------------------------------------------------

def _queues(*brokers, n=4):
    from lab.workshop.interfaces import MessageQueue
    return [MessageQueue("T", b, q) for b in brokers for q in range(n)]


def _index(seed=1):
    from lab.workshop.interfaces import ThreadLocalIndex
    return ThreadLocalIndex(random.Random(seed))


def test_queue_choice_avoids_failed(select_one_message_queue):
    queues, index = _queues("broker-a", "broker-b"), _index()
    picks = [select_one_message_queue(queues, index, "broker-a").broker_name for _ in range(50)]
    assert set(picks) == {"broker-b"}, "a retry after broker-a failed must go to another broker"


def test_queue_choice_round_robin(select_one_message_queue):
    queues, index = _queues("broker-a", "broker-b", "broker-c", n=3), _index()
    picks = {select_one_message_queue(queues, index, None) for _ in range(len(queues))}
    assert picks == set(queues), "a first attempt takes the queues in turn: every queue once per round"


def test_queue_choice_no_alternative(select_one_message_queue):
    queues = _queues("broker-a")
    mq = select_one_message_queue(queues, _index(), "broker-a")
    assert mq in queues, "with one broker only, a retry still gets one of its queues"


# --- exercise 7: NameServer failover order ----------------------------------------------------------

def test_failover_tries_every_one(failover_order):
    for n in (1, 2, 3, 5):
        addrs = [f"ns-{i}:9876" for i in range(n)]
        for index in (0, 1, 5, 998):
            order = list(failover_order(addrs, index))
            assert sorted(order) == sorted(addrs), f"one round tries every NameServer once ({n} of them, index {index}: {order})"


@needs(test_failover_tries_every_one)
def test_failover_starts_after_the_index(failover_order):
    for n in (2, 3, 5):
        addrs = [f"ns-{i}:9876" for i in range(n)]
        for index in (0, 1, 5, 998):
            order = list(failover_order(addrs, index))
            assert order[:1] == [addrs[(index + 1) % n]], \
                f"the round starts after namesrvIndex, as RocketMQ does ({n} NameServers, index {index}: {order})"


@needs(test_failover_tries_every_one, test_failover_starts_after_the_index)
def test_failover_negative_index(failover_order):
    addrs = [f"ns-{i}:9876" for i in range(3)]
    order = list(failover_order(addrs, -5))  # Java's int overflows to negative: abs() keeps it in range
    assert sorted(order) == sorted(addrs) and order[0] == addrs[abs(-5 + 1) % 3], \
        f"a negative namesrvIndex (Java's overflow) still gives one round, from abs(index + 1) (got {order})"


# --- exercise 8: latency fault tolerance ------------------------------------------------------------

LATENCY_MAX = [50, 100, 550, 1000, 2000, 3000, 15000]
NOT_AVAILABLE = [0, 0, 30000, 60000, 120000, 180000, 600000]


def test_ban_steps(compute_not_available_duration):
    for latency, ban in ((10, 0), (100, 0), (550, 30000), (999, 30000), (3000, 180000), (30000, 600000)):
        got = compute_not_available_duration(LATENCY_MAX, NOT_AVAILABLE, latency)
        assert got == ban, f"with RocketMQ's defaults, a {latency} ms send bans its broker for {ban} ms (got {got})"


@needs(test_ban_steps)
def test_ban_uses_its_parameters(compute_not_available_duration):
    latency_max, durations = [10, 200, 5000], [1000, 7000, 90000]
    for latency, ban in ((5, 0), (10, 1000), (250, 7000), (4999, 7000), (30000, 90000)):
        got = compute_not_available_duration(latency_max, durations, latency)
        assert got == ban, (f"the steps are the arguments, not RocketMQ's defaults: with latency_max "
                            f"{latency_max} and not_available_duration {durations}, a {latency} ms send "
                            f"bans for {ban} ms (got {got})")


# --- exercise 9: the compressed register body -------------------------------------------------------

def test_register_body_round_trips(encode_compressed_register_body):
    from lab.workshop.interfaces import DataVersion, RegisterBrokerBody, SerializeType, TopicConfig
    table = {f"T{i}": TopicConfig(f"T{i}", 8, 4, 6, "SINGLE_TAG") for i in range(3)}
    body = encode_compressed_register_body(table, DataVersion(1700000000000, 3), [])
    try:
        decoded = RegisterBrokerBody.decode(body, SerializeType.JSON, compressed=True)
        topics = dict(decoded.topic_config_table)
    except Exception as e:  # what the NameServer would answer: SYSTEM_ERROR, registration refused
        raise AssertionError(f"the NameServer cannot decode the body: {type(e).__name__}: {e}") from None
    assert decoded.data_version == DataVersion(1700000000000, 3), "the NameServer reads the same dataVersion"
    assert topics == table, "the NameServer reads the same topics"


def test_register_body_is_small(encode_compressed_register_body):
    from lab.workshop.interfaces import DataVersion, TopicConfig
    table = {f"GrownTopic{i}": TopicConfig(f"GrownTopic{i}", 4, 4, 6, "SINGLE_TAG") for i in range(10_000)}
    size = len(encode_compressed_register_body(table, DataVersion(1, 1), []))
    assert size < 100_000, f"10,000 topics must shrink below 100 KB to cross a 10 KB/s link in 6 s (got {size} bytes)"
