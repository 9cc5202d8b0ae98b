"""The clients' decisions, without trio: NameServer choice, route cache, queue choice, retries,
latency fault tolerance, rebalance."""

import random

import pytest

from lab.clients.errors import MQBrokerError, MQClientError, NoRouteInfoError, RemotingConnectError
from lab.clients.namesrv import (
    NamesrvSelector, addrs_from_address_server, namesrv_source, parse_http_reply, parse_namesrv_addr, ws_addr,
)
from lab.clients.rebalance import allocate_averagely
from lab.clients.route_cache import (
    KeyedDraws, MessageQueue, RouteCache, TopicPublishInfo, publish_queues, subscribe_queues)
from lab.clients.selection import (
    MQFaultStrategy, ThreadLocalIndex, is_retryable, remaining_budget, select_one_message_queue,
)
from nameserver.client import RemotingTimeoutError
from nameserver.routes import BrokerData, QueueData, TopicRouteData

TOPIC = "TopicTest"
LATENCY_MAX = [50, 100, 550, 1000, 2000, 3000, 15000]
NOT_AVAILABLE_DURATION = [0, 0, 30000, 60000, 120000, 180000, 600000]


def addr(broker_name, broker_id=0):
    return f"10.0.{broker_id}.{ord(broker_name[-1]) - ord('a') + 1}:10911"


def route(*brokers, queues=4, perm=6, ids=(0, 1), order_topic_conf=None):
    """A route over `brokers` (names); each has the broker ids `ids`."""
    return TopicRouteData(
        [QueueData(b, queues, queues, perm, 0) for b in brokers],
        [BrokerData("DefaultCluster", b, {i: addr(b, i) for i in ids}) for b in brokers],
        {}, order_topic_conf)


# --- NameServer addresses and choice -------------------------------------------------------------------

def test_namesrv_addr_list_splits_on_semicolons_and_drops_http_prefix():
    assert parse_namesrv_addr(" a:9876; http://b:9876 ;;") == ["a:9876", "b:9876"]


def test_address_sources_in_order_explicit_property_env_then_address_server():
    env = {"NAMESRV_ADDR": "env:9876"}
    props = {"rocketmq.namesrv.addr": "prop:9876"}
    assert namesrv_source("x:1;y:2", properties=props, env=env).addrs == ["x:1", "y:2"]
    assert namesrv_source(["x:1"], env=env).addrs == ["x:1"]
    assert namesrv_source(None, properties=props, env=env).addrs == ["prop:9876"]
    assert namesrv_source(None, env=env).addrs == ["env:9876"]
    fallback = namesrv_source(None, env={})
    assert fallback.addrs == [] and fallback.ws_addr == "http://jmenv.tbsite.net:8080/rocketmq/nsaddr"
    custom = namesrv_source("", properties={"rocketmq.namesrv.domain": "ws:7070",
                                            "rocketmq.namesrv.domain.subgroup": "lab"})
    assert custom.ws_addr == "http://ws:7070/rocketmq/lab"


def test_address_server_url_with_a_unit():
    assert ws_addr("ws", "nsaddr", "unit1") == "http://ws:8080/rocketmq/nsaddr-unit1?nofix=1"


def test_address_server_reply_is_the_first_line_of_a_200_body():
    assert addrs_from_address_server(200, b"  a:9876;b:9876\r\nignored\n") == ["a:9876", "b:9876"]
    assert addrs_from_address_server(404, b"a:9876") is None
    assert addrs_from_address_server(200, b"\n") is None
    assert parse_http_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\na:9876") == (200, b"a:9876")
    assert parse_http_reply(b"garbage") == (0, b"")


