"""The lab's configuration: a cluster in TOML, RocketMQ's property names and defaults, grouped by role.

    [cluster]     topology (nslab's own keys)
    [nameserver]  scanNotActiveBrokerInterval, brokerChannelExpiredTime, ...
    [broker]      registerNameServerPeriod, compressedRegister, ...
    [client]      pollNameServerInterval, heartbeatBrokerInterval, ...
    [producer]    retryTimesWhenSendFailed, sendMsgTimeout, sendLatencyFaultEnable, ...
    [consumer]    pullBatchSize, ...
    [network]     latency, jitter, loss of the simulated network

Durations are `30s`, `2m`, `500ms` or plain seconds, and are held in seconds. Any key can be set
from the command line: `--set client.pollNameServerInterval=10s`. docs/config.md lists them all.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from chaos.toml_files import read_toml
from nameserver.config import parse_duration


class ConfigError(ValueError):
    """A bad configuration: the message names the file (or flag), the line and the key."""


def duration(default: float):
    return field(default=default, metadata={"duration": True})


def ms_list(*values: int):
    return field(default_factory=lambda: list(values))


@dataclass
class ClusterSection:
    nameservers: int = 2
    clusterName: str = "DefaultCluster"
    brokers: list[str] = field(default_factory=lambda: ["broker-a", "broker-b"])
    slavesPerBroker: int = 1
    topics: int = 4  # how many topics; Faker names drawn from the seed
    topicNames: list[str] = field(default_factory=list)  # explicit names instead
    queuesPerTopic: int = 4
    producers: int = 2
    consumers: int = 2


@dataclass
class NameserverSection:
    scanNotActiveBrokerInterval: float = duration(10.0)
    brokerChannelExpiredTime: float = duration(120.0)
    serverChannelMaxIdleTimeSeconds: float = duration(120.0)
    orderMessageEnable: bool = False


@dataclass
class BrokerSection:
    registerNameServerPeriod: float = duration(30.0)
    registerBrokerTimeoutMills: float = duration(6.0)
    compressedRegister: bool = False
    brokerPermission: int = 6
    autoCreateTopicEnable: bool = True
    defaultTopicQueueNums: int = 8
    longPollingEnable: bool = True
    shortPollingTimeMills: float = duration(1.0)
    haSendHeartbeatInterval: float = duration(5.0)
    slaveReadEnable: bool = True
    serverChannelMaxIdleTimeSeconds: float = duration(120.0)  # NettyServerConfig's, as the NameServer's


@dataclass
class ClientSection:
    pollNameServerInterval: float = duration(30.0)
    heartbeatBrokerInterval: float = duration(30.0)
    persistConsumerOffsetInterval: float = duration(5.0)
    mqClientApiTimeout: float = duration(3.0)
    connectTimeoutMillis: float = duration(3.0)
    # How the client reads a route body (nslab; lab/clients/route_parsers.py): fastjson as Java's
    # clients do, or strict / go-v2 as clients in other languages do (they then speak JSON).
    routeParser: str = "fastjson"


@dataclass
class ProducerSection:
    retryTimesWhenSendFailed: int = 2
    sendMsgTimeout: float = duration(3.0)
    sendLatencyFaultEnable: bool = False
    latencyMax: list[int] = ms_list(50, 100, 550, 1000, 2000, 3000, 15000)
    notAvailableDuration: list[int] = ms_list(0, 0, 30000, 60000, 120000, 180000, 600000)
    producerGroup: str = "lab-producer-group"
    rate: float = 5.0  # messages per second per producer (nslab)
    messageSize: int = 64  # body bytes (nslab)


@dataclass
class ConsumerSection:
    consumerGroup: str = "lab-consumer-group"
    pullBatchSize: int = 32
    brokerSuspendMaxTimeMillis: float = duration(15.0)
    pullTimeDelayMillsWhenException: float = duration(1.0)
    rebalanceInterval: float = duration(20.0)
    consumeFromWhere: str = "CONSUME_FROM_LAST_OFFSET"


@dataclass
class NetworkSection:
    latency: float = duration(0.001)
    jitter: float = duration(0.0002)
    loss: float = 0.0


SECTIONS = {
    "cluster": ClusterSection, "nameserver": NameserverSection, "broker": BrokerSection,
    "client": ClientSection, "producer": ProducerSection, "consumer": ConsumerSection,
    "network": NetworkSection,
}


@dataclass
class LabConfig:
    cluster: ClusterSection = field(default_factory=ClusterSection)
    nameserver: NameserverSection = field(default_factory=NameserverSection)
    broker: BrokerSection = field(default_factory=BrokerSection)
    client: ClientSection = field(default_factory=ClientSection)
    producer: ProducerSection = field(default_factory=ProducerSection)
    consumer: ConsumerSection = field(default_factory=ConsumerSection)
    network: NetworkSection = field(default_factory=NetworkSection)

    def to_dict(self) -> dict:
        return {name: asdict(getattr(self, name)) for name in SECTIONS}

    def __post_init__(self) -> None:
        self.sources: dict[str, str] = {}  # key -> where it was last set ("lab.toml:5: [client] ...")

    def set(self, key: str, value: object, *, where: str) -> None:
        """Set `section.key` from TOML or command-line text; `where` names the source in errors.
        Values are checked together by `validate`, once everything is set: one key's limit may
        depend on another's (latencyMax and notAvailableDuration, set on two lines)."""
        section_name, _, name = key.partition(".")
        section = getattr(self, section_name, None) if section_name in SECTIONS else None
        if section is None:
            raise ConfigError(f"{where}: unknown section {section_name!r} (sections: {', '.join(SECTIONS)})")
        spec = {f.name: f for f in fields(section)}.get(name)
        if spec is None:
            raise ConfigError(f"{where}: unknown key {key!r} (keys of [{section_name}]: {', '.join(f.name for f in fields(section))})")
        try:
            setattr(section, name, _convert(spec, getattr(section, name), value))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{where}: {key}: {e}") from None
        self.sources[key] = where

    def validate(self, sections: tuple[str, ...] = tuple(SECTIONS)) -> None:
        """Every value within what RocketMQ accepts or what makes sense, for the sections named;
        the error names where the offending key was set."""
        for key, ok, why, *related in _rules(self):
            if key.partition(".")[0] in sections and not ok:
                section, _, name = key.partition(".")
                value = getattr(getattr(self, section), name)
                where = next((self.sources[k] for k in (key, *related) if k in self.sources), "the configuration")
                raise ConfigError(f"{where}: {key} {why} (it is {_show(value)})")


