"""The networks the lab runs on: chaos's, given what chaos must not know itself, RocketMQ's
remoting (for request faults) and the NameServer's accept loop (for the link relays)."""

from __future__ import annotations

import functools
import logging
import os

import trio

from chaos.links import Links
from chaos.network import SimNetwork, TcpNetwork
from lab.remoting.wire_codec import REMOTING
from nameserver.tcp import AcceptFailures, accept_forever

log = logging.getLogger("chaos.network")

# The switch for the simulator's aggregation of idle traffic (chaos/network.py, Network.aggregate):
# NSLAB_AGGREGATE=0 turns it off, and every role runs its plain RocketMQ flow, call by call; 1, or
# unset, leaves it on. A run's event log is the same bytes either way, only slower with it off.
AGGREGATE_VARIABLE = "NSLAB_AGGREGATE"


def aggregate_from_environment() -> bool:
    value = os.environ.get(AGGREGATE_VARIABLE, "1").strip()
    if value not in ("0", "1", ""):
        raise ValueError(f"{AGGREGATE_VARIABLE}={value!r}: 1 (aggregate idle traffic, the default) or 0 (do not)")
    return value != "0"


def sim_network(links: Links | None = None, *, seed: int = 0, aggregate: bool | None = None) -> SimNetwork:
    """`aggregate`: whether idle traffic may be simulated in aggregate; None: as NSLAB_AGGREGATE says."""
    if aggregate is None:
        aggregate = aggregate_from_environment()
    return SimNetwork(links, seed=seed, codec=REMOTING, aggregate=aggregate)


def relay_accept_loop():
    """One accept loop for all of a network's relays: at the descriptor limit each waits and
    accepts again, and together they log one line per interval."""
    return functools.partial(_accept, AcceptFailures())


async def _accept(failures: AcceptFailures, listener: trio.abc.Listener, serve, where: str) -> None:
    await accept_forever(listener, serve, log, where, failures)


def tcp_network(nursery: trio.Nursery, links: Links | None = None, *, seed: int = 0) -> TcpNetwork:
    return TcpNetwork(nursery, links, seed=seed, codec=REMOTING, accept_loop=relay_accept_loop())
