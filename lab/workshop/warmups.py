"""Unit tests of the short building exercises (5 to 9): one pure function each.

Each test takes the learner's function and raises AssertionError saying what a user would notice.
One test, one cause: a wrong answer fails the test named after its mistake, and only that one
(tests/workshop/wrong/ holds the known-wrong answers that prove it). Parameters are exercised with
non-default values wherever the function takes them, so hard-coding RocketMQ's defaults fails.

Each rule is judged as a property over inputs Hypothesis generates from the whole space a cluster
produces (any number of brokers, queues and addresses, 1 included; times on the expiry's boundary;
counters near and past Java's int wrap; latencies on the thresholds; empty and unicode topic
tables), with the settings of generated.py. The expected values are RocketMQ 4.9.8's rules, written
out here, never the lab's own implementation of the function being built.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from . import generated


def needs(*tests):
    """The test judges one rule on top of these: when one of them failed, this one is skipped (its
    failure would be the same cause again, under another rule's name)."""
    def mark(test):
        test.needs = tests
        return test
    return mark


def _checks(max_examples: int) -> settings:
    # The first failure found is the message: two at once (a raise and a wrong answer) would reach
    # the learner as one ExceptionGroup instead of the cause.
    return settings(generated.checks(max_examples), report_multiple_bugs=False)


def _case(text: str) -> str:
    return f"\n    {generated.the_case('case')}: {text}"


# --- exercise 5: the expiry scan's decision --------------------------------------------------------
# RouteInfoManager.scanNotActiveBroker: a broker is expired when last update + brokerChannelExpiredTime
# < now, strictly. Times are quarter seconds, so every sum below is exact in floating point.

DEFAULT_EXPIRY = 120.0  # brokerChannelExpiredTime's default, what the rules other than the parameter's use

_time = st.integers(0, 4 * 10 ** 7).map(lambda q: q / 4)
_expiry = st.integers(1, 4 * 3600).map(lambda q: q / 4)


def _addr(i: int) -> str:
    return f"10.0.{i // 250}.{i % 250 + 1}:10911"


def _live(beats: dict):
    from lab.workshop.interfaces import BrokerLiveInfo, DataVersion
    return {addr: BrokerLiveInfo(t, DataVersion(), None, "") for addr, t in beats.items()}


_ago = st.integers(0, 4 * 10 ** 5).map(lambda q: q / 4)


@st.composite
def _scans(draw, expiry=None, boundary=True):
    """A live table, an expiry and a scan's now; each broker heard any time before now, most often
    just before, on or just after the expiry. boundary=False: none exactly on it (the boundary's
    own test judges that)."""
    expired_time = draw(_expiry) if expiry is None else expiry
    now = draw(_time) + 10 ** 6
    beats = {}
    for i in draw(st.lists(st.integers(0, 999), max_size=8, unique=True)):
        ago = max(0.0, draw(st.one_of(st.integers(-8, 8).map(lambda q: expired_time + q / 4), _ago)))
        if not boundary and ago == expired_time:
            ago += 0.25
        beats[_addr(i)] = now - ago
    return beats, expired_time, now


def _silent(beats, expired_time, now):
    return {addr for addr, t in beats.items() if t + expired_time < now}


def _s(seconds: float) -> str:
    return f"{seconds:.2f}".rstrip("0").rstrip(".")


def _show(beats, expired_time, now):
    heard = ", ".join(f"{a} heard {_s(now - t)} s ago" for a, t in beats.items()) or "an empty table"
    return f"expired_time {_s(expired_time)} s, now {_s(now)}: {heard}"


def test_expiry_leaves_the_table_alone(expired_brokers):
    @_checks(15)
    @given(_scans())
    def scans(scan):
        beats, expired_time, now = scan
        table = _live(beats)
        expired_brokers(table, expired_time, now)
        assert table == _live(beats), (f"expired_brokers only chooses: the caller removes (the table went "
                                       f"from {sorted(beats)} to {sorted(table)})" + _case(_show(*scan)))
    scans()


@needs(test_expiry_leaves_the_table_alone)
def test_expiry_only_the_silent(expired_brokers):
    @_checks(12)
    @given(_scans(expiry=DEFAULT_EXPIRY, boundary=False))
    def scans(scan):
        got = set(expired_brokers(_live(scan[0]), *scan[1:]))
        extra = sorted(got - _silent(*scan))
        assert not extra, (f"only brokers silent past the expiry go: {extra} were heard within "
                           f"{_s(scan[1])} s" + _case(_show(*scan)))
    scans()


@needs(test_expiry_leaves_the_table_alone, test_expiry_only_the_silent)
def test_expiry_boundary(expired_brokers):
    @st.composite
    def edges(draw):
        # One broker on the edge (now = its last update + 120 s + past); the others heard at or
        # after the moment that would expire it, so it is the only one that may go.
        t, past = draw(_time), draw(st.sampled_from((0.0, 0.0, 0.25, 0.5, 1.0)))
        others = draw(st.lists(st.integers(0, 4 * 120).map(lambda q: t + past + q / 4), max_size=6))
        beats = {_addr(i): u for i, u in enumerate([t, *others])}
        return beats, DEFAULT_EXPIRY, t + DEFAULT_EXPIRY + past

    @_checks(12)
    @given(edges())
    def scans(scan):
        beats, expired_time, now = scan
        got = sorted(expired_brokers(_live(beats), expired_time, now))
        want = sorted(_silent(*scan))
        on_edge = sorted(a for a, t in beats.items() if t + expired_time == now)
        assert not set(on_edge) & set(got), (f"a broker heard exactly {_s(expired_time)} s ago is not expired yet "
                                             f"(got {got})" + _case(_show(*scan)))
        assert got == want, (f"a broker silent for longer than {_s(expired_time)} s must expire: {want} "
                             f"(got {got})" + _case(_show(*scan)))
    scans()


@needs(test_expiry_leaves_the_table_alone)
def test_expiry_every_silent_one_at_once(expired_brokers):
    @_checks(12)
    @given(_scans(expiry=DEFAULT_EXPIRY, boundary=False))
    def scans(scan):
        got = set(expired_brokers(_live(scan[0]), *scan[1:]))
        missed = sorted(_silent(*scan) - got)
        assert not missed, (f"every broker past the expiry goes in the same scan: {missed} stayed "
                            f"(got {sorted(got)})" + _case(_show(*scan)))
    scans()


@needs(test_expiry_leaves_the_table_alone, test_expiry_only_the_silent)
def test_expiry_is_a_parameter(expired_brokers):
    @_checks(15)
    @given(_scans(boundary=False))
    def scans(scan):
        got = set(expired_brokers(_live(scan[0]), *scan[1:]))
        silent = _silent(*scan)
        assert got <= silent, (f"expired_time is the expiry: {sorted(got - silent)} were heard within "
                               f"{_s(scan[1])} s" + _case(_show(*scan)))
        assert got or not silent, (f"expired_time is the expiry: {sorted(silent)} were silent for longer than "
                                   f"{_s(scan[1])} s (got none)" + _case(_show(*scan)))
    scans()


# --- exercise 6: queue choice -----------------------------------------------------------------------
# TopicPublishInfo.selectOneMessageQueue: a first attempt takes queue (counter % n) after stepping
# the topic's counter (ThreadLocalIndex: a 31-bit counter that wraps to 0); a retry steps it up to
# n times for a queue off the broker that failed, and falls back to the plain choice.

POSITIVE_MASK = 0x7FFFFFFF
BROKERS = [f"broker-{c}" for c in "abcde"]

# anywhere, but often just before the counter's wrap
_start = st.one_of(st.integers(0, POSITIVE_MASK), st.integers(POSITIVE_MASK - 40, POSITIVE_MASK))


@st.composite
def _topic(draw, brokers=(1, 5)):
    """A topic's queue list as a route gives it: each broker's queues in order, any count each."""
    from lab.workshop.interfaces import MessageQueue
    names = BROKERS[:draw(st.integers(*brokers))]
    topic = draw(st.sampled_from(("TopicTest", "%RETRY%group", "主题")))
    return [MessageQueue(topic, b, q) for b in names for q in range(draw(st.integers(1, 8)))]


def _index(start: int):
    from lab.workshop.interfaces import ThreadLocalIndex
    index = ThreadLocalIndex(random.Random(0))
    index.index = start  # the counter's state (its random start is drawn here instead)
    return index


def _where(queues, start):
    return f"{len(queues)} queues on {sorted({q.broker_name for q in queues})}, counter at {start}"


def test_queue_choice_avoids_failed(select_one_message_queue):
    @_checks(12)
    @given(_topic(brokers=(2, 5)), _start, st.integers(0, 4), st.integers(1, 6))
    def retries(queues, start, failed, picks):
        brokers = sorted({q.broker_name for q in queues})
        last = brokers[failed % len(brokers)]
        index = _index(start)
        for k in range(picks):
            mq = select_one_message_queue(queues, index, last)
            assert mq in queues and mq.broker_name != last, (
                f"a retry after {last} failed must go to another broker (retry {k + 1} got {mq})"
                + _case(_where(queues, start)))
    retries()


def test_queue_choice_round_robin(select_one_message_queue):
    @_checks(12)
    @given(_topic(), _start, st.integers(1, 12))
    def firsts(queues, start, picks):
        index = _index(start)
        for k in range(1, picks + 1):
            mq = select_one_message_queue(queues, index, None)
            counter = (start + k) & POSITIVE_MASK
            want = queues[counter % len(queues)]
            assert mq == want, (f"a first attempt takes the queues in turn: the counter steps once per pick "
                                f"(wrapping past {POSITIVE_MASK} to 0) and pick {k} takes queue {counter} % "
                                f"{len(queues)}, {want} (got {mq})" + _case(_where(queues, start)))
    firsts()


def test_queue_choice_no_alternative(select_one_message_queue):
    @_checks(6)
    @given(_topic(brokers=(1, 1)), _start)
    def retries(queues, start):
        mq = select_one_message_queue(queues, _index(start), queues[0].broker_name)
        assert mq in queues, (f"with one broker only, a retry still gets one of its queues (got {mq})"
                              + _case(_where(queues, start)))
    retries()


# --- exercise 7: NameServer failover order ----------------------------------------------------------
# NettyRemotingClient.getAndCreateNameserverChannel: one round over the list, the k-th try at
# abs(namesrvIndex + k) % n, k = 1..n. namesrvIndex is a Java int: past 2^31 - 1 it is negative.

_addrs = st.lists(st.integers(0, 999), min_size=1, max_size=7, unique=True).map(
    lambda ids: [f"10.1.{i // 250}.{i % 250 + 1}:9876" for i in ids])
_non_negative = st.one_of(st.integers(0, 2000), st.integers(0, 2 ** 31 - 1))
_negative = st.one_of(st.integers(-2000, -1), st.integers(-2 ** 31, -1))


def _round(addrs, index):
    return [addrs[abs(index + k) % len(addrs)] for k in range(1, len(addrs) + 1)]


def test_failover_tries_every_one(failover_order):
    @_checks(12)
    @given(_addrs, st.one_of(_non_negative, _negative))
    def rounds(addrs, index):
        order = list(failover_order(addrs, index))
        assert sorted(order) == sorted(addrs), (f"one round tries every NameServer once ({len(addrs)} of them, "
                                                f"index {index}: {order})" + _case(f"{addrs}, index {index}"))
    rounds()


@needs(test_failover_tries_every_one)
def test_failover_starts_after_the_index(failover_order):
    @_checks(12)
    @given(_addrs, _non_negative)
    def rounds(addrs, index):
        order = list(failover_order(addrs, index))
        assert order == _round(addrs, index), (
            f"the round starts after namesrvIndex and goes in turn, as RocketMQ does ({len(addrs)} NameServers, "
            f"index {index}: {_round(addrs, index)}, got {order})" + _case(f"{addrs}, index {index}"))
    rounds()


@needs(test_failover_tries_every_one, test_failover_starts_after_the_index)
def test_failover_negative_index(failover_order):
    @_checks(12)
    @given(_addrs, _negative)
    def rounds(addrs, index):
        order = list(failover_order(addrs, index))
        assert order == _round(addrs, index), (
            f"a negative namesrvIndex (Java's int past its maximum) still gives one round, the k-th try at "
            f"abs(index + k) % {len(addrs)}: {_round(addrs, index)} (got {order})" + _case(f"{addrs}, index {index}"))
    rounds()


# --- exercise 8: latency fault tolerance ------------------------------------------------------------
# MQFaultStrategy.computeNotAvailableDuration: from the last step down, the first latencyMax[i] the
# latency reaches (>=) gives notAvailableDuration[i]; below every step, 0.

LATENCY_MAX = [50, 100, 550, 1000, 2000, 3000, 15000]
NOT_AVAILABLE = [0, 0, 30000, 60000, 120000, 180000, 600000]


def _ban(latency_max, not_available_duration, latency):
    for i in reversed(range(len(latency_max))):
        if latency >= latency_max[i]:
            return not_available_duration[i]
    return 0


def _latencies(steps):
    """Any latency, most often on a step or one ms either side of it."""
    near = [max(0, s + d) for s in steps for d in (-1, 0, 1)]
    return st.one_of(st.sampled_from(near), st.integers(0, 120_000)) if near else st.integers(0, 120_000)


def test_ban_steps(compute_not_available_duration):
    @_checks(12)
    @given(_latencies(LATENCY_MAX))
    def sends(latency):
        ban, got = _ban(LATENCY_MAX, NOT_AVAILABLE, latency), compute_not_available_duration(
            LATENCY_MAX, NOT_AVAILABLE, latency)
        assert got == ban, (f"with RocketMQ's defaults, a {latency} ms send bans its broker for {ban} ms (got {got})"
                            + _case(f"latency {latency} ms"))
    sends()


@needs(test_ban_steps)
def test_ban_uses_its_parameters(compute_not_available_duration):
    @st.composite
    def steps(draw):
        latency_max = sorted(draw(st.lists(st.integers(0, 60_000), max_size=7, unique=True)))
        durations = draw(st.lists(st.integers(0, 10 ** 6), min_size=len(latency_max), max_size=len(latency_max)))
        return latency_max, durations, draw(_latencies(latency_max))

    @_checks(15)
    @given(steps())
    def sends(case):
        latency_max, durations, latency = case
        ban, got = _ban(*case), compute_not_available_duration(latency_max, durations, latency)
        assert got == ban, (f"the steps are the arguments, not RocketMQ's defaults: with latency_max "
                            f"{latency_max} and not_available_duration {durations}, a {latency} ms send "
                            f"bans for {ban} ms (got {got})" + _case(f"latency {latency} ms"))
    sends()


# --- exercise 9: the compressed register body -------------------------------------------------------
# RegisterBrokerBody.encode(compress=true) / decode: the NameServer must read back the dataVersion,
# every topic's five encoded fields, and the filter server list. A topic name never holds a space
# (the encoding separates fields with one), so the generated names are any other text.

_name = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=" "), max_size=24)


