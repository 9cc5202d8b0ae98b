"""NameServer configuration: RocketMQ's property names and defaults, and duration parsing."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

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


@dataclass(slots=True)
class NamesrvConfig:
    """NamesrvConfig + the NettyServerConfig keys that matter here. Durations are seconds.

    Deviation: kvConfigPath defaults to None (KV config kept in memory) rather than
    ~/namesrv/kvConfig.json, so a lab never writes into the user's home unless asked.
    """

    listenPort: int = 9876
    rocketmqHome: str = ""
    kvConfigPath: str | None = None
    configStorePath: str = ""
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    scanNotActiveBrokerInterval: float = 10.0
    brokerChannelExpiredTime: float = 120.0
    serverChannelMaxIdleTimeSeconds: float = 120.0

    def black_list(self) -> set[str]:
        return {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"} | {
            k for k in self.configBlackList.split(";") if k
        }

    def to_properties(self) -> str:
        lines = []
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif f.name in _MILLIS:
                value = round(value * 1000)
            elif isinstance(value, float):
                value = round(value)
            elif value is None:
                value = ""
            lines.append(f"{f.name}={value}")
        return "\n".join(lines) + "\n"

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
