"""One lab node (a NameServer or a broker) as its own OS process: `nslab up --processes`.

    python -m lab.run.child SPEC_JSON

SPEC: {"role", "name", "port", "config" (LabConfig dict), "seed", "run_dir",
       "peers" {address: relay port}, "namesrv" [addresses], "parent" pid,
       "clock" (the parent's timeline: `timeline()`)}

The child runs the node with the same code as an in-process one (Cluster._run_nameserver /
_run_broker) on real sockets. Why events go back over stdout rather than to a file of its own: the
parent keeps one event log, so the TUI, `nslab chaos status`, expectations and replays work
unchanged. The stream is msgpack records; one is {"listening": address} once the node listens.

Links still pass the parent's relays: the child dials a peer's address at the relay port the
parent gave for that link, so partitions and toxics apply. Its store is a file in the run dir, so a
restart (a new process) finds the messages. It dies with the parent (lab/run/lifeline.py).

It runs on the lab's time (LabClock): at `--speed 4` its 30 s registrations, 120 s expiries and
15 s long-polls take a quarter of the time, as the parent's clients expect. On a clock of its own,
held pulls outlived the clients' timeouts: connections closed and consumers rebalanced again and
again.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import time
from pathlib import Path

import msgpack
import trio

from chaos.links import Links
from chaos.network import TcpNetwork

from .cluster import Cluster
from .lifeline import die_with_parent
from .supervisor import describe
from .timeline import LabClock
from lab.config import LabConfig, apply_table
from lab.events import EventLog, pack_record


class PipeEvents(EventLog):
    """Events written to the parent, one msgpack record each, flushed at once; the parent stamps t."""

    def __init__(self):
        super().__init__(trio.current_time)
        self.out = sys.stdout.buffer

    def emit(self, node: str, kind: str, **fields) -> dict:
        record = {"node": node, "kind": kind, **fields}
        self.out.write(pack_record(record))
        self.out.flush()
        return record


class ChildNetwork(TcpNetwork):
    """Real sockets; peers are dialled at the parent's relay for each link."""

    def __init__(self, nursery: trio.Nursery, peers: dict[str, int]):
        super().__init__(nursery, Links())
        self.peers = peers

    async def connect(self, src: str, address: str) -> trio.SocketStream:
        host, _, port = address.rpartition(":")
        return await trio.open_tcp_stream(self.host, self.peers[address]) if address in self.peers \
            else await trio.open_tcp_stream(host, int(port))


class ChildCluster(Cluster):
    """A Cluster of one node: the port and NameServer list come from the parent."""

    def __init__(self, spec: dict, network, events):
        config = LabConfig()
        apply_table(config, spec["config"], path="<parent>", text="")
        super().__init__(config, network, events, seed=spec["seed"], sockets=True, run_dir=Path(spec["run_dir"]))
        self.spec = spec

    def port(self, name: str, port: int) -> int:
        return self.spec["port"]

    @property
    def namesrv_addrs(self) -> list[str]:
        return self.spec["namesrv"]


async def run(spec: dict) -> None:
    events = PipeEvents()
    async with trio.open_nursery() as nursery:
        cluster = ChildCluster(spec, ChildNetwork(nursery, spec["peers"]), events)
        name = spec["name"]
        if spec["role"] == "nameserver":
            body = lambda task_status: cluster._run_nameserver(name, spec["port"], task_status)  # noqa: E731
        else:
            broker = next(b for b in cluster.topology.brokers if b.name == name)
            body = lambda task_status: cluster._run_broker(broker, task_status)  # noqa: E731
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            address = await nursery.start(body)
            events.out.write(msgpack.packb({"listening": address}))
            events.out.flush()
            async for _ in signals:  # SIGTERM: a graceful stop (a broker unregisters first)
                if name in cluster.brokers:
                    await cluster.brokers[name].shutdown()
                nursery.cancel_scope.cancel()
                return


def main() -> None:
    spec = json.loads(sys.argv[1])
    die_with_parent(spec["parent"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops us
    try:
        trio.run(run, spec, clock=LabClock(spec["clock"]))
    except Exception as e:  # the node's own error, for the parent to report (its traceback: stderr)
        sys.stdout.buffer.write(pack_record({"failed": describe(e)}))
        sys.stdout.buffer.flush()
        raise


if __name__ == "__main__":
    main()
