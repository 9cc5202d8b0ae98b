"""The assembled cluster: NameServers, brokers, producers and consumers as supervised nodes.

One Cluster runs on either network (simulated or loopback TCP) and any trio clock; it owns what
must outlive a node (broker stores) and turns every node's doings into event-log records.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import msgpack
import trio

from chaos.network import Network, SimNetwork
from chaos.pause import Pause
from nameserver.config import NamesrvConfig
from nameserver.schedule import Schedule
from nameserver.server import NameServer

from lab.broker.server import Broker
from lab.clients.consumer import Consumer
from lab.clients.decoded import DecodedBodies
from lab.clients.instance import MQClientInstance

from lab.clients.producer import Producer
from lab.config import LabConfig
from lab.events import EventLog
from .fake_data import Bodies
from lab.broker.store import MessageStore
from .nstables import merge_tables, row_changes, snapshot
from .timeline import timeline
from lab.remoting.channels import ChannelTable, Node
from .supervisor import NodeHandle, Supervisor, describe
from .topology import Topology, plan
from lab.apps.node import ROLE as APP_ROLE, AppNodes


class Roles(NamedTuple):
    name_server: type[NameServer]
    broker: type[Broker]
    client_instance: type[MQClientInstance]
    consumer: type[Consumer]
    channel_table: type[ChannelTable]  # the lab's own calls (its admin): a table for the network


def roles_for(network: Network) -> Roles:
    """The roles' classes to run on `network`: on the simulated network the simulator's subclasses
    (lab/sim), imported only then, so that a run on sockets never loads the simulator."""
    if not isinstance(network, SimNetwork):
        return Roles(NameServer, Broker, MQClientInstance, Consumer, ChannelTable)
    from lab.sim.broker import broker_class
    from lab.sim.clients import client_instance_class, consumer_class
    from lab.sim.nameserver import name_server
    from lab.sim.remoting import SimNetworkChannelTable
    return Roles(name_server(network), broker_class(network), client_instance_class(network),
                 consumer_class(network), SimNetworkChannelTable)


class Cluster:
    def __init__(self, config: LabConfig, network: Network, events: EventLog, *, seed: int,
                 sockets: bool, run_dir: Path | None = None, processes: bool = False,
                 apps: list = (), apps_dir: Path | None = None):
        self.config = config
        self.network = network
        self.roles = roles_for(network)
        self.events = events
        # Every request a request fault acts on: what the TUI shows and the report counts.
        network.on_request_fault = lambda record: events.emit("lab", "chaos.request", **record)
        self.seed = seed
        self.sockets = sockets
        self.run_dir = run_dir  # the user's, kept; else a temporary one, made when first needed
        self._temporary_run_dir = False
        self.processes = processes  # NameServers and brokers as child processes (lab/run/child.py)
        self.pids: dict[str, int] = {}  # node -> pid of its running process (processes mode)
        self.topology: Topology = plan(config, seed)
        self.nameservers: dict[str, NameServer] = {}
        self.brokers: dict[str, object] = {}
        self.clients: dict[str, object] = {}
        self.decoded = DecodedBodies()  # the route and member-list bodies this run's clients decoded
        self.stores: dict[str, MessageStore] = {}  # survive broker kills, as a disk would
        self.topic_tables: dict[str, dict] = {}  # each broker's topic table: on its disk too
        self.supervisor: Supervisor | None = None
        self.pauses: dict[str, Pause] = {}  # node -> its Pause, for freeze (nodes in this process)
        self._tables: dict[str, dict] = {}  # NameServer -> its tables as its ns.tables records left them
        # Applications under test (lab/apps), nodes of role "app" on the lab's relays (sockets only)
        self.apps = AppNodes(list(apps), network, events, self.topology.roles(), apps_dir) if apps else None

    # --- nodes ------------------------------------------------------------------------------------

    def node(self, name: str) -> Node:
        # Each node draws from its own RNG, so one node's randomness never shifts another's.
        node = Node(name, self.network, self.events, self.config, random.Random(f"{self.seed}:{name}"),
                    phase=self.phase(name))
        self.pauses[name] = node.pause
        return node

    def phase(self, name: str) -> float:
        """Where in its periods a node's timers run (0..1), from the seed: as if each process had
        been started at its own moment, so a sweep over seeds covers the timings a cluster has."""
        return random.Random(f"{self.seed}:{name}:phase").random()

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
        pause = self.pauses[name] = Pause()
        server = self.roles.name_server(config, schedule=Schedule(self.phase(name), pause.sleep_until),
                                           listener=lambda kind, fields: self._on_ns_event(name, kind, fields))
        listener, address = await self.network.listen(name, self.port(name, port))
        config.listenPort = int(address.rsplit(":", 1)[1])  # what getNamesrvConfig says
        server.routes.track_changes()
        self.nameservers[name] = server
        self._tables.pop(name, None)  # a (re)started NameServer's first ns.tables has all five
        await server.serve([pause.listener(listener)], task_status=task_status, started=address)

    def _on_ns_event(self, name: str, kind: str, fields: dict) -> None:
        self.events.emit(name, kind, **fields)
        server = self.nameservers.get(name)
        if server is None:
            return
        routes = server.routes
        touched = routes.take_changes()  # the rows this event's change touched, never the whole table
        tables = self._tables.get(name)
        if tables is None:  # its first record since a (re)start: the five tables whole
            record = snapshot(routes)
            self._tables[name] = merge_tables({}, record, name_sets=True)
        else:
            record = row_changes(tables, routes, touched)
            merge_tables(tables, record, name_sets=True)
        if record:
            self.events.emit(name, "ns.tables", **record)

    def store(self, name: str) -> MessageStore:
        """A broker's disk: the same object (simulated) or file (sockets) across kills and restarts."""
        if name not in self.stores:
            path = None
            if self.sockets:
                path = self._ensure_run_dir() / f"{name}.store"
            self.stores[name] = MessageStore(path)
        return self.stores[name]

    async def _run_broker(self, spec, task_status) -> None:
        broker = self.roles.broker(
            self.node(spec.name), broker_name=spec.broker_name, broker_id=spec.broker_id,
            cluster_name=self.config.cluster.clusterName, namesrv_addrs=self.namesrv_addrs,
            store=self.store(spec.name), topics=self._broker_topics(spec.name), port=self.port(spec.name, spec.port))
        self.brokers[spec.name] = broker
        await broker.run(task_status=task_status)

    def _broker_topics(self, name: str) -> dict:
        # The topic table is part of the broker's disk too: auto-created topics survive a restart.
        return self.topic_tables.setdefault(name, dict(self.topology.topics))

    async def _run_producer(self, name: str, task_status) -> None:
        node = self.node(name)
        payload = Bodies(f"{self.seed}:{name}", self.config.producer.messageSize)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.crash_on_failure)
            instance = self.roles.client_instance(node, self.namesrv_addrs, nursery, decoded=self.decoded)
            producer = self.clients[name] = Producer(node, instance, list(self.topology.topics), payload=payload)
            await producer.run(task_status=task_status)

    async def _run_consumer(self, name: str, task_status) -> None:
        node = self.node(name)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.crash_on_failure)
            instance = self.roles.client_instance(node, self.namesrv_addrs, nursery, decoded=self.decoded)
            consumer = self.clients[name] = self.roles.consumer(node, instance, list(self.topology.topics))
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
            return name, self.supervisor.nodes[name].error or describe(e)  # the cause, said once
        return name, None

    # --- nodes as processes (nslab up --processes) -------------------------------------------------

    async def _run_process(self, name: str, role: str, task_status) -> None:
        """Run a node as `python -m lab.run.child` and re-emit its events; a kill (cancel) is SIGKILL.
        The child sits in its own process group, so a terminal's Ctrl-C reaches only the lab,
        which then stops every child itself; PR_SET_PDEATHSIG covers the lab dying abruptly."""
        peers = {}
        for other, handle in self.supervisor.nodes.items():  # brokers dial NameServers and masters
            if other != name and handle.address:
                peers[handle.address] = await self.network.relay_port(name, other)

        spec = {"role": role, "name": name, "port": self.port(name, 0), "config": self.config.to_dict(),
                "seed": self.seed, "run_dir": str(self._ensure_run_dir()), "peers": peers,
                "namesrv": self.namesrv_addrs, "parent": os.getpid(), "clock": timeline()}
        # Forked here, in trio's thread, not with trio.lowlevel.open_process: that forks in a worker
        # thread, and PR_SET_PDEATHSIG (lab/run/child.py) fires when the forking *thread* exits — an
        # idle worker thread retires after seconds and would take the child with it.
        process = subprocess.Popen([sys.executable, "-m", "lab.run.child", json.dumps(spec)],
                                   stdout=subprocess.PIPE, start_new_session=True)
        stdout = trio.lowlevel.FdStream(os.dup(process.stdout.fileno()))
        process.stdout.close()
        exited = os.pidfd_open(process.pid)  # readable once the child exits (Linux)
        self.pids[name] = process.pid
        try:
            unpacker = msgpack.Unpacker()
            started, failure = False, None
            async for chunk in stdout:
                unpacker.feed(chunk)
                for record in unpacker:
                    if "listening" in record:  # other nodes reach it through relays from now on
                        self.network.listening(name, record["listening"])
                        task_status.started(record["listening"])
                        started = True
                    elif "failed" in record:  # the node's own error, its last word
                        failure = record["failed"]
                    else:
                        self.events.emit(record.pop("node"), record.pop("kind"), pid=process.pid, **record)
            await trio.lowlevel.wait_readable(exited)
            code = process.wait()
            if code != 0 or not started:  # an exit nobody asked for: the supervisor reports it
                exit_text = f"process {process.pid} exited with {_exit_text(code)}"
                raise RuntimeError(f"{failure} ({exit_text})" if failure else exit_text)
        finally:
            self.pids.pop(name, None)
            with trio.CancelScope(shield=True):
                if process.poll() is None:
                    process.kill()  # SIGKILL, even when SIGSTOPped
                    await trio.lowlevel.wait_readable(exited)
                process.wait()  # reaped: no zombie
                os.close(exited)
                await stdout.aclose()

    async def _stop_process(self, name: str) -> None:
        """Graceful stop: SIGTERM, the child unregisters its broker and exits."""
        pid = self.pids.get(name)
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
            handle = self.supervisor.nodes[name]
            with trio.move_on_after(10):
                await handle.done.wait()

    def signal_process(self, name: str, sig: int) -> bool:
        """SIGSTOP / SIGCONT a node's process (an app's whole process group); False when it runs in this one."""
        if self.apps is not None and name in self.apps:
            self.apps.signal(name, sig)
            return True
        pid = self.pids.get(name)
        if pid is None:
            return False
        os.kill(pid, sig)
        return True

    def _ensure_run_dir(self) -> Path:
        if self.run_dir is None:
            self.run_dir = Path(tempfile.mkdtemp(prefix=f"nslab-{self.seed}-"))
            self._temporary_run_dir = True
        else:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        return self.run_dir

    def release(self) -> None:
        """When the run is over, however it ended: close the stores, and remove the run directory
        unless the user named it. The stores outlive a broker's kill, not the run."""
        for store in self.stores.values():
            store.close()  # every write was flushed already; this releases the files
        if self._temporary_run_dir and self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _add_nodes(self) -> None:
        add = self.supervisor.add
        if self.processes:
            for name, _ in self.topology.nameservers:
                add(name, "nameserver", lambda task_status, name=name: self._run_process(name, "nameserver", task_status),
                    stop=lambda name=name: self._stop_process(name))
            for spec in self.topology.brokers:
                add(spec.name, "broker", lambda task_status, name=spec.name: self._run_process(name, "broker", task_status),
                    stop=lambda name=spec.name: self._stop_process(name))
        for name, port in self.topology.nameservers if not self.processes else ():
            add(name, "nameserver", lambda task_status, name=name, port=port: self._run_nameserver(name, port, task_status))
        for spec in self.topology.brokers if not self.processes else ():
            add(spec.name, "broker", lambda task_status, spec=spec: self._run_broker(spec, task_status),
                stop=lambda name=spec.name: self.brokers[name].shutdown())
        for name in self.topology.consumers:
            add(name, "consumer", lambda task_status, name=name: self._run_consumer(name, task_status),
                stop=lambda name=name: self.clients[name].shutdown())
        for name in self.topology.producers:
            add(name, "producer", lambda task_status, name=name: self._run_producer(name, task_status),
                stop=lambda name=name: self.clients[name].shutdown())
        for name in self.apps.specs if self.apps is not None else ():
            add(name, APP_ROLE, lambda task_status, name=name: self.apps.run(name, task_status),
                stop=lambda name=name: self.apps.stop(name))

    # --- life cycle -------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Start every node — NameServers, then brokers, one after another; then every client at
        once — report the NameServer addresses; run until cancelled.

        Clients start together, as a fleet of applications would: each fetches every route it
        uses before it is up, and one after another a large cluster's consumers took 80 virtual
        seconds to join, each join moving most queues of the group once more."""
        async with trio.open_nursery() as nursery:
            self.supervisor = Supervisor(nursery, on_start=self._on_node_start, on_exit=self._on_node_exit)
            self._add_nodes()
            clients = []
            for handle in self.supervisor.nodes.values():  # NameServers, brokers, consumers, producers
                if handle.role in ("nameserver", "broker"):
                    await self.supervisor.start(handle.name)
                elif handle.role != APP_ROLE:
                    clients.append(handle.name)
            async with trio.open_nursery() as starting:
                for name in clients:
                    starting.start_soon(self.supervisor.start, name)
            for name in self.apps.specs if self.apps is not None else ():  # once the cluster is up
                await self.supervisor.start(name)
            task_status.started(self.namesrv_addrs)
            await trio.sleep_forever()

    async def shutdown(self) -> None:
        """Stop gracefully: apps (each given its grace) and clients first, then brokers (which
        unregister), NameServers last."""
        await self.stop_apps("end")
        for role in ("producer", "consumer", "broker", "nameserver"):
            for handle in self._handles(role):
                await self.supervisor.stop(handle.name)

    async def stop_apps(self, reason: str) -> None:
        """Every app still running: SIGTERM, SIGKILL after its grace (lab/apps/process.py)."""
        if self.apps is None:
            return
        await self.apps.stop_all(reason)
        for name in self.apps.specs:
            await self.supervisor.stop(name)  # its body has returned: marks it stopped

    def _on_node_start(self, handle: NodeHandle) -> None:
        pid = self.pids.get(handle.name) or (self.apps.pid(handle.name) if self.apps is not None else None)
        self.events.emit(handle.name, "node.start", role=handle.role, address=handle.address,
                         **({"pid": pid} if pid else {}))

    def _on_node_exit(self, handle: NodeHandle) -> None:
        self.network.close_node(handle.name)
        self.events.emit(handle.name, "node.stop", state=handle.state, **({"error": handle.error} if handle.error else {}))

    def status(self) -> list[dict]:
        return [{"node": h.name, "role": h.role, "state": h.state, "address": h.address,
                 **({"pid": self.pids[h.name]} if h.name in self.pids else {})}
                for h in self.supervisor.nodes.values()]


def _exit_text(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"code {code}"
