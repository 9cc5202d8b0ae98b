"""SubscriptionGroupManager (4.9.8): a broker's table of consumer groups and what each may do. Pure:
`now_ms` is an argument.

A group is created with SubscriptionGroupConfig's defaults the first time a consumer of it sends a
heartbeat or pulls (autoCreateSubscriptionGroup, true by default), or by UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
(mqadmin updateSubGroup); every change moves the table's DataVersion on. Seven built-in groups are
there from the start, as in 4.9.8. What the lab acts on: consumeEnable (false: pulls get NO_PERMISSION),
retryQueueNums (the %RETRY% topic's queues) and notifyConsumerIdsChangedEnable.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from lab.remoting.java_maps import hash_map, hash_order
from nameserver.bodies import data_version_to_wire
from nameserver.protocol.fastjson import Bean
from nameserver.routes import DataVersion

# MixAll's group names, in the order SubscriptionGroupManager.init puts them; the last four are
# created with consumeBroadcastEnable=true (the default anyway).
BUILT_IN_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                   "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER")
# MixAll.isSysConsumerGroup: created on demand even without autoCreateSubscriptionGroup.
SYS_CONSUMER_GROUP_PREFIX = "CID_RMQ_SYS_"
# new ConcurrentHashMap(1024) sizes its table for 1024 + 512 + 1 entries: 2048 buckets.
TABLE_CAPACITY = 2048


@dataclass
class SubscriptionGroupConfig:
    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True

    @classmethod
    def from_body(cls, obj: object) -> SubscriptionGroupConfig:
        """The body of UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (fastjson of the class): fields left out
        keep their defaults; ValueError naming the field for a missing groupName or a wrong type."""
        if not isinstance(obj, Mapping):
            raise ValueError("the body is not a SubscriptionGroupConfig object")
        name = obj.get("groupName")
        if not isinstance(name, str) or not name:
            raise ValueError("SubscriptionGroupConfig without a groupName")
        values = {}
        for f in dataclasses.fields(cls):
            if f.name == "groupName" or obj.get(f.name) is None:
                continue
            value = obj[f.name]
            if f.type == "bool":
                if not isinstance(value, bool):
                    raise ValueError(f"SubscriptionGroupConfig.{f.name} must be true or false, not {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int) or not -2**63 <= value < 2**63:
                raise ValueError(f"SubscriptionGroupConfig.{f.name} must be an integer, not {value!r}")
            values[f.name] = value
        return cls(name, **values)


class SubscriptionGroupManager:
    def __init__(self, now_ms: int, *, auto_create: bool = True):
        self.auto_create = auto_create
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {
            name: SubscriptionGroupConfig(name) for name in BUILT_IN_GROUPS}
        self.data_version = DataVersion(now_ms, 0)

    def _next_version(self, now_ms: int) -> None:
        self.data_version = DataVersion(now_ms, self.data_version.counter + 1)

    def find_subscription_group_config(self, group: str, now_ms: int) -> SubscriptionGroupConfig | None:
        """The group's config, created with the defaults if the broker auto-creates groups (or
        the group is a system one); None otherwise."""
        config = self.subscription_group_table.get(group)
        if config is None and (self.auto_create or group.startswith(SYS_CONSUMER_GROUP_PREFIX)):
            config = self.subscription_group_table[group] = SubscriptionGroupConfig(group)
            self._next_version(now_ms)
        return config

    def update_subscription_group_config(self, config: SubscriptionGroupConfig, now_ms: int) -> None:
        self.subscription_group_table[config.groupName] = config
        self._next_version(now_ms)

    def delete_subscription_group_config(self, group: str, now_ms: int) -> bool:
        """True if the group was there."""
        if self.subscription_group_table.pop(group, None) is None:
            return False
        self._next_version(now_ms)
        return True

    def file_content(self) -> dict:
        """subscriptionGroup.json, as the store keeps it (MessageStore.save_config)."""
        return {"dataVersion": list(self.data_version),
                "subscriptionGroupTable": {name: dataclasses.asdict(config)
                                           for name, config in self.subscription_group_table.items()}}

    def load(self, content: object) -> None:
        """SubscriptionGroupManager.decode at boot: the file's groups put over the built-in ones
        (putAll: a built-in group deleted before the restart is back) and its DataVersion. A file
        the lab cannot read is ignored, as a missing one."""
        if not isinstance(content, dict):
            return
        table = content.get("subscriptionGroupTable")
        for name, fields in (table.items() if isinstance(table, dict) else ()):
            try:
                self.subscription_group_table[name] = SubscriptionGroupConfig(**fields)
            except TypeError:
                continue
        version = content.get("dataVersion")
        if isinstance(version, list) and len(version) == 2:
            self.data_version = DataVersion(*version)

    def group_names(self) -> list[str]:
        """The table's keys in its iteration order (fetchAllConsumeStatsInBroker walks them)."""
        return hash_order(self.subscription_group_table, initial_capacity=TABLE_CAPACITY)

    def bean(self) -> Bean:
        """SubscriptionGroupManager.encode(): the table (a ConcurrentHashMap(1024)) and its DataVersion."""
        table = hash_map(((name, Bean(dataclasses.asdict(config)))
                          for name, config in self.subscription_group_table.items()), initial_capacity=TABLE_CAPACITY)
        return Bean(dataVersion=Bean(data_version_to_wire(self.data_version)), subscriptionGroupTable=table)