# Periods and timeouts that must be positive: a zero period spins, a zero timeout fails every call.
POSITIVE_DURATIONS = (
    "nameserver.scanNotActiveBrokerInterval", "nameserver.brokerChannelExpiredTime",
    "broker.registerNameServerPeriod", "broker.registerBrokerTimeoutMills", "broker.shortPollingTimeMills",
    "broker.haSendHeartbeatInterval", "client.pollNameServerInterval", "client.heartbeatBrokerInterval",
    "client.persistConsumerOffsetInterval", "client.mqClientApiTimeout", "client.connectTimeoutMillis",
    "producer.sendMsgTimeout", "consumer.brokerSuspendMaxTimeMillis", "consumer.pullTimeDelayMillsWhenException",
    "consumer.rebalanceInterval",
)
ROUTE_PARSERS = ("fastjson", "strict", "go-v2")  # the parsers lab/clients/route_parsers.py describes
CONSUME_FROM = ("CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET")  # what a lab consumer can start from
MAX_SLAVES = 9  # broker ports are 10 apart within a group, groups 100 apart (lab/run/topology.py)
# The lab's practical limits, where RocketMQ has none: every node and queue lives in this process
# (or its children), so these keep a run within a machine's memory and a start within seconds.
MAX_DURATION = 86_400.0  # seconds: no RocketMQ interval or timeout is longer than a day
MAX_NAMESERVERS = 32
MAX_BROKER_GROUPS = 64
MAX_CLIENTS = 64  # producers, and consumers
MAX_TOPICS = 50_000  # Faker's two-word names number ~940,000: far below that, drawing them stays fast
MAX_QUEUES = 1024  # queue ids the clients keep as header text (lab/clients/consumer.py's QUEUE_IDS)
MAX_CLUSTER_QUEUES = 400_000  # topics × queues × broker groups: each queue is state on every replica
MAX_RETRIES = 32
MAX_RATE = 10_000.0  # messages per second per producer
MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # RocketMQ's maxMessageSize (4 MiB)
MAX_LIST = 32  # entries of latencyMax / notAvailableDuration
MAX_MILLIS = int(MAX_DURATION * 1000)
MAX_LIST_ITEMS = MAX_TOPICS  # any list key's entries, checked as it is read
# RocketMQ's Validators: topic names up to 127 characters, group names up to 255, of these characters.
TOPIC_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")
GROUP_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")
NODE_NAME = re.compile(r"[a-zA-Z0-9_.-]{1,64}")  # broker groups name nodes: `nslab chaos` splits on , : /


