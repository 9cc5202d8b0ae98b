"""Applying faults to a running cluster: one entry point for scenarios, `nslab chaos` and the TUI.

Every applied fault is a `chaos.fault` record in the event log, with where it came from.
"""

from __future__ import annotations

import signal

import trio

from chaos.faults import Fault, FaultError, VerbSpec, Vocabulary
from chaos.request_faults import RequestFault
from nameserver.protocol import RequestCode, ResponseCode

from lab.run.cluster import Cluster
from lab.config import parse_duration
from lab.remoting.channels import request
from lab.remoting.wire_codec import REMOTING

LAB_VERBS = [
    VerbSpec("ns-down", "node", "kill a NameServer, or every one: ns-down ns-0 | all"),
    VerbSpec("ns-up", "node", "start a NameServer again (its tables start empty): ns-up ns-0 | all"),
    VerbSpec("wipe-perm", "node", "wipe a broker group's write permission on every NameServer, "
                                  "as mqadmin wipeWritePerm does: wipe-perm broker-a"),
    VerbSpec("add-perm", "node", "give a broker group its write permission back: add-perm broker-a"),
    VerbSpec("new-client", "node", "start a new client mid-run: new-client producer | consumer"),
    VerbSpec("grow-topics", "node", "grow a broker's topic table: grow-topics broker-a-0 count=10000", ("count",)),
]

ADMIN_NODE = "mqadmin"
MAX_GROWN_TOPICS = 100_000  # a registration of them is tens of MB: the seeds' "too large" heartbeat, within memory


def vocabulary() -> Vocabulary:
    vocab = Vocabulary(parse_duration, REMOTING)
    for spec in LAB_VERBS:
        vocab.add(spec)
    return vocab


