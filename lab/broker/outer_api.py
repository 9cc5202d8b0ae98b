"""BrokerOuterAPI: what a broker says to the NameServers — REGISTER_BROKER and UNREGISTER_BROKER.

Registration goes to every NameServer at once, each call bounded by registerBrokerTimeoutMills;
unregistration goes to one after the other, 3 s each, as RocketMQ 4.9.8 does. Each call is one
event: `broker.register` / `broker.unregister` with {ns, ok, code | error, latency}.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import trio

from nameserver.bodies import encode_register_body
from nameserver.client import RemotingError
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode, crc32
from nameserver.routes import DataVersion, TopicConfig

from lab.remoting.channels import LAB_SERIALIZE_TYPE, ChannelTable, Node, request

UNREGISTER_TIMEOUT = 3.0  # seconds, per NameServer


class BrokerIdentity(NamedTuple):
    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int
    ha_server_addr: str


class RegisterBrokerResult(NamedTuple):
    master_addr: str | None
    ha_server_addr: str | None


class BrokerOuterAPI:
    def __init__(self, node: Node, channels: ChannelTable, namesrv_addrs: list[str]):
        self.node = node
        self.channels = channels
        self.namesrv_addrs = list(namesrv_addrs)
        self._body: tuple[object, bytes] | None = None  # (its same_body key, the last register body)

    async def register_broker_all(self, broker: BrokerIdentity, topic_config_table: Mapping[str, TopicConfig],
                                  data_version: DataVersion, *, compressed: bool, timeout: float,
                                  trigger: str, same_body: object = None) -> RegisterBrokerResult | None:
        """Register with every NameServer; the result of the first that answered SUCCESS.
        `same_body`: a key under which the body is the same as the last with that key (the whole
        table under one DataVersion and permission): encoding 2,000 topic configs every 30 s was
        most of a large broker's registration."""
        key = (same_body, compressed)
        if same_body is None or self._body is None or self._body[0] != key:
            self._body = (key, encode_register_body(topic_config_table, data_version, [], LAB_SERIALIZE_TYPE,
                                                    compressed=compressed))
        body = self._body[1]
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "haServerAddr": broker.ha_server_addr,
                  "brokerId": broker.broker_id, "compressed": compressed, "bodyCrc32": crc32(body)}
        results: list[RegisterBrokerResult] = []

        async def register(address: str) -> None:
            reply = await self._call("broker.register", address, request(RequestCode.REGISTER_BROKER, header, body),
                                     timeout, trigger=trigger)
            if reply is not None and reply.code == ResponseCode.SUCCESS:
                results.append(RegisterBrokerResult(reply.field("masterAddr"), reply.field("haServerAddr")))

        async with trio.open_nursery() as nursery:
            for address in self.namesrv_addrs:
                nursery.start_soon(register, address)
        return results[0] if results else None

    async def unregister_broker_all(self, broker: BrokerIdentity) -> None:
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "brokerId": broker.broker_id}
        for address in self.namesrv_addrs:
            await self._call("broker.unregister", address, request(RequestCode.UNREGISTER_BROKER, header),
                             UNREGISTER_TIMEOUT)

    async def _call(self, kind: str, address: str, command: RemotingCommand, timeout: float,
                    **fields) -> RemotingCommand | None:
        """One call, reported as one event; failures are only reported, as RocketMQ only logs them."""
        start = trio.current_time()
        try:
            reply = await self.channels.invoke(address, command, timeout)
            outcome = {"ok": reply.code == ResponseCode.SUCCESS, "code": reply.code}
        except RemotingError as e:
            reply, outcome = None, {"ok": False, "error": str(e)}
        self.node.emit(kind, ns=address, **outcome, latency=round(trio.current_time() - start, 6), **fields)
        return reply