def test_namesrv_choice_starts_at_a_seeded_random_index_and_goes_round_once():
    addrs = ["ns-a:9876", "ns-b:9876", "ns-c:9876"]
    picks = []
    for seed in range(12):
        selector = NamesrvSelector(random.Random(seed))
        selector.update_addr_list(addrs)
        round_ = list(selector.candidates())
        assert sorted(round_) == sorted(addrs), "one round tries every NameServer once"
        picks.append(round_[0])
        again = NamesrvSelector(random.Random(seed))
        again.update_addr_list(addrs)
        assert list(again.candidates()) == round_, "the same seed, the same order"
    assert len(set(picks)) > 1, "different clients start at different NameServers"


def test_namesrv_choice_is_sticky_while_the_channel_is_ok_and_moves_on_after():
    selector = NamesrvSelector(random.Random(1))
    selector.update_addr_list(["a:1", "b:2", "c:3"])
    first = next(selector.candidates())
    assert selector.is_sticky(lambda a: True) and selector.chosen == first
    assert not selector.is_sticky(lambda a: a != first)
    second = next(selector.candidates())
    assert second != first and selector.chosen == second


def test_a_new_address_list_is_shuffled_and_drops_a_choice_it_no_longer_has():
    selector = NamesrvSelector(random.Random(3))
    assert selector.update_addr_list(["a:1", "b:2"])
    chosen = next(selector.candidates())
    assert not selector.update_addr_list(["b:2", "a:1"]), "same members: no change"
    assert selector.chosen == chosen
    assert selector.update_addr_list([chosen, "c:3"]) and selector.chosen == chosen
    assert selector.update_addr_list(["d:4"]) and selector.chosen is None


# --- route cache ----------------------------------------------------------------------------------------

def test_a_client_that_never_had_a_route_fails_clearly():
    assert str(NoRouteInfoError(TOPIC, "cannot reach any NameServer")) == (
        f"No route info of this topic: {TOPIC} (cannot reach any NameServer)")


def test_a_fetch_replaces_the_cached_route_and_a_failed_one_keeps_it():
    cache = RouteCache()
    assert cache.update(TOPIC, route("broker-a", "broker-b"))
    assert not cache.update(TOPIC, route("broker-b", "broker-a")), "same route, other order: no change"
    assert cache.update(TOPIC, route("broker-a"))
    # A failed fetch (TOPIC_NOT_EXIST, error, timeout) calls no update: the last good route stays.
    assert [qd.broker_name for qd in cache.topic_route_table[TOPIC].queue_datas] == ["broker-a"]


def test_broker_addresses_follow_routes_and_offline_ones_are_cleaned():
    cache = RouteCache()
    cache.update(TOPIC, route("broker-a", "broker-b"))
    assert cache.find_broker_address_in_publish("broker-b") == addr("broker-b")
    cache.clean_offline_broker()  # every address still in a route: nothing to clean
    assert cache.find_broker_address_in_publish("broker-b") == addr("broker-b")
    cache.update(TOPIC, route("broker-a"))
    cache.clean_offline_broker()  # the route changed since the last clean: broker-b goes
    assert cache.find_broker_address_in_publish("broker-b") is None
    assert cache.find_broker_address_in_publish("broker-a") == addr("broker-a")


def test_publish_queues_need_write_perm_and_a_master_and_are_sorted_by_broker():
    r = TopicRouteData(
        [QueueData("broker-c", 2, 2, 6, 0), QueueData("broker-a", 2, 3, 6, 0),
         QueueData("broker-b", 2, 2, 4, 0), QueueData("broker-d", 2, 2, 6, 0)],
        [BrokerData("c", "broker-a", {0: addr("broker-a")}), BrokerData("c", "broker-b", {0: addr("broker-b")}),
         BrokerData("c", "broker-c", {0: addr("broker-c")}), BrokerData("c", "broker-d", {1: addr("broker-d", 1)})],
        {})
    assert [str(mq) for mq in publish_queues(TOPIC, r)] == [
        "broker-a:0", "broker-a:1", "broker-a:2", "broker-c:0", "broker-c:1"]
    # reading needs READ perm only: the read-only broker-b and the slave-only broker-d serve pulls
    assert {mq.broker_name for mq in subscribe_queues(TOPIC, r)} == {"broker-a", "broker-b", "broker-c", "broker-d"}


