"""A link relay's port behaves as the port of the node behind it (chaos/network.py, _Relay): it
refuses while the node does not listen (killed, stopped, not started yet), listens again on the
same port when the node does, and accepts while the node is frozen. Real sockets on 127.0.0.1."""

import logging
import socket

import pytest
import trio

from chaos.links import Links
from echo_harness import echo, round_trip
from lab.run.networks import tcp_network

PROMPT = 0.5  # s: a refused connect comes back in a millisecond or so; a relay that accepts and
              # then closes would not raise at all


class EchoNode:
    """A lab node that echoes; start() and kill() as the lab's supervisor does."""

    def __init__(self, net, name="server"):
        self.net, self.name = net, name
        self.scope: trio.CancelScope | None = None
        self.listener = None

    async def start(self, nursery, port=0) -> str:
        return await nursery.start(self._run, port)

    async def _run(self, port, task_status):
        with trio.CancelScope() as self.scope:
            self.listener, address = await self.net.listen(self.name, port)
            async with trio.open_nursery() as conns:
                task_status.started(address)
                while True:
                    conns.start_soon(echo, await self.listener.accept())

    async def kill(self):
        self.scope.cancel()  # its tasks stop, then the network half of the kill
        await trio.sleep(0)
        self.net.close_node(self.name)


async def dial(port: int) -> trio.SocketStream:
    sock = trio.socket.socket()
    try:
        await sock.connect(("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


async def relayed_echo_node(nursery):
    """A network, an echo node started on it, and the port of the relay app -> node, tried once."""
    net = tcp_network(nursery, Links())
    node = EchoNode(net)
    await node.start(nursery)
    port = await net.relay_port("app", "server")
    assert await round_trip(await dial(port)) == b"ping"
    return net, node, port


async def assert_refused(port: int):
    start = trio.current_time()
    with trio.fail_after(5):
        with pytest.raises(ConnectionRefusedError):
            stream = await dial(port)
            await trio.aclose_forcefully(stream)  # accepted: the test fails on the raises
    assert trio.current_time() - start < PROMPT


async def test_a_killed_nodes_relay_refuses_at_once_and_a_frozen_ones_accepts(nursery):
    net, node, port = await relayed_echo_node(nursery)

    net.freeze("server")  # a stopped process: its port still accepts, its bytes wait
    held = await dial(port)
    await held.send_all(b"held")
    with trio.move_on_after(0.2) as waited:
        await held.receive_some(10)
    assert waited.cancelled_caught
    net.unfreeze("server")
    with trio.fail_after(5):
        assert await held.receive_some(10) == b"held"

    await node.kill()
    await assert_refused(port)
    await assert_refused(port)  # and stays so


async def test_after_a_restart_the_same_port_relays_again(nursery):
    net = tcp_network(nursery, Links())
    port = await net.relay_port("app", "server")  # before the node has ever listened
    await assert_refused(port)

    node = EchoNode(net)
    address = await node.start(nursery)
    assert await round_trip(await dial(port)) == b"ping"
    await node.kill()
    await assert_refused(port)

    await node.start(nursery, int(address.rpartition(":")[2]))  # restarted, as the lab does, on its port
    assert await net.relay_port("app", "server") == port
    stream = await dial(port)
    assert await round_trip(stream, b"again") == b"again"

    await node.kill()  # and once more: every kill refuses, every restart relays
    await assert_refused(port)
    await node.start(nursery)
    assert await round_trip(await dial(port)) == b"ping"


async def test_a_relayed_connection_is_reset_at_the_kill_and_the_port_then_refuses(nursery):
    net = tcp_network(nursery, Links())
    node = EchoNode(net)
    await node.start(nursery)
    port = await net.relay_port("app", "server")
    stream = await dial(port)
    assert await round_trip(stream) == b"ping"

    await node.kill()
    with trio.fail_after(5):
        try:
            assert await stream.receive_some(10) == b""
        except trio.BrokenResourceError:
            pass  # an RST is as good as an EOF: the connection is gone
    await assert_refused(port)


async def test_a_gracefully_stopped_node_refuses_from_the_moment_its_listener_closes(nursery):
    net, node, port = await relayed_echo_node(nursery)

    node.scope.cancel()  # a graceful stop: the node stops accepting and closes its listener,
    await trio.sleep(0)  # then it exits (close_node)
    await node.listener.aclose()
    await assert_refused(port)
    net.close_node("server")  # its exit changes nothing more
    await assert_refused(port)


async def test_a_node_listening_elsewhere_is_relayed_once_said_and_refused_after_its_exit(nursery):
    # A node run as its own process (nslab up --processes) listens on a socket the network did not
    # make: the lab says where (Network.listening), and close_node once the process has exited.
    net = tcp_network(nursery, Links())
    port = await net.relay_port("app", "server")
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    scope = trio.CancelScope()

    async def serve():
        with scope:
            await trio.serve_listeners(echo, listeners)

    nursery.start_soon(serve)
    await assert_refused(port)  # listening, but not said yet
    net.listening("server", "127.0.0.1:%d" % listeners[0].socket.getsockname()[1])
    assert await round_trip(await dial(port)) == b"ping"

    scope.cancel()  # the process exits
    net.close_node("server")
    await assert_refused(port)


async def test_a_taken_port_is_retried_until_free_and_both_are_logged(nursery, caplog):
    caplog.set_level(logging.WARNING, logger="chaos.network")
    net = tcp_network(nursery, Links())
    node = EchoNode(net)
    await node.start(nursery)
    port = await net.relay_port("app", "server")
    await node.kill()

    # Someone takes the port while nobody listens there (SO_REUSEADDR lets them beside the relay's
    # bound socket), and holds it across the restart.
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", port))
    squatter.listen(8)
    try:
        await node.start(nursery)  # the node is up; its relay cannot listen
        await trio.sleep(0.6)  # several attempts: 0.05, 0.1, 0.2, 0.4 s apart
        failed = [r for r in caplog.records if "cannot listen" in r.getMessage()]
        assert len(failed) == 1, caplog.text  # said once, however often retried
        assert f"relay app -> server: port {port}" in failed[0].getMessage()
        assert not [r for r in caplog.records if "listens again" in r.getMessage()]
    finally:
        squatter.close()

    with trio.fail_after(5):
        while True:  # within one more backoff step (at most 2 s)
            try:
                stream = await dial(port)
                break
            except ConnectionRefusedError:
                await trio.sleep(0.05)
    assert await round_trip(stream) == b"ping"
    again = [r.getMessage() for r in caplog.records if "listens again" in r.getMessage()]
    assert len(again) == 1 and f"port {port} listens again after" in again[0], caplog.text

    await node.kill()  # and it follows the node again afterwards
    await assert_refused(port)