@st.composite
def _bodies(draw):
    from lab.workshop.interfaces import DataVersion, TopicConfig
    names = draw(st.lists(_name, max_size=12, unique=True))
    table = {n: TopicConfig(n, draw(st.integers(0, 1024)), draw(st.integers(0, 1024)), draw(st.integers(0, 7)),
                            draw(st.sampled_from(("SINGLE_TAG", "MULTI_TAG")))) for n in names}
    version = DataVersion(draw(st.integers(0, 2 ** 63 - 1)), draw(st.integers(0, 2 ** 63 - 1)))
    filters = draw(st.lists(st.integers(1, 250).map(lambda i: f"10.2.0.{i}:30000"), max_size=3))
    return table, version, filters


def test_register_body_round_trips(encode_compressed_register_body):
    from lab.workshop.interfaces import RegisterBrokerBody, SerializeType

    @_checks(8)
    @given(_bodies())
    def bodies(case):
        table, version, filters = case
        body = encode_compressed_register_body(table, version, filters)
        shown = _case(f"{len(table)} topics {sorted(table)[:4]}, {version}, filter servers {filters}")
        try:
            decoded = RegisterBrokerBody.decode(body, SerializeType.JSON, compressed=True)
            topics = dict(decoded.topic_config_table)
        except Exception as e:  # what the NameServer would answer: SYSTEM_ERROR, registration refused
            raise AssertionError(f"the NameServer cannot decode the body: {type(e).__name__}: {e}" + shown) from None
        assert decoded.data_version == version, "the NameServer reads the same dataVersion" + shown
        assert topics == table, "the NameServer reads the same topics" + shown
        assert list(decoded.filter_server_list) == filters, "the NameServer reads the same filter servers" + shown
    bodies()


def test_register_body_is_small(encode_compressed_register_body):
    from lab.workshop.interfaces import DataVersion, TopicConfig
    table = {f"GrownTopic{i}": TopicConfig(f"GrownTopic{i}", 4, 4, 6, "SINGLE_TAG") for i in range(10_000)}
    size = len(encode_compressed_register_body(table, DataVersion(1, 1), []))
    assert size < 100_000, f"10,000 topics must shrink below 100 KB to cross a 10 KB/s link in 6 s (got {size} bytes)"
