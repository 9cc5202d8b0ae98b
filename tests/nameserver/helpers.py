"""Builders shared by test_routes, test_processor and test_bodies.

Loaded by tests/nameserver/conftest.py and handed to the tests as the `h` fixture, so nothing
depends on how pytest puts this directory on sys.path.
"""

from __future__ import annotations

from nameserver import bodies
from nameserver.config import NamesrvConfig
from nameserver.processor import DefaultRequestProcessor
from nameserver.protocol import RemotingCommand, RequestCode, SerializeType, crc32
from nameserver.protocol import fastjson
from nameserver.protocol.codes import CURRENT_VERSION
from nameserver.routes import DataVersion, RouteInfoManager, TopicConfig

CLUSTER = "DefaultCluster"
DV1 = DataVersion(1_700_000_000_000, 1)
DV2 = DataVersion(1_700_000_000_000, 2)
_UNSET = object()


def addr(broker_name: str = "broker-a", broker_id: int = 0) -> str:
    """A distinct, stable address per (broker name, id): broker-a id 0 -> 10.0.0.1:10911."""
    host = ord(broker_name[-1]) - ord("a") + 1
    return f"10.0.{broker_id}.{host}:10911"


def ha_addr(broker_name: str = "broker-a", broker_id: int = 0) -> str:
    return addr(broker_name, broker_id).replace(":10911", ":10912")


def topics(*names: str, queues: int = 4, perm: int = 6, sys_flag: int = 0,
           order: bool = False) -> dict[str, TopicConfig]:
    return {n: TopicConfig(n, queues, queues, perm, "SINGLE_TAG", sys_flag, order) for n in names}


class Channel:
    """Stands for the connection a registration arrived on."""

    def __init__(self, name: str):
        self.name = name
        self.remote_addr = f"{name}:55555"

    def __repr__(self) -> str:
        return f"Channel({self.name!r})"


# --- RouteInfoManager -------------------------------------------------------------------------------

class Routes:
    """A RouteInfoManager plus a one-line register with sensible defaults and a channel per address."""

    def __init__(self, expiry: float = 120.0):
        self.rim = RouteInfoManager(expiry)
        self.channels: dict[str, Channel] = {}

    def channel(self, broker_addr: str) -> Channel:
        return self.channels.setdefault(broker_addr, Channel(broker_addr))

    def register(self, broker_name: str = "broker-a", broker_id: int = 0, *, broker_addr: str | None = None,
                 cluster: str = CLUSTER, table=_UNSET, version: DataVersion = DV1,
                 filters: list[str] | None = None, now: float = 0.0, channel: object = None):
        broker_addr = broker_addr or addr(broker_name, broker_id)
        table = topics("TopicTest") if table is _UNSET else table
        return self.rim.register_broker(
            cluster, broker_addr, broker_name, broker_id, ha_addr(broker_name, broker_id), version,
            table, filters, channel if channel is not None else self.channel(broker_addr), now)

    def unregister(self, broker_name: str = "broker-a", broker_id: int = 0, cluster: str = CLUSTER):
        return self.rim.unregister_broker(cluster, addr(broker_name, broker_id), broker_name, broker_id)

    def addrs(self, broker_name: str = "broker-a") -> dict[int, str] | None:
        bd = self.rim.broker_addr_table.get(broker_name)
        return None if bd is None else dict(bd.broker_addrs)

    def queue(self, topic: str, broker_name: str = "broker-a"):
        return self.rim.topic_queue_table.get(topic, {}).get(broker_name)

    def snapshot(self) -> tuple:
        """Everything a route or cluster read can see, as plain data."""
        rim = self.rim
        routes = {t: bodies.route_to_wire(rim.pickup_topic_route_data(t)) if rim.pickup_topic_route_data(t)
                  else None for t in rim.topic_queue_table}
        cluster = bodies.cluster_info_to_wire(rim.broker_addr_table, rim.cluster_addr_table)
        return fastjson.dumps(routes), fastjson.dumps(cluster)


# --- requests ----------------------------------------------------------------------------------------

def register_body(table=None, version: DataVersion = DV1, filters=(), serialize_type=SerializeType.JSON,
                  compressed: bool = False) -> bytes:
    table = topics("TopicTest") if table is None else table
    return bodies.encode_register_body(table, version, list(filters), serialize_type, compressed=compressed)


def register_request(broker_name: str = "broker-a", broker_id: int = 0, *, table=None,
                     version: DataVersion = DV1, filters=(), cluster: str = CLUSTER,
                     broker_addr: str | None = None, serialize_type=SerializeType.JSON,
                     compressed: bool = False, crc=None, body=_UNSET, oneway: bool = False,
                     request_version: int = CURRENT_VERSION, opaque: int = 0,
                     drop: str | None = None) -> RemotingCommand:
    """A REGISTER_BROKER as a 4.9.8 broker sends it. crc=True computes the masked CRC32 of the
    body; drop names a header field to leave out."""
    if body is _UNSET:
        body = register_body(table, version, filters, serialize_type, compressed)
    if crc is True:
        crc = crc32(body or b"")
    fields = {
        "brokerName": broker_name, "brokerAddr": broker_addr or addr(broker_name, broker_id),
        "clusterName": cluster, "haServerAddr": ha_addr(broker_name, broker_id), "brokerId": broker_id,
        "compressed": compressed,
        "bodyCrc32": crc or 0,
    }
    fields.pop(drop, None)
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body, oneway=oneway,
                                   serialize_type=serialize_type, version=request_version, opaque=opaque)


class Ns:
    """A DefaultRequestProcessor with a clock, a channel per broker address and every event it reports."""

    def __init__(self, config: NamesrvConfig | None = None, **config_fields):
        self.events: list[tuple[str, dict]] = []
        self.proc = DefaultRequestProcessor(config or NamesrvConfig(**config_fields),
                                            listener=lambda kind, f: self.events.append((kind, f)))
        self.now = 0.0
        self.channels: dict[str, Channel] = {}

    @property
    def routes(self) -> RouteInfoManager:
        return self.proc.routes

    def channel(self, broker_addr: str) -> Channel:
        return self.channels.setdefault(broker_addr, Channel(broker_addr))

    def send(self, request: RemotingCommand, channel: object = None, now: float | None = None):
        if channel is None:
            channel = self.channel((request.ext_fields or {}).get("brokerAddr", "client"))
        return self.proc.process_request(request, channel, self.now if now is None else now)

    def call(self, code: int, fields: dict | None = None, body: bytes | None = None, **kw):
        now = kw.pop("now", None)
        return self.send(RemotingCommand.request(code, fields, body, **kw), now=now)

    def register(self, broker_name: str = "broker-a", broker_id: int = 0, now: float | None = None, **kw):
        return self.send(register_request(broker_name, broker_id, **kw), now=now)

    def route(self, topic: str = "TopicTest", **kw):
        return self.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, **kw)

    def json(self, reply: RemotingCommand) -> object:
        return bodies.load(reply.body, reply.serialize_type)

    def kinds(self, kind: str) -> list[dict]:
        return [f for k, f in self.events if k == kind]