def _durations(config: LabConfig) -> list[str]:
    return [f"{section}.{f.name}" for section in SECTIONS for f in fields(getattr(config, section))
            if f.metadata.get("duration")]


def _rules(config: LabConfig) -> list[tuple]:
    """(key, holds, what it must be[, other keys it depends on]): every limit, in section order."""
    c, b, p, n = config.cluster, config.broker, config.producer, config.network

    def value(key: str):
        section, _, name = key.partition(".")
        return getattr(getattr(config, section), name)

    def within(key: str, low, high) -> tuple:
        return key, low <= value(key) <= high, f"must be within {low}..{high}"

    queues = (c.topics if not c.topicNames else len(c.topicNames)) * c.queuesPerTopic * len(c.brokers)
    return [
        within("cluster.nameservers", 1, MAX_NAMESERVERS),
        ("cluster.brokers", 1 <= len(c.brokers) <= MAX_BROKER_GROUPS,
         f"must name 1..{MAX_BROKER_GROUPS} broker groups"),
        ("cluster.brokers", len(set(c.brokers)) == len(c.brokers), "has a name twice"),
        ("cluster.brokers", all(NODE_NAME.fullmatch(name) for name in c.brokers),
         "must be names of 1..64 letters, digits, '-', '_' or '.'"),
        ("cluster.clusterName", 1 <= len(c.clusterName) <= 255, "must be 1..255 characters"),
        within("cluster.slavesPerBroker", 0, MAX_SLAVES),
        ("cluster.topics", 1 <= c.topics <= MAX_TOPICS or bool(c.topicNames),
         f"must be within 1..{MAX_TOPICS} (or give topicNames)", "cluster.topicNames"),
        ("cluster.topicNames", len(c.topicNames) <= MAX_TOPICS, f"must name at most {MAX_TOPICS} topics"),
        ("cluster.topicNames", len(set(c.topicNames)) == len(c.topicNames), "has a name twice"),
        ("cluster.topicNames", all(TOPIC_NAME.fullmatch(name) for name in c.topicNames),
         "must be RocketMQ topic names: 1..127 of letters, digits, '%', '|', '-', '_'"),
        within("cluster.queuesPerTopic", 1, MAX_QUEUES),
        ("cluster.queuesPerTopic", queues <= MAX_CLUSTER_QUEUES,
         f"× topics × broker groups must be at most {MAX_CLUSTER_QUEUES:,} queues in all (here {queues:,})",
         "cluster.topics", "cluster.topicNames", "cluster.brokers"),
        within("cluster.producers", 0, MAX_CLIENTS),
        within("cluster.consumers", 0, MAX_CLIENTS),
        *[(key, value(key) > 0, "must be positive") for key in POSITIVE_DURATIONS],
        *[(key, 0 <= value(key) <= MAX_DURATION, f"must be within 0..{MAX_DURATION:g} s (a day)")
          for key in _durations(config)],
        ("broker.brokerPermission", 0 <= b.brokerPermission <= 7, "must be a permission within 0..7 (6: read and write)"),
        within("broker.defaultTopicQueueNums", 1, MAX_QUEUES),
        within("producer.retryTimesWhenSendFailed", 0, MAX_RETRIES),
        ("producer.latencyMax", 1 <= len(p.latencyMax) <= MAX_LIST, f"must have 1..{MAX_LIST} entries"),
        ("producer.latencyMax", p.latencyMax == sorted(p.latencyMax)
         and all(0 <= ms <= MAX_MILLIS for ms in p.latencyMax), f"must be ascending, each within 0..{MAX_MILLIS} ms"),
        ("producer.notAvailableDuration", all(0 <= ms <= MAX_MILLIS for ms in p.notAvailableDuration),
         f"must be within 0..{MAX_MILLIS} ms each"),
        ("producer.notAvailableDuration", len(p.latencyMax) == len(p.notAvailableDuration),
         "must have as many entries as producer.latencyMax", "producer.latencyMax"),
        ("producer.producerGroup", GROUP_NAME.fullmatch(p.producerGroup) is not None,
         "must be a RocketMQ group name: 1..255 of letters, digits, '%', '|', '-', '_'"),
        ("client.routeParser", config.client.routeParser in ROUTE_PARSERS,
         f"must be one of {', '.join(ROUTE_PARSERS)}"),
        ("producer.rate", 0 < p.rate <= MAX_RATE, f"must be positive, at most {MAX_RATE:g} messages per second"),
        ("producer.messageSize", 1 <= p.messageSize <= MAX_MESSAGE_SIZE,
         f"must be within 1..{MAX_MESSAGE_SIZE} bytes (RocketMQ refuses an empty body and, by its "
         "maxMessageSize, one over 4 MiB)"),
        ("consumer.consumerGroup", GROUP_NAME.fullmatch(config.consumer.consumerGroup) is not None,
         "must be a RocketMQ group name: 1..255 of letters, digits, '%', '|', '-', '_'"),
        within("consumer.pullBatchSize", 1, 1024),  # RocketMQ's checkConfig range
        ("consumer.consumeFromWhere", config.consumer.consumeFromWhere in CONSUME_FROM,
         f"must be one of {', '.join(CONSUME_FROM)}"),
        ("network.loss", 0.0 <= n.loss <= 1.0, "must be within 0..1"),
    ]


