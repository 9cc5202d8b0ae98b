"""A broker's ConsumerManager tells its ConsumerIdsChangeListener what happens to the groups, as
4.9.8's does (the lab's departures from it are in lab/broker/consumer_manager.py's doc); the
simulator's MemberWatch (lab/sim/broker.py) wraps that listener, and tells whoever relies on a
member list (a coasting rebalance round) of its next change — also where the group's
notifications are off and no CHANGE is told."""

from __future__ import annotations

from lab.broker.consumer_manager import ConsumerData, ConsumerGroupEvent, ConsumerManager
from lab.sim.broker import MemberWatch

CHANGE, UNREGISTER, REGISTER = ConsumerGroupEvent.CHANGE, ConsumerGroupEvent.UNREGISTER, ConsumerGroupEvent.REGISTER
SUBS = ({"topic": "T", "subVersion": 0},)


def consumer(group="cg"):
    return ConsumerData(group, "CONSUME_PASSIVELY", "CLUSTERING", ("T",), subscriptions=SUBS)


class Heard:
    def __init__(self):
        self.events: list[tuple] = []

    def handle(self, event, group, *args):
        self.events.append((event, group, *args))

    def take(self) -> list[tuple]:
        events, self.events = self.events, []
        return events


def test_register_unregister_close_and_expiry_are_told_as_4_9_8_tells_them():
    heard = Heard()
    manager = ConsumerManager(heard, channel_expired_timeout=120)
    assert manager.register_consumer(consumer(), "b", "chan-b", now=0)
    assert heard.take() == [(CHANGE, "cg", ["chan-b"], "register"), (REGISTER, "cg", SUBS)]
    assert not manager.register_consumer(consumer(), "b", "chan-b", now=30)
    assert heard.take() == [(REGISTER, "cg", SUBS)], "a heartbeat that changes nothing: REGISTER alone"
    assert manager.register_consumer(consumer(), "a", "chan-a", now=30, notify=False)
    assert heard.take() == [(REGISTER, "cg", SUBS)], "notifyConsumerIdsChangedEnable off: no CHANGE"

    assert manager.unregister_consumer("cg", "chan-a", notify=False)
    assert heard.take() == []
    assert not manager.unregister_consumer("cg", "chan-x")
    assert heard.take() == [], "not a member: the lab tells no one"
    assert manager.unregister_consumer("cg", "chan-b")
    assert heard.take() == [(UNREGISTER, "cg"), (CHANGE, "cg", [], "unregister")]

    for client, group in (("c", "g1"), ("c", "g2"), ("d", "g1")):
        manager.register_consumer(consumer(group), client, f"chan-{client}", now=100)
    heard.take()
    assert manager.do_channel_close_event("chan-c") == ["g1", "g2"]
    assert heard.take() == [(CHANGE, "g1", ["chan-d"], "closed"), (UNREGISTER, "g2"), (CHANGE, "g2", [], "closed")]

    assert manager.scan_not_active_channel(now=221) == [("g1", "chan-d")]
    assert heard.take() == [(CHANGE, "g1", [], "expired")], "the scan's group ends without UNREGISTER"
    assert manager.consumer_table == {}


class Broker:
    """What MemberWatch reads of a broker."""

    def __init__(self):
        self.heard = Heard()
        self.watch = MemberWatch(self, self.heard)
        self.consumer_manager = ConsumerManager(self.watch)

    def consumer_list_body(self, group, serialize_type):
        return repr(self.consumer_manager.get_all_client_id(group)).encode()


def test_a_watcher_is_told_once_of_a_member_change_told_or_not_and_before_the_broker_notifies():
    broker = Broker()
    manager, watch = broker.consumer_manager, broker.watch
    told = []
    watcher = lambda: told.append(list(broker.heard.events))  # noqa: E731 (what the broker heard by then)
    manager.register_consumer(consumer(), "a", "chan-a", now=0)
    watch.watch("cg", watcher)
    assert watch.consumer_list_body("cg", 0) == b"['a']"
    manager.register_consumer(consumer(), "a", "chan-a", now=30)
    assert told == [], "a heartbeat that changes nothing"

    broker.heard.take()
    manager.register_consumer(consumer(), "b", "chan-b", now=31)
    assert told == [[]], "told at the change, before the broker's listener heard of it"
    manager.register_consumer(consumer(), "c", "chan-c", now=32)
    assert len(told) == 1, "told once"

    watch.watch("cg", watcher)
    manager.register_consumer(consumer(), "d", "chan-d", now=33, notify=False)
    assert len(told) == 2, "a member joined where the group's notifications are off: no CHANGE, still a change"

    watch.watch("cg", watcher)
    manager.unregister_consumer("cg", "chan-d", notify=False)
    assert len(told) == 2, "nothing told the listener: the broker looks (CoastingBroker._unregister_client)"
    watch.look("cg")
    assert len(told) == 3

    watch.watch("cg", watcher)
    watch.unwatch("cg", watcher)
    manager.do_channel_close_event("chan-c")
    assert len(told) == 3 and watch.watchers == {} and watch.members == {}
