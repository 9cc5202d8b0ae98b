"""The network fabric, simulated and over real sockets: the same faults mean the same thing."""

import random

import pytest
import trio

from chaos.links import RETRANSMIT_TIMEOUT, Links, Toxic
from chaos.network import SimNetwork, Unreachable
from echo_harness import echo, round_trip
from lab.run.networks import tcp_network


@pytest.fixture(params=["sim", "tcp"])
async def net(request, nursery):
    if request.param == "sim":
        return SimNetwork(Links(), seed=7)
    return tcp_network(nursery, Links(), seed=7)


async def echo_server(net, nursery, node="server"):
    """An echo node; cancelling nursery-started tasks is up to the test (see kill)."""
    listener, address = await net.listen(node, 0)
    nursery.start_soon(trio.serve_listeners, echo, [listener])
    return address


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


async def test_a_frozen_node_completes_the_handshake_and_answers_once_resumed(net, nursery):
    # SIGSTOP: the kernel still accepts the connection; nothing is read or answered until SIGCONT.
    address = await echo_server(net, nursery)
    net.freeze("server")
    with trio.fail_after(1):
        stream = await net.connect("client", address)
    await stream.send_all(b"hello")
    with trio.move_on_after(0.3) as scope:
        await stream.receive_some(10)
    assert scope.cancelled_caught, "a frozen node answers nothing"
    net.unfreeze("server")
    with trio.fail_after(2):
        assert await stream.receive_some(10) == b"hello"


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


# --- objects and receivers (the simulated network's fast path) ------------------------------------

async def sim_pair(net=None):
    net = net or SimNetwork(Links(), seed=7)
    listener, address = await net.listen("server")
    client = await net.connect("client", address)
    return net, client, await listener.accept()


async def test_objects_reach_a_receiver_in_order_without_a_reading_task():
    net, client, server = await sim_pair()
    got, ends = [], []
    server.set_receiver(got.append, ends.append)
    for i in range(3):
        client.send_object({"n": i}, 10)
    await trio.sleep(0.1)
    assert got == [{"n": 0}, {"n": 1}, {"n": 2}] and ends == []
    await client.aclose()
    await trio.sleep(0.1)
    assert ends == [None], "the peer's close ends the receiver's connection"


async def test_what_arrived_before_the_receiver_is_handed_over_when_it_is_set():
    net, client, server = await sim_pair()
    client.send_object("early", 5)
    await trio.sleep(0.1)
    got = []
    server.set_receiver(got.append, lambda error: None)
    assert got == ["early"]


async def test_a_partition_holds_objects_and_a_reset_reaches_the_receiver():
    net, client, server = await sim_pair()
    got, ends = [], []
    server.set_receiver(got.append, ends.append)
    net.partition([["client"], ["server"]])
    client.send_object("held", 4)
    await trio.sleep(1)
    assert got == []
    net.heal()
    await trio.sleep(0.1)
    assert got == ["held"]
    net.close_node("client")
    assert len(ends) == 1 and isinstance(ends[0], trio.BrokenResourceError)


async def test_a_receiver_that_raises_costs_its_connection_only():
    net, client, server = await sim_pair()
    listener, address = await net.listen("other")
    other_client = await net.connect("client", address)
    other_server = await listener.accept()
    ends, fine = [], []

    def broken(payload):
        raise RuntimeError("a bug in a node")

    server.set_receiver(broken, ends.append)
    other_server.set_receiver(fine.append, lambda error: None)
    client.send_object("boom", 4)
    other_client.send_object("ok", 2)
    await trio.sleep(0.1)
    assert fine == ["ok"]
    assert len(ends) == 1 and isinstance(ends[0], trio.BrokenResourceError)
    with pytest.raises(trio.BrokenResourceError):
        client.send_object("again", 5)


async def test_a_bandwidth_toxic_asks_an_objects_size_only_when_it_needs_it():
    net, client, server = await sim_pair()
    asked = []
    got = []
    server.set_receiver(lambda p: got.append(trio.current_time()), lambda error: None)

    def size(payload):
        asked.append(payload)
        return 1000

    start = trio.current_time()
    client.send_object("quick", size)
    await trio.sleep(0.1)
    assert asked == []
    net.add_toxic("client", "server", Toxic("bandwidth", rate=1000))
    client.send_object("slow", size)
    await trio.sleep(2)
    assert asked == ["slow"] and got[1] - start == pytest.approx(1.1, abs=0.05)
