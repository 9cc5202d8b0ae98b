"""The assembled cluster: NameServers, brokers, producers and consumers as supervised nodes.

One Cluster runs on either network (simulated or loopback TCP) and any trio clock; it owns what
must outlive a node (broker stores) and turns every node's doings into event-log records.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import trio

from chaos.network import Network
from nameserver.config import NamesrvConfig
from nameserver.server import NameServer

from .broker import Broker
from .clients.consumer import Consumer
from .clients.instance import MQClientInstance
from .clients.producer import Producer
from .config import LabConfig
from .events import EventLog
from .fake_data import Bodies
from .store import MessageStore
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

    def port(self, name: str, port: int) -> int:
        """Simulated nodes use fixed ports; real sockets take a free port the first time and keep
        it across restarts, since brokers and clients hold the address."""
        if not self.sockets:
            return port
        handle = self.supervisor.nodes.get(name)
        if handle is not None and handle.address:
            return int(handle.address.rpartition(":")[2])
        return 0

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
        server = NameServer(config, listener=lambda kind, fields: self._on_ns_event(name, kind, fields))
        listener, address = await self.network.listen(name, self.port(name, port))
        self.nameservers[name] = server
        self._tables_key.pop(name, None)
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

    def store(self, name: str) -> MessageStore:
        """A broker's disk: the same object (simulated) or file (sockets) across kills and restarts."""
        if name not in self.stores:
            path = None
            if self.sockets:
                if self.run_dir is None:
                    self.run_dir = Path(tempfile.mkdtemp(prefix=f"nslab-{self.seed}-"))
                path = self.run_dir / f"{name}.store"
            self.stores[name] = MessageStore(path)
        return self.stores[name]

    async def _run_broker(self, spec, task_status) -> None:
        broker = Broker(self.node(spec.name), broker_name=spec.broker_name, broker_id=spec.broker_id,
                        cluster_name=self.config.cluster.clusterName, namesrv_addrs=self.namesrv_addrs,
                        store=self.store(spec.name), topics=self._broker_topics(spec.name),
                        port=self.port(spec.name, spec.port))
        self.brokers[spec.name] = broker
        await broker.run(task_status=task_status)

    def _broker_topics(self, name: str) -> dict:
        # The topic table is part of the broker's disk too: auto-created topics survive a restart.
        return self.stores.setdefault(f"{name}:topics", dict(self.topology.topics))

    async def _run_producer(self, name: str, task_status) -> None:
        node = self.node(name)
        payload = Bodies(f"{self.seed}:{name}", self.config.producer.messageSize)
        async with trio.open_nursery() as nursery:
            instance = MQClientInstance(node, self.namesrv_addrs, nursery)
            producer = self.clients[name] = Producer(node, instance, list(self.topology.topics), payload=payload)
            await producer.run(task_status=task_status)

    async def _run_consumer(self, name: str, task_status) -> None:
        node = self.node(name)
        async with trio.open_nursery() as nursery:
            instance = MQClientInstance(node, self.namesrv_addrs, nursery)
            consumer = self.clients[name] = Consumer(node, instance, list(self.topology.topics))
            await consumer.start()
            task_status.started()
            await trio.sleep_forever()

    async def add_client(self, role: str) -> tuple[str, str | None]:
        """Start a new producer or consumer mid-run: (its name, None) or (its name, why it failed)."""
        index = sum(1 for h in self.supervisor.nodes.values() if h.role == role)
        name = f"{role}-{index}"
        run = self._run_producer if role == "producer" else self._run_consumer
        self.supervisor.add(name, role, lambda task_status: run(name, task_status),
                            stop=lambda: self.clients[name].shutdown())
        try:
            await self.supervisor.start(name)
        except Exception as e:  # e.g. every NameServer down: a new client cannot start
            return name, str(e)
        return name, None

    def _add_nodes(self) -> None:
        add = self.supervisor.add
        for name, port in self.topology.nameservers:
            add(name, "nameserver", lambda task_status, name=name, port=port: self._run_nameserver(name, port, task_status))
        for spec in self.topology.brokers:
            add(spec.name, "broker", lambda task_status, spec=spec: self._run_broker(spec, task_status),
                stop=lambda name=spec.name: self.brokers[name].shutdown())
        for name in self.topology.consumers:
            add(name, "consumer", lambda task_status, name=name: self._run_consumer(name, task_status),
                stop=lambda name=name: self.clients[name].shutdown())
        for name in self.topology.producers:
            add(name, "producer", lambda task_status, name=name: self._run_producer(name, task_status),
                stop=lambda name=name: self.clients[name].shutdown())

    # --- life cycle -------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Start every node, NameServers first; report the NameServer addresses; run until
        cancelled."""
        async with trio.open_nursery() as nursery:
            self.supervisor = Supervisor(nursery, on_start=self._on_node_start, on_exit=self._on_node_exit)
            self._add_nodes()
            for name in self.supervisor.nodes:  # NameServers, brokers, consumers, producers
                await self.supervisor.start(name)
            task_status.started(self.namesrv_addrs)
            await trio.sleep_forever()

    async def shutdown(self) -> None:
        """Stop gracefully: clients first, then brokers (which unregister), NameServers last."""
        for role in ("producer", "consumer", "broker", "nameserver"):
            for handle in self._handles(role):
                await self.supervisor.stop(handle.name)

    def _on_node_start(self, handle: NodeHandle) -> None:
        self.events.emit(handle.name, "node.start", role=handle.role, address=handle.address)

    def _on_node_exit(self, handle: NodeHandle) -> None:
        self.network.close_node(handle.name)
        self.events.emit(handle.name, "node.stop", state=handle.state, **({"error": handle.error} if handle.error else {}))

    def status(self) -> list[dict]:
        return [{"node": h.name, "role": h.role, "state": h.state, "address": h.address}
                for h in self.supervisor.nodes.values()]
