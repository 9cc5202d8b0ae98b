"""The networks the lab runs on: chaos's, given what chaos must not know itself, RocketMQ's
remoting (for request faults) and the NameServer's accept loop (for the link relays)."""

from __future__ import annotations

import functools
import logging

import trio

from chaos.links import Links
from chaos.network import SimNetwork, TcpNetwork
from lab.remoting.wire_codec import REMOTING
from nameserver.tcp import AcceptFailures, accept_forever

log = logging.getLogger("chaos.network")


def sim_network(links: Links | None = None, *, seed: int = 0) -> SimNetwork:
    return SimNetwork(links, seed=seed, codec=REMOTING)


def relay_accept_loop():
    """One accept loop for all of a network's relays: at the descriptor limit each waits and
    accepts again, and together they log one line per interval."""
    return functools.partial(_accept, AcceptFailures())


async def _accept(failures: AcceptFailures, listener: trio.abc.Listener, serve, where: str) -> None:
    await accept_forever(listener, serve, log, where, failures)


def tcp_network(nursery: trio.Nursery, links: Links | None = None, *, seed: int = 0) -> TcpNetwork:
    return TcpNetwork(nursery, links, seed=seed, codec=REMOTING, accept_loop=relay_accept_loop())