def test_a_route_with_only_a_slave_takes_no_sends_but_serves_pulls_from_the_slave():
    r = route("broker-a", ids=(1,))
    info = TopicPublishInfo(TOPIC, r)
    assert not info.ok()
    assert len(subscribe_queues(TOPIC, r)) == 4
    cache = RouteCache()
    cache.update(TOPIC, r)
    assert cache.find_broker_address_in_publish("broker-a") is None
    found = cache.find_broker_address_in_subscribe("broker-a", 0, only_this_broker=False)
    assert found == (addr("broker-a", 1), True)
    assert cache.find_broker_address_in_subscribe("broker-a", 0, only_this_broker=True) is None


def test_order_topic_conf_replaces_queue_datas_for_sends():
    r = route("broker-a", "broker-b", order_topic_conf="broker-b:2;broker-a:1")
    assert [str(mq) for mq in publish_queues(TOPIC, r)] == ["broker-b:0", "broker-b:1", "broker-a:0"]


def test_pull_address_follows_the_suggested_broker_id():
    cache = RouteCache()
    cache.update(TOPIC, route("broker-a", ids=(0, 1, 2)))
    assert cache.find_broker_address_in_subscribe("broker-a", 0, False) == (addr("broker-a", 0), False)
    assert cache.find_broker_address_in_subscribe("broker-a", 2, False) == (addr("broker-a", 2), True)
    cache.update(TOPIC, route("broker-a", ids=(0, 2)))
    # a suggested slave that is gone: the next slave id
    assert cache.find_broker_address_in_subscribe("broker-a", 1, True) == (addr("broker-a", 2), True)


def test_consumer_list_is_asked_of_a_master_when_the_broker_has_one():
    cache = RouteCache()
    cache.update(TOPIC, route("broker-a", "broker-b"))
    rng = random.Random(0)
    assert {cache.find_broker_addr_by_topic(TOPIC, rng) for _ in range(20)} == {addr("broker-a"), addr("broker-b")}
    assert cache.find_broker_addr_by_topic("Other", rng) is None


def test_a_keyed_pick_is_a_question_asked_again_with_the_same_answer():
    # A rebalance round's picks are drawn by key (its round, the topic): the simulator may ask
    # them ahead of the round's calls, and the round then picks the same brokers.
    cache = RouteCache()
    cache.update(TOPIC, route("broker-a", "broker-b", "broker-c"))
    picks = [cache.find_broker_addr_by_topic(TOPIC, KeyedDraws(f"seed:group:{n}:{TOPIC}")) for n in range(60)]
    assert picks == [cache.find_broker_addr_by_topic(TOPIC, KeyedDraws(f"seed:group:{n}:{TOPIC}"))
                     for n in range(60)]
    assert set(picks) == {addr("broker-a"), addr("broker-b"), addr("broker-c")}  # and random-looking
    draws = KeyedDraws("k")
    assert [draws.choice(range(1000)) for _ in range(3)] != [KeyedDraws("k").choice(range(1000))] * 3


# --- producer queue choice and retries ----------------------------------------------------------------

QUEUES = publish_queues(TOPIC, route("broker-a", "broker-b", queues=2))


def test_round_robin_visits_every_queue_in_turn():
    index = ThreadLocalIndex(random.Random(5))
    picks = [select_one_message_queue(QUEUES, index) for _ in range(8)]
    assert sorted(picks[:4]) == QUEUES and picks[4:] == picks[:4]


def test_a_retry_avoids_the_broker_that_just_failed_unless_it_is_the_only_one():
    index = ThreadLocalIndex(random.Random(5))
    for _ in range(10):
        assert select_one_message_queue(QUEUES, index, "broker-a").broker_name == "broker-b"
    only_a = [mq for mq in QUEUES if mq.broker_name == "broker-a"]
    assert select_one_message_queue(only_a, index, "broker-a").broker_name == "broker-a"


