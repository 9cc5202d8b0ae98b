"""NameServer configuration: RocketMQ's property names and defaults, and duration parsing."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields

from .java_order import concurrent_hashmap_order

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str | int | float) -> float:
    """'500ms', '10s', '2m', '1h', '2m30s' or plain seconds ('30', 2.5) -> seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"bad duration {text!r}: must not be negative")
        return float(text)
    m = _DURATION.match(str(text))
    compound = str(text).strip()
    if not m and compound and _PART.sub("", compound) == "":
        return sum(float(n) * _UNIT[u] for n, u in _PART.findall(compound))
    if not m:
        raise ValueError(f"bad duration {text!r}: use seconds or a number with ms, s, m or h (10s, 2m)")
    return float(m.group(1)) * _UNIT[m.group(2)]


# Keys RocketMQ states in milliseconds; held here in seconds like every other duration.
_MILLIS = {"scanNotActiveBrokerInterval", "brokerChannelExpiredTime"}

# getNamesrvConfig's keys: NamesrvConfig's fields, then NettyServerConfig's, each in declaration
# order (4.9.8); then the lab's own two, which 4.9.8 hard-codes in RouteInfoManager.
NAMESRV_KEYS = ("rocketmqHome", "kvConfigPath", "configStorePath", "productEnvName", "clusterTest",
                "orderMessageEnable", "configBlackList")
NETTY_SERVER_KEYS = (
    "listenPort", "serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
    "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue", "serverChannelMaxIdleTimeSeconds",
    "serverSocketSndBufSize", "serverSocketRcvBufSize", "writeBufferHighWaterMark",
    "writeBufferLowWaterMark", "serverSocketBacklog", "serverPooledByteBufAllocatorEnable",
    "useEpollNativeSelector")
LAB_KEYS = ("scanNotActiveBrokerInterval", "brokerChannelExpiredTime")
# A Java 9+ Properties is a ConcurrentHashMap(8): 16 buckets to start with.
_PROPERTIES_CAPACITY = 16


def _user_home_path(*parts: str) -> str:
    """System.getProperty("user.home") + File.separator + ..."""
    return os.path.join(os.path.expanduser("~"), *parts)


@dataclass(slots=True)
class NamesrvConfig:
    """NamesrvConfig + NettyServerConfig (4.9.8's keys and defaults, the port NamesrvStartup sets)
    + the lab's scan interval and expiry. Durations are seconds.

    Deviation: kvConfigPath None keeps the KV config in memory, so a lab never writes into the
    user's home unless asked; getNamesrvConfig still shows the path 4.9.8 would use.
    """

    rocketmqHome: str | None = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME"))
    kvConfigPath: str | None = None
    configStorePath: str = field(default_factory=lambda: _user_home_path("namesrv", "namesrv.properties"))
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    listenPort: int = 9876  # the port listened on, once bound
    serverWorkerThreads: int = 8
    serverCallbackExecutorThreads: int = 0
    serverSelectorThreads: int = 3
    serverOnewaySemaphoreValue: int = 256
    serverAsyncSemaphoreValue: int = 64
    serverChannelMaxIdleTimeSeconds: float = 120.0
    serverSocketSndBufSize: int = 0
    serverSocketRcvBufSize: int = 0
    writeBufferHighWaterMark: int = 0
    writeBufferLowWaterMark: int = 0
    serverSocketBacklog: int = 1024
    serverPooledByteBufAllocatorEnable: bool = True
    useEpollNativeSelector: bool = False
    scanNotActiveBrokerInterval: float = 10.0
    brokerChannelExpiredTime: float = 120.0

    def black_list(self) -> set[str]:
        return {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"} | {
            k for k in self.configBlackList.split(";") if k
        }

    def _text(self, key: str) -> str | None:
        value = getattr(self, key)
        if key == "kvConfigPath" and value is None:
            return _user_home_path("namesrv", "kvConfig.json")
        if value is None:
            return None
        if isinstance(value, bool):
            return "true" if value else "false"
        if key in _MILLIS:
            return str(round(value * 1000))
        if isinstance(value, float):
            return str(round(value))
        return str(value)

    def to_properties(self) -> str:
        """GET_NAMESRV_CONFIG's text, as Configuration.getAllConfigsFormatString writes it: each
        config object's non-null fields go into a Properties, which is merged into the whole,
        and MixAll.properties2String writes `key=value` lines in the whole's order."""
        texts = {key: self._text(key) for key in NAMESRV_KEYS + NETTY_SERVER_KEYS + LAB_KEYS}
        merged: list[str] = []
        for keys in (NAMESRV_KEYS, NETTY_SERVER_KEYS, LAB_KEYS):
            merged += concurrent_hashmap_order([k for k in keys if texts[k] is not None], _PROPERTIES_CAPACITY)
        return "".join(f"{key}={texts[key]}\n"
                       for key in concurrent_hashmap_order(merged, _PROPERTIES_CAPACITY))

    def update_from_properties(self, text: str) -> list[str]:
        """Apply a Java properties text (UPDATE_NAMESRV_CONFIG). Unknown keys are ignored, as
        RocketMQ's Configuration does; a value that does not parse raises ValueError.
        Returns the keys applied."""
        parsed = parse_properties(text)
        known = {f.name: f for f in fields(self)}
        updates = {}
        for key, raw in parsed.items():
            if key not in known:
                continue
            current = getattr(self, key)
            if isinstance(current, bool):
                updates[key] = raw.strip().lower() == "true"
            elif isinstance(current, int):
                updates[key] = int(raw)
            elif isinstance(current, float):
                updates[key] = float(raw) / 1000 if key in _MILLIS else float(raw)
            else:
                updates[key] = raw
        for key, value in updates.items():
            setattr(self, key, value)
        return list(updates)


def parse_properties(text: str) -> dict[str, str]:
    """Java properties text: `key=value`, `key: value` or `key value`; # and ! start comments."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*(?:[=:]\s*|\s+|$)(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out
