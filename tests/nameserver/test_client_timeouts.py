"""A remoting client's calls time out at their own deadlines, however many are out and however
often they are renewed (a consumer keeps thousands of long-polled pulls out on one connection, each
renewed in place every 15 s on a simulated network): by the simulated network's timers, and by a
task over a stream without timers."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from chaos.links import Links
from chaos.network import SimNetwork
from lab.sim.remoting import CoastingRemotingClient
from nameserver.client import RemotingClient, RemotingTimeoutError
from nameserver.connection import Connection
from nameserver.protocol import RemotingCommand, RequestCode

CALLS = 300
TIMEOUTS = (3.0, 1.0, 2.0)


async def silent_pair(kind: str, nursery) -> RemotingClient:
    """A client whose peer reads every request and answers none."""
    if kind == "sim":
        net = SimNetwork(Links(), seed=3)
        listener, address = await net.listen("server", 0)

        async def serve(stream):
            await Connection(stream, objects=True, remote_addr=stream.remote_addr).serve(lambda cmd: None)

        nursery.start_soon(trio.serve_listeners, serve, [listener])
        client_stream = await net.connect("client", address)
        # as the lab builds it there (lab/sim/remoting.py): the calls time out by the network's timers
        said = dict(objects=True, remote_addr=client_stream.remote_addr, call_at=client_stream.call_at)
    else:
        client_stream, server_stream = trio.testing.memory_stream_pair()
        nursery.start_soon(Connection(server_stream).serve, lambda cmd: None)
        said = {}  # a byte stream: the calls time out by a task of run()'s
    client = CoastingRemotingClient(client_stream, **said)  # (its _renew, on either stream)
    nursery.start_soon(client.run)
    return client


@pytest.mark.parametrize("kind", ["sim", "memory"])
async def test_every_call_times_out_at_its_deadline_in_the_order_sent_and_renewed_ones_later(
        kind, nursery, autojump_clock):
    client = await silent_pair(kind, nursery)
    start = trio.current_time()
    ended: list[tuple[float, int]] = []  # (when, call number)
    renewable = set(range(0, CALLS, 7))
    opaques = {}
    for number in range(CALLS):
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"n": number})

        def on_reply(reply, number=number):
            assert isinstance(reply, RemotingTimeoutError), reply
            ended.append((round(trio.current_time() - start, 6), number))

        client.invoke_async(request, TIMEOUTS[number % 3], on_reply, renew=lambda: True)
        opaques[number] = request.opaque
    await trio.sleep(0.5)
    for number in renewable:  # the peer keeps these: they are due `timeout` after a resend 0.25 s on
        assert client._renew(opaques[number], 0.25)
    await trio.sleep(10)

    def due(number: int) -> float:
        return TIMEOUTS[number % 3] + (0.75 if number in renewable else 0.0)

    assert len(ended) == CALLS
    assert ended == sorted((due(n), n) for n in range(CALLS)), "each at its deadline, ties in the order sent"
