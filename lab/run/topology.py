"""From a LabConfig and a seed to the cluster's nodes, names, ports and topics. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from nameserver.routes import TopicConfig

from lab.config import LabConfig
from .fake_data import topic_names

NAMESERVER_BASE_PORT = 9876
BROKER_BASE_PORT = 10911  # broker-a-0 10911, broker-a-1 10921, broker-b-0 11011, ...


@dataclass(frozen=True)
class BrokerSpec:
    name: str  # node name: <brokerName>-<brokerId>
    broker_name: str
    broker_id: int
    port: int


@dataclass(frozen=True)
class Topology:
    nameservers: list[tuple[str, int]]  # (node name, port)
    brokers: list[BrokerSpec]
    producers: list[str]
    consumers: list[str]
    topics: dict[str, TopicConfig]

    def roles(self) -> dict[str, str]:
        roles = {name: "nameserver" for name, _ in self.nameservers}
        roles |= {b.name: "broker" for b in self.brokers}
        roles |= {p: "producer" for p in self.producers}
        roles |= {c: "consumer" for c in self.consumers}
        return roles


def plan(config: LabConfig, seed: int) -> Topology:
    c = config.cluster
    names = c.topicNames or topic_names(c.topics, seed)
    topics = {n: TopicConfig(n, c.queuesPerTopic, c.queuesPerTopic, 6) for n in names}
    brokers = [
        BrokerSpec(f"{broker_name}-{broker_id}", broker_name, broker_id,
                   BROKER_BASE_PORT + 100 * group + 10 * broker_id)
        for group, broker_name in enumerate(c.brokers)
        for broker_id in range(c.slavesPerBroker + 1)
    ]
    return Topology(
        nameservers=[(f"ns-{i}", NAMESERVER_BASE_PORT + i) for i in range(c.nameservers)],
        brokers=brokers,
        producers=[f"producer-{i}" for i in range(c.producers)],
        consumers=[f"consumer-{i}" for i in range(c.consumers)],
        topics=topics,
    )