@pytest.mark.parametrize("error, retry", [
    (RemotingTimeoutError("timeout"), True),
    (RemotingConnectError("refused"), True),
    (MQClientError("The broker[broker-a] not exist"), True),
    (MQBrokerError(16, "forbidden"), True),  # NO_PERMISSION: a wiped broker
    (MQBrokerError(17), True), (MQBrokerError(14), True), (MQBrokerError(1), True),
    (MQBrokerError(2, "[REJECTREQUEST]system busy"), False),  # 4.9.8 does not retry SYSTEM_BUSY
    (MQBrokerError(13), False),
])
def test_which_failures_retry(error, retry):
    assert is_retryable(error) is retry


def test_the_send_budget_is_spent_by_a_timeout():
    assert remaining_budget(100.0, 101.0, 3.0) == 2.0
    assert remaining_budget(100.0, 103.0, 3.0) <= 0, "an attempt that timed out at 3 s leaves nothing"


# --- latency fault tolerance ----------------------------------------------------------------------------

def fault_strategy(enabled=True, seed=0):
    return MQFaultStrategy(send_latency_fault_enable=enabled, latency_max=LATENCY_MAX,
                           not_available_duration=NOT_AVAILABLE_DURATION, rng=random.Random(seed))


@pytest.mark.parametrize("latency, ban", [
    (10, 0), (99, 0), (100, 0), (549, 0), (550, 30000), (999, 30000), (1000, 60000),
    (2500, 120000), (3000, 180000), (15000, 600000), (30000, 600000),
])
def test_latency_steps_give_4_9_8_bans(latency, ban):
    assert fault_strategy().compute_not_available_duration(latency) == ban


def test_a_failed_attempt_bans_its_broker_for_600_s_and_a_slow_one_for_30_s():
    strategy = fault_strategy()
    lft = strategy.latency_fault_tolerance
    strategy.update_fault_item("broker-a", 5, isolation=True, now=1000.0)
    strategy.update_fault_item("broker-b", 600, isolation=False, now=1000.0)
    assert not lft.is_available("broker-a", 1599.9) and lft.is_available("broker-a", 1600.0)
    assert not lft.is_available("broker-b", 1029.9) and lft.is_available("broker-b", 1030.0)
    assert lft.is_available("broker-c", 1000.0), "a broker never seen is available"


def test_selection_skips_banned_brokers():
    strategy = fault_strategy()
    info = TopicPublishInfo(TOPIC, route("broker-a", "broker-b", queues=2))
    strategy.update_fault_item("broker-a", 0, isolation=True, now=0.0)
    index = ThreadLocalIndex(random.Random(1))
    assert {strategy.select_one_message_queue(info, index, None, 10.0).broker_name for _ in range(10)} == {"broker-b"}
    picks = {strategy.select_one_message_queue(info, index, None, 600.0).broker_name for _ in range(10)}
    assert picks == {"broker-a", "broker-b"}, "the ban ends after 600 s"


def test_with_every_broker_banned_the_least_bad_one_takes_over_a_queue_until_the_route_changes():
    strategy = fault_strategy()
    info = TopicPublishInfo(TOPIC, route("broker-a", "broker-b", queues=2))
    strategy.update_fault_item("broker-a", 0, isolation=True, now=0.0)  # 600 s
    strategy.update_fault_item("broker-b", 1200, isolation=False, now=0.0)  # 60 s
    index = ThreadLocalIndex(random.Random(1))
    # Sorted by latency, the isolated broker-a (its real latency was 0 ms) is the least bad.
    picks = {strategy.select_one_message_queue(info, index, None, 10.0) for _ in range(6)}
    assert {mq.broker_name for mq in picks} == {"broker-a"}
    # Each pick was written into the publish list, so broker-b's queues are gone from it even
    # after its 60 s ban ends (issue #7779).
    assert {mq.broker_name for mq in info.message_queue_list} == {"broker-a"}
    assert len(info.message_queue_list) == 4


