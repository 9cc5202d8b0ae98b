"""Applications as nodes of a running cluster (sockets mode): each a supervised node of role "app".

Its links pass the lab's relays under its node name: NAMESRV_ADDR (and `{namesrv}`) lists its
relays to every NameServer, and the NameServers' route and cluster replies reach it with each
broker's address replaced by its relay to that broker. So every fault on a link applies to the app:
`partition app / ns-0`, `toxic app:broker-a-0 latency ...`, request faults on its links. What it
sends and receives on them is recorded (wire_watch.py).
"""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

import trio

from chaos.network import TcpNetwork

from lab.events import EventLog

from .process import AppProcess
from .spec import AppSpec
from .wire_watch import ConnWatch

ROLE = "app"


class AppNodes:
    def __init__(self, specs: list[AppSpec], network: TcpNetwork, events: EventLog, roles: dict[str, str],
                 logs: Path | None):
        """roles: the lab's nodes (NameServers and brokers are what an app dials)."""
        if not isinstance(network, TcpNetwork):
            raise ValueError("an app runs only on real sockets (nslab run --sockets)")
        self.specs = {s.name: s for s in specs}
        self.network, self.events, self.roles = network, events, roles
        self.logs = logs if logs is not None else Path(tempfile.mkdtemp(prefix="nslab-apps-"))
        self.relays: dict[tuple[str, str], int] = {}  # (app, node) -> the relay's port
        self.processes: dict[str, AppProcess] = {}  # app -> its current (or last) process
        self._started: set[str] = set()
        network.link_watch = self._watch

    def __contains__(self, name: str) -> bool:
        return name in self.specs

    # --- relays and addresses ---------------------------------------------------------------------

    def _relay_address(self, app: str, node: str) -> str:
        return f"{self.network.host}:{self.relays[(app, node)]}"

    async def _open_relays(self, app: str) -> None:
        for node, role in self.roles.items():
            if role in ("nameserver", "broker") and (app, node) not in self.relays:
                self.relays[(app, node)] = await self.network.relay_port(app, node)

    def namesrv(self, app: str) -> str:
        """NAMESRV_ADDR for the app: its relays to every NameServer, ';'-joined as RocketMQ reads it."""
        return ";".join(self._relay_address(app, n) for n, role in self.roles.items() if role == "nameserver")

    def _broker_relays(self, app: str) -> dict[str, str]:
        """Each broker's own address -> the app's relay to it."""
        return {address: self._relay_address(app, node) for node, address in self.network.address_of.items()
                if self.roles.get(node) == "broker" and (app, node) in self.relays}

    def _node_of(self, app: str, address: str) -> str:
        for (a, node), port in self.relays.items():
            if a == app and address == f"{self.network.host}:{port}":
                return node
        for node, own in self.network.address_of.items():
            if own == address:
                return node
        return address

    def _watch(self, src: str, dst: str) -> ConnWatch | None:
        if src not in self.specs:
            return None
        return ConnWatch(src, dst, self.roles.get(dst, "?"), self.events,
                         addresses=lambda: self._broker_relays(src), node_of=lambda a: self._node_of(src, a))

    # --- the node -----------------------------------------------------------------------------------

    async def run(self, name: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The app's supervised body: start its process, wait for it to exit."""
        await self._open_relays(name)
        process = self.processes[name] = AppProcess(self.specs[name], self.events, self.logs,
                                                    namesrv=self.namesrv(name), append=name in self._started)
        self._started.add(name)
        process.start()
        task_status.started(None)
        await process.wait()

    def pid(self, name: str) -> int | None:
        process = self.processes.get(name)
        return process.pid if process is not None and not process.exited.is_set() else None

    async def stop(self, name: str, reason: str = "stop") -> None:
        process = self.processes.get(name)
        if process is not None:
            await process.terminate(reason)

    async def stop_all(self, reason: str) -> None:
        """Every app at once: SIGTERM, then SIGKILL after each one's grace."""
        async with trio.open_nursery() as nursery:
            for name in self.specs:
                nursery.start_soon(self.stop, name, reason)

    def signal(self, name: str, sig: signal.Signals) -> bool:
        process = self.processes.get(name)
        return process is not None and process.signal(sig)
