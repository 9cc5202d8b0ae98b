"""The NameServer never guesses it is simulated: the simulator's NameServer (lab/sim/nameserver.py,
which the lab builds on the simulated network alone) says what its streams carry and who is at the
other end, and the plain one serves what it is given."""

from __future__ import annotations

import pytest
import trio

from chaos.links import Links
from chaos.network import SimNetwork
from lab.sim.nameserver import CoastingNameServer, RouteQueryCoaster, name_server
import nameserver.connection as connection_module
from nameserver.server import NameServer


async def accepted(net: SimNetwork) -> trio.abc.Stream:
    listener, address = await net.listen("ns-0")
    await net.connect("broker-a-0", address)
    return await listener.accept()


async def test_the_simulators_nameserver_declares_object_streams_and_their_peer(monkeypatch):
    net = SimNetwork(Links())
    stream = await accepted(net)
    # Were they read from the stream, the stream's own word would decide: it says bytes here, and
    # no peer.
    monkeypatch.setattr(type(stream), "carries_objects", False)
    monkeypatch.setattr(connection_module, "remote_address", lambda stream: "?")
    server = name_server(net)()
    assert type(server) is CoastingNameServer
    connection = server.connection(stream)
    assert connection.objects
    assert connection.remote_addr == "broker-a-0"
    channel = server.open_channel(connection)
    assert channel.remote_addr == "broker-a-0"
    assert isinstance(stream.query_coaster, RouteQueryCoaster) and stream.query_coaster.channel is channel


async def test_on_sockets_the_lab_runs_the_plain_nameserver(nursery):
    from lab.run.networks import tcp_network
    assert name_server(tcp_network(nursery, Links())) is NameServer