def _show(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else f"{value:g}" if isinstance(value, float) else str(value)


def _convert(spec, current: object, value: object) -> object:
    if spec.metadata.get("duration"):
        return parse_duration(value)
    if isinstance(current, bool):
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
        raise ValueError(f"expected true or false, got {value!r}")
    if isinstance(current, list):
        items = value if isinstance(value, list) else [v for v in str(value).split(",") if v.strip()]
        if len(items) > MAX_LIST_ITEMS:  # before converting them: a million entries would take a while
            raise ValueError(f"expected at most {MAX_LIST_ITEMS:,} entries, got {len(items):,}")
        if spec.name in ("latencyMax", "notAvailableDuration"):
            return [_convert_int(v) for v in items]
        return [str(v).strip() for v in items]
    if isinstance(current, int):
        return _convert_int(value)
    if isinstance(current, float):
        try:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        except ValueError:
            raise ValueError(f"expected a number, got {value!r}") from None
    if not isinstance(value, str):
        raise ValueError(f"expected text, got {value!r}")
    return value


def _convert_int(value: object) -> int:
    # At most 18 digits: any limit is far below, and int() of a huge text is slow.
    if isinstance(value, (float, bool)) or not re.fullmatch(r"\s*[-+]?\d{1,18}\s*", str(value)):
        raise ValueError(f"expected a whole number, got {value!r}")
    return int(value)


def _line_of(text: str, section: str | None, key: str) -> int | None:
    """The line (1-based) where `key` is set, in `[section]` if given."""
    lines = text.splitlines()
    start = 0
    if section is not None:
        header = re.compile(rf"^\s*\[\s*{re.escape(section)}\s*\]")
        start = next((i for i, line in enumerate(lines) if header.match(line)), None)
        if start is None:
            return None
        if key is None:
            return start + 1
    pattern = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=")
    for i in range(start, len(lines)):
        if i > start and section is not None and re.match(r"^\s*\[", lines[i]):
            break
        if pattern.match(lines[i]):
            return i + 1
    return start + 1 if section is not None else None


def apply_table(config: LabConfig, table: dict, *, path: str, text: str, skip: tuple[str, ...] = ()) -> None:
    """Apply a parsed TOML table, each section checked once it is complete; errors name path:line
    and the key."""
    for section_name, section in table.items():
        if section_name in skip:
            continue
        if section_name not in SECTIONS or not isinstance(section, dict):
            line = _line_of(text, section_name, None) or _line_of(text, None, section_name)
            if section_name in SECTIONS:  # `cluster = 5`
                raise ConfigError(f"{path}:{line}: {section_name} must be a table: [{section_name}] and its keys")
            raise ConfigError(f"{path}:{line}: unknown section [{section_name}] (sections: {', '.join(SECTIONS)})")
        for key, value in section.items():
            config.set(f"{section_name}.{key}", value,
                       where=f"{path}:{_line_of(text, section_name, key)}: [{section_name}] {key}")
        config.validate((section_name,))


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> LabConfig:
    config = LabConfig()
    if path is not None:
        try:
            text, table = read_toml(path)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        apply_table(config, table, path=str(path), text=text)
    apply_overrides(config, overrides)
    return config


def apply_overrides(config: LabConfig, overrides) -> None:
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. client.pollNameServerInterval=10s")
        config.set(key.strip(), value.strip(), where=f"--set {item}")
    config.validate()  # once every override is in: one may depend on another
