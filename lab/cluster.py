"""The assembled cluster: NameServers, brokers, producers and consumers as supervised nodes.

One Cluster runs on either network (simulated or loopback TCP) and any trio clock; it owns what
must outlive a node (broker stores) and turns every node's doings into event-log records.
"""

from __future__ import annotations

import random
from pathlib import Path

import trio

from chaos.network import Network
from nameserver.config import NamesrvConfig
from nameserver.server import NameServer

from .config import LabConfig
from .events import EventLog
from .nstables import snapshot
from .remoting import Node
from .supervisor import NodeHandle, Supervisor
from .topology import Topology, plan


class Cluster:
    def __init__(self, config: LabConfig, network: Network, events: EventLog, *, seed: int,
                 sockets: bool, run_dir: Path | None = None):
        self.config = config
        self.network = network
        self.events = events
        self.seed = seed
        self.sockets = sockets
        self.run_dir = run_dir
        self.topology: Topology = plan(config, seed)
        self.nameservers: dict[str, NameServer] = {}
        self.brokers: dict[str, object] = {}
        self.clients: dict[str, object] = {}
        self.stores: dict[str, object] = {}  # survive broker kills, as a disk would
        self.supervisor: Supervisor | None = None
        self._tables_key: dict[str, object] = {}

    # --- nodes ------------------------------------------------------------------------------------

    def node(self, name: str) -> Node:
        # Each node draws from its own RNG, so one node's randomness never shifts another's.
        return Node(name, self.network, self.events, self.config, random.Random(f"{self.seed}:{name}"))

    def port(self, port: int) -> int:
        return 0 if self.sockets else port  # real sockets take free ports; the simulation is fixed

    @property
    def namesrv_addrs(self) -> list[str]:
        return [h.address for h in self._handles("nameserver") if h.address]

    def _handles(self, role: str) -> list[NodeHandle]:
        return [h for h in self.supervisor.nodes.values() if h.role == role]

    async def _run_nameserver(self, name: str, port: int, task_status) -> None:
        c = self.config.nameserver
        config = NamesrvConfig(
            scanNotActiveBrokerInterval=c.scanNotActiveBrokerInterval,
            brokerChannelExpiredTime=c.brokerChannelExpiredTime,
            serverChannelMaxIdleTimeSeconds=c.serverChannelMaxIdleTimeSeconds,
            orderMessageEnable=c.orderMessageEnable,
        )
        node = self.node(name)
        server = NameServer(config, listener=lambda kind, fields: self._on_ns_event(name, kind, fields))
        listener, address = await self.network.listen(name, self.port(port))
        self.nameservers[name] = server
        self._tables_key.pop(name, None)
        node.emit("node.start", role="nameserver", address=address)
        await server.serve([listener], task_status=task_status, started=address)

    def _on_ns_event(self, name: str, kind: str, fields: dict) -> None:
        self.events.emit(name, kind, **fields)
        server = self.nameservers.get(name)
        if server is None:
            return
        routes = server.routes
        key = (routes.generation, tuple((a, live.data_version) for a, live in routes.broker_live_table.items()))
        if self._tables_key.get(name) != key:
            self._tables_key[name] = key
            self.events.emit(name, "ns.tables", **snapshot(routes))

    # --- life cycle -------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Start every node, NameServers first; report the NameServer addresses; run until
        cancelled."""
        async with trio.open_nursery() as nursery:
            self.supervisor = Supervisor(nursery, on_exit=self._on_node_exit)
            for name, port in self.topology.nameservers:
                self.supervisor.add(name, "nameserver",
                                    lambda task_status, name=name, port=port: self._run_nameserver(name, port, task_status))
            for name in self.supervisor.nodes:
                await self.supervisor.start(name)
            task_status.started(self.namesrv_addrs)
            await trio.sleep_forever()

    async def shutdown(self) -> None:
        """Stop gracefully: clients first, then brokers (which unregister), NameServers last."""
        for role in ("producer", "consumer", "broker", "nameserver"):
            for handle in self._handles(role):
                await self.supervisor.stop(handle.name)

    def _on_node_exit(self, handle: NodeHandle) -> None:
        self.network.close_node(handle.name)
        self.events.emit(handle.name, "node.stop", state=handle.state, **({"error": handle.error} if handle.error else {}))

    def status(self) -> list[dict]:
        return [{"node": h.name, "role": h.role, "state": h.state, "address": h.address}
                for h in self.supervisor.nodes.values()]
