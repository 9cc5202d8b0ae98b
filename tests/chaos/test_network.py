"""The network fabric, simulated and over real sockets: the same faults mean the same thing."""

import random

import pytest
import trio

from chaos.links import RETRANSMIT_TIMEOUT, Links, Toxic
from chaos.network import SimNetwork, TcpNetwork, Unreachable


@pytest.fixture(params=["sim", "tcp"])
async def net(request, nursery):
    if request.param == "sim":
        return SimNetwork(Links(), seed=7)
    return TcpNetwork(nursery, Links(), seed=7)


async def echo_server(net, nursery, node="server"):
    """An echo node; cancelling nursery-started tasks is up to the test (see kill)."""
    listener, address = await net.listen(node, 0)

    async def echo(stream):
        try:
            while data := await stream.receive_some(65536):
                await stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    nursery.start_soon(trio.serve_listeners, echo, [listener])
    return address


async def round_trip(stream, data=b"ping"):
    await stream.send_all(data)
    got = b""
    while len(got) < len(data):
        chunk = await stream.receive_some(65536)
        assert chunk, "connection closed"
        got += chunk
    return got


async def test_bytes_flow_both_ways_in_order(net, nursery):
    address = await echo_server(net, nursery)
    stream = await net.connect("client", address)
    payload = bytes(range(256)) * 300
    assert await round_trip(stream, payload) == payload


async def test_a_partition_holds_bytes_and_healing_delivers_them(net, nursery):
    address = await echo_server(net, nursery)
    stream = await net.connect("client", address)
    net.partition([["client"], ["server"]])
    await stream.send_all(b"held")
    with trio.move_on_after(0.3) as scope:
        await stream.receive_some(10)
    assert scope.cancelled_caught, "nothing crosses a partition"
    net.heal()
    with trio.fail_after(5):
        assert await stream.receive_some(10) == b"held"


async def test_a_new_connection_into_a_partition_hangs_until_the_caller_gives_up(net, nursery):
    address = await echo_server(net, nursery)
    net.isolate("server")
    with trio.move_on_after(0.3) as scope:
        await net.connect("client", address)
    assert scope.cancelled_caught


async def test_a_one_way_partition_blocks_one_direction_only(nursery):
    net = SimNetwork(Links())
    net.partition([["a"], ["b"]], one_way=True)
    assert not net.links.reachable("a", "b") and net.links.reachable("b", "a")


async def test_killing_a_node_resets_its_connections_and_refuses_new_ones(net, nursery):
    async with trio.open_nursery() as server_tasks:
        address = await echo_server(net, server_tasks)
        stream = await net.connect("client", address)
        assert await round_trip(stream) == b"ping"
        server_tasks.cancel_scope.cancel()  # a kill: the node's tasks stop, then its sockets go
    net.close_node("server")
    with trio.fail_after(5):
        try:
            assert await stream.receive_some(10) == b""
        except trio.BrokenResourceError:
            pass  # an RST is as good as an EOF: the connection is gone
    with pytest.raises(OSError):
        with trio.fail_after(5):
            await round_trip(await net.connect("client", address))


async def test_a_reset_toxic_tears_the_connection_down(net, nursery):
    address = await echo_server(net, nursery)
    stream = await net.connect("client", address)
    net.add_toxic("client", "server", Toxic("reset"))
    with trio.fail_after(5):
        with pytest.raises((trio.BrokenResourceError, AssertionError, ConnectionResetError)):
            await round_trip(stream)


async def test_latency_and_bandwidth_toxics_slow_a_link(autojump_clock):
    net = SimNetwork(Links())
    async with trio.open_nursery() as nursery:
        address = await echo_server(net, nursery)
        stream = await net.connect("client", address)
        net.add_toxic("client", "server", Toxic("latency", latency=0.5))
        start = trio.current_time()
        await round_trip(stream)
        assert trio.current_time() - start == pytest.approx(0.5)
        net.remove_toxic("client", "server")
        net.add_toxic("server", "client", Toxic("bandwidth", rate=1000))
        start = trio.current_time()
        await round_trip(stream, b"x" * 2000)
        assert trio.current_time() - start == pytest.approx(2.0)
        nursery.cancel_scope.cancel()


async def test_connecting_to_nothing_is_refused(autojump_clock):
    net = SimNetwork(Links())
    with pytest.raises(Unreachable):
        await net.connect("client", "127.0.0.1:1")


def test_loss_delays_by_a_retransmission_and_is_seeded():
    links = Links(base_loss=0.5)
    plans = [links.plan("a", "b", 100, random.Random(3)).delay for _ in range(1)]
    rng = random.Random(3)
    delays = [links.plan("a", "b", 100, rng).delay for _ in range(200)]
    assert set(delays) == {0.0, RETRANSMIT_TIMEOUT}
    assert 60 < delays.count(RETRANSMIT_TIMEOUT) < 140
    rng = random.Random(3)
    assert [links.plan("a", "b", 100, rng).delay for _ in range(200)] == delays, "same seed, same run"
    assert plans[0] == delays[0]


def test_a_bad_toxic_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown toxic 'lag'"):
        Toxic("lag")
    with pytest.raises(ValueError, match="rate"):
        Toxic("bandwidth")