def test_without_fault_tolerance_a_banned_broker_is_still_used():
    strategy = fault_strategy(enabled=False)
    info = TopicPublishInfo(TOPIC, route("broker-a", "broker-b", queues=2))
    strategy.update_fault_item("broker-a", 0, isolation=True, now=0.0)
    index = ThreadLocalIndex(random.Random(1))
    assert {strategy.select_one_message_queue(info, index, None, 1.0).broker_name
            for _ in range(4)} == {"broker-a", "broker-b"}
    assert strategy.select_one_message_queue(info, index, "broker-b", 1.0).broker_name == "broker-a"


# --- rebalance ------------------------------------------------------------------------------------------

def test_averagely_gives_contiguous_blocks_the_first_members_one_more():
    mqs = [MessageQueue(TOPIC, b, i) for b in ("broker-b", "broker-a") for i in range(4)]
    cids = ["c-2", "c-0", "c-1"]
    shares = {c: allocate_averagely(c, mqs, cids) for c in cids}
    assert [len(shares[c]) for c in ("c-0", "c-1", "c-2")] == [3, 3, 2]
    assert [str(mq) for mq in shares["c-0"]] == ["broker-a:0", "broker-a:1", "broker-a:2"]
    assert sorted(mq for share in shares.values() for mq in share) == sorted(mqs), "each queue exactly once"
    assert allocate_averagely("c-0", list(reversed(mqs)), list(reversed(cids))) == shares["c-0"]


def test_averagely_with_more_consumers_than_queues_and_unknown_members():
    mqs = [MessageQueue(TOPIC, "broker-a", i) for i in range(2)]
    assert [len(allocate_averagely(c, mqs, ["a", "b", "c"])) for c in "abc"] == [1, 1, 0]
    assert allocate_averagely("stranger", mqs, ["a", "b"]) == []


def test_a_fetch_is_unremarkable_only_when_it_repeats_a_good_one_from_the_same_nameserver():
    from lab.clients.route_cache import unremarkable_fetch
    channel, reconnected = object(), object()
    a = ("ns-a:9876", channel)
    assert unremarkable_fetch(a, ("ns-a:9876", channel), changed=False)
    assert not unremarkable_fetch(a, a, changed=True), "a changed route is news"
    assert not unremarkable_fetch(a, ("ns-b:9876", channel), changed=False), "another NameServer is news"
    assert not unremarkable_fetch(a, ("ns-a:9876", reconnected), changed=False), "a new connection is news"
    assert not unremarkable_fetch(None, a, changed=False), "the first good fetch after a failure is news"


@pytest.mark.parametrize("reply", ["a closed connection", "a refusal"])
def test_a_failed_asynchronous_call_leaves_nothing_for_the_collector(reply):
    """A closed connection fails every pending call at once (a large cluster's consumer has tens of
    thousands of pulls pending): each error must be freed with its callback, not kept in a cycle of
    traceback and frames until the next collection (the lab runs with the collector held back)."""
    import gc
    import weakref

    from lab.clients.api import _AsyncReply
    from nameserver.client import RemotingError
    from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode

    got = []
    call = _AsyncReply(RequestCode.PULL_MESSAGE, "127.0.0.1:10911", None, (ResponseCode.SUCCESS,), got.append)
    response = (RemotingError("connection closed: reset") if reply == "a closed connection"
                else RemotingCommand(ResponseCode.SYSTEM_ERROR, flag=1, remark="busy"))
    gc.disable()  # only reference counting may free it
    try:
        call(response)
        assert isinstance(got[0], RemotingError if reply == "a closed connection" else MQBrokerError)
        error = weakref.ref(got[0])
        got.clear()
        del response
        assert error() is None, "the failed call's error was left in a reference cycle"
    finally:
        gc.enable()
