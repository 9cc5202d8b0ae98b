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
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

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
ROUTE_PARSERS = ("fastjson", "strict", "go-v2")  # lab/clients/route_parsers.py's PARSERS
MAX_SLAVES = 9  # broker ports are 10 apart within a group, groups 100 apart (lab/run/topology.py)


def _rules(config: LabConfig) -> list[tuple]:
    """(key, holds, what it must be[, other keys it depends on]): every limit, in section order."""
    c, b, p, n = config.cluster, config.broker, config.producer, config.network

    def value(key: str):
        section, _, name = key.partition(".")
        return getattr(getattr(config, section), name)

    return [
        ("cluster.nameservers", c.nameservers >= 1, "must be at least 1"),
        ("cluster.brokers", len(c.brokers) >= 1, "must name at least one broker group"),
        ("cluster.brokers", len(set(c.brokers)) == len(c.brokers), "has a name twice"),
        ("cluster.slavesPerBroker", 0 <= c.slavesPerBroker <= MAX_SLAVES, f"must be within 0..{MAX_SLAVES}"),
        ("cluster.topics", c.topics >= 1 or bool(c.topicNames), "must be at least 1 (or give topicNames)",
         "cluster.topicNames"),
        ("cluster.topicNames", len(set(c.topicNames)) == len(c.topicNames), "has a name twice"),
        ("cluster.queuesPerTopic", c.queuesPerTopic >= 1, "must be at least 1"),
        ("cluster.producers", c.producers >= 0, "must not be negative"),
        ("cluster.consumers", c.consumers >= 0, "must not be negative"),
        ("nameserver.serverChannelMaxIdleTimeSeconds", config.nameserver.serverChannelMaxIdleTimeSeconds >= 0,
         "must not be negative (0 turns the idle close off)"),
        *[(key, value(key) > 0, "must be positive") for key in POSITIVE_DURATIONS],
        ("broker.brokerPermission", 0 <= b.brokerPermission <= 7, "must be a permission within 0..7 (6: read and write)"),
        ("broker.defaultTopicQueueNums", b.defaultTopicQueueNums >= 1, "must be at least 1"),
        ("producer.retryTimesWhenSendFailed", p.retryTimesWhenSendFailed >= 0, "must not be negative"),
        ("producer.latencyMax", len(p.latencyMax) >= 1, "must not be empty"),
        ("producer.latencyMax", p.latencyMax == sorted(p.latencyMax) and min(p.latencyMax, default=0) >= 0,
         "must be non-negative and ascending"),
        ("producer.notAvailableDuration", min(p.notAvailableDuration, default=0) >= 0, "must not be negative"),
        ("producer.notAvailableDuration", len(p.latencyMax) == len(p.notAvailableDuration),
         "must have as many entries as producer.latencyMax", "producer.latencyMax"),
        ("client.routeParser", config.client.routeParser in ROUTE_PARSERS,
         f"must be one of {', '.join(ROUTE_PARSERS)}"),
        ("producer.rate", p.rate > 0, "must be positive"),
        ("producer.messageSize", p.messageSize >= 1, "must be at least 1 (RocketMQ refuses an empty body)"),
        ("consumer.pullBatchSize", 1 <= config.consumer.pullBatchSize <= 1024, "must be within 1..1024"),
        ("network.latency", n.latency >= 0, "must not be negative"),
        ("network.jitter", n.jitter >= 0, "must not be negative"),
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
        kind = int if spec.name in ("latencyMax", "notAvailableDuration") else str
        return [kind(str(v).strip()) if kind is int else str(v).strip() for v in items]
    if isinstance(current, int):
        if isinstance(value, float) or isinstance(value, bool):
            raise ValueError(f"expected a whole number, got {value!r}")
        return int(value)
    if isinstance(current, float):
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected text, got {value!r}")
    return value


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
            raise ConfigError(f"{path}:{line}: unknown section [{section_name}] (sections: {', '.join(SECTIONS)})")
        for key, value in section.items():
            config.set(f"{section_name}.{key}", value,
                       where=f"{path}:{_line_of(text, section_name, key)}: [{section_name}] {key}")
        config.validate((section_name,))


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> LabConfig:
    config = LabConfig()
    if path is not None:
        text = read_toml_text(path)
        apply_table(config, parse_toml(text, path), path=str(path), text=text)
    apply_overrides(config, overrides)
    return config


def read_toml_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None


def parse_toml(text: str, path: str | Path) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


def apply_overrides(config: LabConfig, overrides) -> None:
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. client.pollNameServerInterval=10s")
        config.set(key.strip(), value.strip(), where=f"--set {item}")
    config.validate()  # once every override is in: one may depend on another