class LabControl:
    def __init__(self, cluster: Cluster, nursery: trio.Nursery):
        self.cluster = cluster
        self.admin = cluster.roles.channel_table(cluster.node(ADMIN_NODE), nursery)

    # --- validation -------------------------------------------------------------------------------

    def known_nodes(self) -> dict[str, str]:
        return {name: h.role for name, h in self.cluster.supervisor.nodes.items()}

    def validate(self, fault: Fault) -> None:
        validate(fault, self.known_nodes(), {b.broker_name for b in self.cluster.topology.brokers})
        if fault.verb in ("ns-down", "ns-up") and not self._nameservers(fault):
            target = fault.nodes[0]
            raise FaultError(f"{fault.verb}: {'every NameServer is' if target == 'all' else f'{target} is'} "
                             f"already {'down' if fault.verb == 'ns-down' else 'up'}")

    # --- applying ---------------------------------------------------------------------------------

    async def apply(self, fault: Fault, *, source: str) -> str:
        """Apply a fault now; returns what happened, in a sentence."""
        self.validate(fault)
        self.cluster.events.emit("lab", "chaos.fault", source=source, **fault.to_record())
        verb = fault.verb.replace("-", "_")
        return await getattr(self, f"_{verb}")(fault)

    async def _kill(self, fault: Fault) -> str:
        await self._kill_node(fault.nodes[0])
        return f"{fault.nodes[0]} killed"

    async def _kill_node(self, name: str) -> None:
        self.cluster.network.unfreeze(name)  # a node started again later is not frozen
        await self.cluster.supervisor.kill(name)

    async def _freeze(self, fault: Fault) -> str:
        name = fault.nodes[0]
        self.cluster.network.freeze(name)  # holds its links; a process of its own is SIGSTOPped too
        stopped = self.cluster.signal_process(name, signal.SIGSTOP)
        if not stopped:
            self.cluster.pauses[name].pause()  # its timers, waits and callbacks
        self.cluster.supervisor.nodes[name].state = "frozen"
        return f"{name} frozen{' (SIGSTOP)' if stopped else ''}: its connections stay open, nothing flows"

    async def _unfreeze(self, fault: Fault) -> str:
        name = fault.nodes[0]
        if not self.cluster.signal_process(name, signal.SIGCONT):
            # What came due while frozen runs first (a NameServer's overdue scan), then what
            # waited in its sockets arrives.
            self.cluster.pauses[name].resume()
        self.cluster.network.unfreeze(name)
        handle = self.cluster.supervisor.nodes[name]
        if handle.state == "frozen":
            handle.state = "up"
        return f"{name} resumed"

    async def _restart(self, fault: Fault) -> str:
        name = fault.nodes[0]
        handle = self.cluster.supervisor.nodes[name]
        if handle.running:
            await self._kill(fault)
        await self.cluster.supervisor.start(name)
        return f"{name} restarted"

    async def _stop(self, fault: Fault) -> str:
        if self.cluster.supervisor.nodes[fault.nodes[0]].state == "frozen":
            await self._unfreeze(fault)  # SIGCONT before SIGTERM: a stopped process cannot stop gracefully
        await self.cluster.supervisor.stop(fault.nodes[0])
        return f"{fault.nodes[0]} stopped gracefully"

    async def _partition(self, fault: Fault) -> str:
        self.cluster.network.partition(fault.groups, one_way=fault.one_way)
        return f"partitioned: {fault.describe()}"

    async def _isolate(self, fault: Fault) -> str:
        self.cluster.network.isolate(fault.nodes[0])
        return f"{fault.nodes[0]} isolated"

    async def _heal(self, fault: Fault) -> str:
        self.cluster.network.heal()
        return "network healed: no partition, isolation or toxic left"

    async def _toxic(self, fault: Fault) -> str:
        network, toxic = self.cluster.network, fault.toxic
        add = network.add_request_fault if isinstance(toxic, RequestFault) else network.add_toxic
        if len(fault.nodes) == 2:
            add(fault.nodes[0], fault.nodes[1], toxic)
            add(fault.nodes[1], fault.nodes[0], toxic)
        else:
            add(fault.nodes[0], "*", toxic)
            add("*", fault.nodes[0], toxic)
        if isinstance(toxic, RequestFault):
            return f"{toxic.describe()} on the requests between {' and '.join(fault.nodes)}" + \
                ("" if len(fault.nodes) == 2 else " and any peer")
        return f"{toxic.describe()} on the links of {' and '.join(fault.nodes)}"

    def _nameservers(self, fault: Fault) -> list[str]:
        """The NameServers an ns-down or ns-up changes: of those named, the ones up or down."""
        target = fault.nodes[0]
        named = [name for name, _ in self.cluster.topology.nameservers] if target == "all" else [target]
        nodes = self.cluster.supervisor.nodes
        return [n for n in named if nodes[n].running == (fault.verb == "ns-down")]

    async def _ns_down(self, fault: Fault) -> str:
        names = self._nameservers(fault)
        for name in names:
            await self._kill_node(name)
        return f"{', '.join(names)} down"

    async def _ns_up(self, fault: Fault) -> str:
        names = self._nameservers(fault)
        for name in names:
            await self.cluster.supervisor.start(name)
        return f"{', '.join(names)} up (empty tables until brokers register)"

    async def _operate_write_perm(self, fault: Fault, code: int, count_key: str) -> str:
        broker_name = fault.nodes[0]
        results = []
        for handle in self.cluster.supervisor.nodes.values():
            if handle.role != "nameserver" or handle.state != "up":
                continue
            try:
                reply = await self.admin.invoke(handle.address, request(code, {"brokerName": broker_name}),
                                                self.cluster.config.client.mqClientApiTimeout)
                ok = reply.code == ResponseCode.SUCCESS
                results.append(f"{handle.name}: {reply.field(count_key) if ok else reply.remark} topics")
            except Exception as e:  # an unreachable NameServer keeps its permissions, as with mqadmin
                results.append(f"{handle.name}: {e}")
        return f"{fault.verb} {broker_name}: " + "; ".join(results)

    async def _wipe_perm(self, fault: Fault) -> str:
        return await self._operate_write_perm(fault, RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount")

    async def _add_perm(self, fault: Fault) -> str:
        return await self._operate_write_perm(fault, RequestCode.ADD_WRITE_PERM_OF_BROKER, "addTopicCount")

    async def _new_client(self, fault: Fault) -> str:
        role = fault.nodes[0]
        name, error = await self.cluster.add_client(role)
        self.cluster.events.emit(name, "client.start", ok=error is None, **({"error": error} if error else {}))
        return f"{name} started" if error is None else f"{name} could not start: {error}"

    async def _grow_topics(self, fault: Fault) -> str:
        name = fault.nodes[0]
        count = int(dict(fault.params).get("count", 10_000))
        self.cluster.brokers[name].grow_topics(count)
        return f"{name} now has {count} more topics; its next registration carries them all"


def validate(fault: Fault, nodes: dict[str, str], broker_names: set[str]) -> None:
    """Unknown nodes, or nodes of the wrong role, are a FaultError naming them."""
    verb = fault.verb

    def need(name: str, *roles: str) -> None:
        if nodes.get(name) not in roles:
            known = sorted(n for n, r in nodes.items() if r in roles)
            raise FaultError(f"{verb}: no {' or '.join(roles)} named {name!r} (there are: {', '.join(known)})")

    if verb in ("ns-down", "ns-up"):
        if fault.nodes[0] != "all":
            need(fault.nodes[0], "nameserver")
    elif verb in ("wipe-perm", "add-perm"):
        if fault.nodes[0] not in broker_names:
            raise FaultError(f"{verb}: no broker group named {fault.nodes[0]!r} "
                             f"(there are: {', '.join(sorted(broker_names))})")
    elif verb == "new-client":
        if fault.nodes[0] not in ("producer", "consumer"):
            raise FaultError("new-client: say producer or consumer")
    elif verb == "grow-topics":
        need(fault.nodes[0], "broker")
        count = dict(fault.params).get("count", 10_000)
        if not str(count).isdigit() or not 1 <= int(count) <= MAX_GROWN_TOPICS:
            raise FaultError(f"grow-topics: count must be a whole number within 1..{MAX_GROWN_TOPICS}, not {count!r}")
    else:
        roles = ("nameserver", "broker", "producer", "consumer") + (("app",) if "app" in nodes.values() else ())
        for name in fault.nodes + tuple(n for g in fault.groups for n in g):
            need(name, *roles)  # an app (lab/apps) when the run has one
