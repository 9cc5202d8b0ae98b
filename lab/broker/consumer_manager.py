"""ConsumerManager: which clients a broker knows per consumer group, from their heartbeats.

As in RocketMQ, a client is known by the connection (channel) its heartbeat came on: a closed
connection takes its client out of every group at once, a silent one expires after 120 s. What
happens to a group is told to the manager's ConsumerIdsChangeListener, as 4.9.8's ConsumerManager
tells it (`handle(event, group, *args)`): CHANGE with the group's channels when its members or
topics changed, so the broker's listener (lab/broker/server.py) sends them NOTIFY_CONSUMER_IDS_CHANGED
and the group rebalances now rather than at its next 20 s round; UNREGISTER when the group's last
member left; REGISTER with the subscriptions at every heartbeat. Where the lab tells CHANGE
otherwise than 4.9.8, each method says so. The lab's CHANGE carries a second argument, why
(register, unregister, closed, expired), for its event log.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from typing import NamedTuple

from nameserver import bodies

CHANNEL_EXPIRED_TIMEOUT = 120.0  # seconds without a heartbeat (BrokerConfig.channelExpiredTimeout)

# Java sends enums by name, the C++ client by ordinal; the ordinals are the same in both.
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM_WHERE = ("CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                      "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
                      "CONSUME_FROM_TIMESTAMP")


class HeartbeatError(ValueError):
    """A HEART_BEAT body that is not HeartbeatData."""


class ConsumerData(NamedTuple):
    group_name: str
    consume_type: str
    message_model: str
    topics: tuple[str, ...]
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: tuple[dict, ...] = ()  # SubscriptionData, normalised (subscription_data)


class HeartbeatData(NamedTuple):
    client_id: str
    consumers: list[ConsumerData]
    producers: tuple[str, ...] = ()  # producer groups, CLIENT_INNER_PRODUCER among them


def subscription_data(obj: dict) -> dict:
    """SubscriptionData as a 4.9.8 broker holds it after fastjson read it: every serialised field,
    with the class's defaults for what the client left out (the C++ client sends no
    expressionType or classFilterMode)."""
    def ints(v):
        return [x for x in v if isinstance(x, int) and not isinstance(x, bool)] if isinstance(v, list) else []

    def strs(v):
        return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []

    sub_version = obj.get("subVersion")
    if isinstance(sub_version, str) and sub_version.strip().lstrip("-").isdigit():
        sub_version = int(sub_version)  # the C++ client sends it as a string; fastjson reads the number
    return {"classFilterMode": obj.get("classFilterMode") is True, "codeSet": ints(obj.get("codeSet")),
            "expressionType": obj.get("expressionType") if isinstance(obj.get("expressionType"), str) else "TAG",
            "subString": obj.get("subString") if isinstance(obj.get("subString"), str) else "*",
            "subVersion": sub_version if isinstance(sub_version, int) and not isinstance(sub_version, bool) else 0,
            "tagsSet": strs(obj.get("tagsSet")), "topic": obj["topic"]}


def _enum_name(value: object, names: tuple[str, ...], what: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    if value in names:
        return value
    raise HeartbeatError(f"bad {what} {value!r}")


@functools.lru_cache(maxsize=64)
def parse_heartbeat_body(body: bytes, serialize_type: int) -> HeartbeatData:
    """parse_heartbeat of a HEART_BEAT body, remembered for the bodies seen last. A client sends
    the same bytes to every broker every 30 s, and a consumer of 2,000 topics sends 2,000
    subscriptions each time: parsing them again for each of 20 brokers cost more than the rest of
    the heartbeat, and kept a copy per broker. What it returns is never changed, so brokers share it
    (a simulated client's body is one bytes object, hashed once)."""
    return parse_heartbeat(bodies.load(body, serialize_type))


def parse_heartbeat(obj: object) -> HeartbeatData:
    """HeartbeatData as Java and the C++ client send it; producer data is not needed."""
    if not isinstance(obj, dict) or not isinstance(obj.get("clientID"), str):
        raise HeartbeatError("heartbeat without a clientID")
    consumers = []
    for data in obj.get("consumerDataSet") or []:
        if not isinstance(data, dict) or not isinstance(data.get("groupName"), str):
            raise HeartbeatError(f"bad consumer data {data!r}")
        subscriptions = tuple(subscription_data(s) for s in data.get("subscriptionDataSet") or []
                              if isinstance(s, dict) and isinstance(s.get("topic"), str))
        where = data.get("consumeFromWhere", 0)
        try:
            where = _enum_name(where, CONSUME_FROM_WHERE, "consumeFromWhere")
        except HeartbeatError:
            where = "CONSUME_FROM_LAST_OFFSET"  # only shown by consumerConnection: not worth a refusal
        consumers.append(ConsumerData(
            data["groupName"],
            _enum_name(data.get("consumeType", 1), CONSUME_TYPES, "consumeType"),
            _enum_name(data.get("messageModel", 1), MESSAGE_MODELS, "messageModel"),
            tuple(s["topic"] for s in subscriptions), where, subscriptions))
    producer_data = obj.get("producerDataSet")
    producers = tuple(p["groupName"] for p in (producer_data if isinstance(producer_data, list) else [])
                      if isinstance(p, dict) and isinstance(p.get("groupName"), str))
    return HeartbeatData(obj["clientID"], consumers, producers)


@dataclass(slots=True)
class ClientChannelInfo:
    client_id: str
    last_update_timestamp: float
    language: str = "JAVA"  # of the heartbeat request, as Connection reports it
    version: int = 0


@dataclass
class ConsumerGroupInfo:
    group_name: str
    consume_type: str
    message_model: str
    topics: tuple[str, ...] = ()
    channel_info_table: dict[object, ClientChannelInfo] = field(default_factory=dict)
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscription_table: dict[str, dict] = field(default_factory=dict)  # topic -> SubscriptionData
    # The subscription sets applied since the table last changed, by identity: applying one again
    # changes nothing. Ten members of 2,000 topics each heartbeat the same parsed set every 30 s.
    _applied: dict[int, tuple[dict, ...]] = field(default_factory=dict, repr=False, compare=False)

    def update_subscription(self, subscriptions: tuple[dict, ...]) -> None:
        """ConsumerGroupInfo.updateSubscription: a topic's entry is replaced only by a newer
        subVersion; topics the heartbeat no longer names are dropped."""
        if self._applied.get(id(subscriptions)) is subscriptions:
            return
        table, changed = self.subscription_table, False
        for sub in subscriptions:
            old = table.get(sub["topic"])
            if old is None or sub["subVersion"] > old["subVersion"]:
                table[sub["topic"]] = sub
                changed = True
        named = {sub["topic"] for sub in subscriptions}
        for topic in [t for t in table if t not in named]:
            del table[topic]
            changed = True
        if changed or len(self._applied) >= 64:
            self._applied.clear()
        self._applied[id(subscriptions)] = subscriptions

    def client_ids(self) -> list[str]:
        """Sorted and without repeats: a client reconnecting keeps its id on two channels until the
        old one closes, and every member must compute the same allocation from this list."""
        return sorted({info.client_id for info in self.channel_info_table.values()})


class ConsumerGroupEvent(enum.Enum):
    """What happened to a consumer group (4.9.8's ConsumerGroupEvent)."""
    CHANGE = "CHANGE"  # its members or their subscriptions changed: (its channels, why)
    UNREGISTER = "UNREGISTER"  # its last member left: the group is gone
    REGISTER = "REGISTER"  # a member's heartbeat: (its subscriptions)


class ConsumerIdsChangeListener:
    """Who hears what happens to the consumer groups (4.9.8's ConsumerIdsChangeListener); this one,
    a ConsumerManager's without a listener, tells no one."""

    def handle(self, event: ConsumerGroupEvent, group: str, *args) -> None:
        pass


class ConsumerManager:
    def __init__(self, consumer_ids_change_listener: ConsumerIdsChangeListener | None = None,
                 channel_expired_timeout: float = CHANNEL_EXPIRED_TIMEOUT):
        """`consumer_ids_change_listener`: told what happens to the groups (none: no one is)."""
        self.consumer_ids_change_listener = consumer_ids_change_listener or ConsumerIdsChangeListener()
        self.channel_expired_timeout = channel_expired_timeout
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}

    def register_consumer(self, data: ConsumerData, client_id: str, channel: object, now: float,
                          language: str = "JAVA", version: int = 0, notify: bool = True) -> bool:
        """A heartbeat; True when the group's members or topics changed (a topic list in another
        order too), told as CHANGE when `notify` (the subscription group's
        notifyConsumerIdsChangedEnable). REGISTER is told at every heartbeat."""
        group = data.group_name
        info = self.consumer_table.get(group)
        if info is None:
            info = self.consumer_table[group] = ConsumerGroupInfo(group, data.consume_type, data.message_model)
        info.consume_type, info.message_model = data.consume_type, data.message_model
        info.consume_from_where = data.consume_from_where
        known = info.channel_info_table.get(channel)
        changed = known is None or known.client_id != client_id or info.topics != data.topics
        info.channel_info_table[channel] = ClientChannelInfo(client_id, now, language, version)
        info.topics = data.topics
        info.update_subscription(data.subscriptions)
        listener = self.consumer_ids_change_listener
        if changed and notify:
            listener.handle(ConsumerGroupEvent.CHANGE, group, list(info.channel_info_table), "register")
        listener.handle(ConsumerGroupEvent.REGISTER, group, data.subscriptions)
        return changed

    def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """Groups whose members subscribe to `topic` now."""
        return [group for group, info in self.consumer_table.items() if topic in info.subscription_table]

    def unregister_consumer(self, group: str, channel: object, notify: bool = True) -> bool:
        """UNREGISTER_CLIENT; True when the client was a member, told as CHANGE when `notify` (the
        subscription group's notifyConsumerIdsChangedEnable). (4.9.8 tells CHANGE for a channel
        that was not a member as well.)"""
        if not self._remove(group, channel):
            return False
        if notify:
            self._changed(group, "unregister")
        return True

    def do_channel_close_event(self, channel: object) -> list[str]:
        """A connection closed: the groups it was a member of, each told as CHANGE."""
        groups = []
        for group in list(self.consumer_table):
            if self._remove(group, channel):
                groups.append(group)
                self._changed(group, "closed")
        return groups

    def scan_not_active_channel(self, now: float) -> list[tuple[str, object]]:
        """Remove clients silent for longer than the timeout: (group, channel) each, in table order,
        for the caller to close. Each is told as CHANGE once all are removed (4.9.8 removes it and
        then closes its channel, whose close event finds nothing left to remove: no one hears of it
        until the next 20 s round)."""
        expired = []
        for info in list(self.consumer_table.values()):
            for channel, client in list(info.channel_info_table.items()):
                if now - client.last_update_timestamp > self.channel_expired_timeout:
                    del info.channel_info_table[channel]
                    expired.append((info.group_name, channel))
            if not info.channel_info_table:  # gone, told to no one (as in 4.9.8)
                del self.consumer_table[info.group_name]
        for group, _channel in expired:
            self._changed(group, "expired")
        return expired

    def _remove(self, group: str, channel: object) -> bool:
        """ConsumerGroupInfo's unregisterChannel: whether `channel` was a member of `group`; the
        group goes, told as UNREGISTER, with its last member."""
        info = self.consumer_table.get(group)
        if info is None or info.channel_info_table.pop(channel, None) is None:
            return False
        if not info.channel_info_table:
            del self.consumer_table[group]
            self.consumer_ids_change_listener.handle(ConsumerGroupEvent.UNREGISTER, group)
        return True

    def _changed(self, group: str, why: str) -> None:
        self.consumer_ids_change_listener.handle(ConsumerGroupEvent.CHANGE, group, self.get_all_channel(group), why)

    def get_all_client_id(self, group: str) -> list[str]:
        info = self.consumer_table.get(group)
        return info.client_ids() if info else []

    def find_channel(self, group: str, client_id: str) -> tuple[object, ClientChannelInfo] | None:
        """ConsumerManager.findChannel: the connection of the group's member `client_id`, and what
        its heartbeat said (the last one heard when it is on two connections)."""
        info = self.consumer_table.get(group)
        found = None
        for channel, client in (info.channel_info_table.items() if info else ()):
            if client.client_id == client_id:
                found = (channel, client)
        return found

    def get_all_channel(self, group: str) -> list[object]:
        info = self.consumer_table.get(group)
        return list(info.channel_info_table) if info else []
