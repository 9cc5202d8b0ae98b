"""What a peer cannot take from a broker, over real loopback TCP: its accept loop by exhausting file
descriptors (with the NameServer and the lab's link relays beside it), and connections held open
by idling, by half a frame or by a byte a second. Legitimate quiet connections — a long-polled
pull, a slave's replication — stay."""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import sys
import textwrap
import time
import tracemalloc

import pytest
import trio
from trio.testing import MockClock

from lab.broker.pull import FLAG_SUSPEND
from nameserver.client import connect
from nameserver.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, encode

HOST = "127.0.0.1"
MiB = 2**20


# --- the descriptor limit -----------------------------------------------------------------------------------

# A NameServer, a broker registered with it and a relay to the broker, in a process allowed 128
# descriptors, logging to stderr; it prints the three ports.
FD_LIMITED_LAB = textwrap.dedent("""
    import logging, random, resource, sys
    import trio
    from lab.run.networks import tcp_network
    from lab.broker.server import Broker
    from lab.broker.store import MessageStore
    from lab.config import LabConfig
    from lab.events import EventLog
    from lab.remoting.channels import Node
    from nameserver.routes import TopicConfig
    from nameserver.server import NameServer

    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")

    async def main():
        async with trio.open_nursery() as nursery:
            network = tcp_network(nursery)
            events = EventLog(trio.current_time)
            ns_listener, ns_address = await network.listen("ns-0")
            await nursery.start(NameServer().serve, [ns_listener])
            broker = Broker(Node("broker-a-0", network, events, LabConfig(), random.Random(0)),
                            broker_name="broker-a", broker_id=0, cluster_name="DefaultCluster",
                            namesrv_addrs=[ns_address], store=MessageStore(),
                            topics={"TopicTest": TopicConfig("TopicTest", 4, 4, 6)})
            address = await nursery.start(broker.run)
            relay = await network.relay_port("client-0", "broker-a-0")
            print(ns_address.rpartition(":")[2], address.rpartition(":")[2], relay, flush=True)

    trio.run(main)
""")


def answers(port: int, request: RemotingCommand, timeout: float) -> int:
    """The reply code of one request on a new connection: the server accepted and served it."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(encode(request))
        decoder = FrameDecoder()
        while True:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("closed without an answer")
            for reply in decoder.feed(data):
                return reply.code


def test_a_broker_its_nameserver_and_relays_at_the_descriptor_limit_keep_accepting_and_log_a_line_each():
    child = subprocess.Popen([sys.executable, "-c", FD_LIMITED_LAB], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    query = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "TopicTest", "queueId": 0})
    try:
        ports = [int(p) for p in child.stdout.readline().split()]
        assert len(ports) == 3, child.communicate(timeout=10)[1][-3000:]
        ns, broker, relay = ports
        # Far more connections than it may open: every accept() fails with EMFILE.
        flood = [socket.create_connection((HOST, port), timeout=5) for port in ports for _ in range(80)]
        for port in ports:
            with pytest.raises(TimeoutError):
                answers(port, query, 0.5)
        time.sleep(2)  # twenty retries of accept on each listener
        assert child.poll() is None, "the lab process stopped"
        for sock in flood:
            sock.close()
        # Descriptors back: each accepts again and answers a new client.
        assert answers(broker, query, 10) == ResponseCode.SUCCESS
        assert answers(relay, query, 10) == ResponseCode.SUCCESS  # through the relay, the broker answers
        assert answers(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 10) == ResponseCode.SUCCESS
        assert child.poll() is None
    finally:
        child.terminate()
        _, stderr = child.communicate(timeout=10)
    lines = stderr.splitlines()
    about_accept = [line for line in lines if "accept failed" in line]
    for who in ("ERROR NameServer:", "ERROR broker-a-0:", "ERROR relay client-0 -> broker-a-0:"):
        assert [line for line in about_accept if who in line], stderr[-3000:]
    assert all("Too many open files" in line for line in about_accept), stderr[-3000:]
    assert len(about_accept) <= 6 and not [line for line in lines if "Traceback" in line], stderr[-3000:]


# --- idle connections -----------------------------------------------------------------------------------------

RATE = 20  # virtual seconds per real second: the 120 s idle time takes 6 s


@pytest.fixture
def fast_clock():
    return MockClock(rate=RATE)


def frame_head(length: int) -> bytes:
    """The start of a JSON request frame of `length` bytes (the length field counted): its
    prefix and header, so what follows is the body."""
    header = b'{"code":10,"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}'
    return struct.pack(">ii", length - 4, len(header)) + header


async def closed_at(stream: trio.SocketStream) -> float:
    """When the broker closed `stream` (EOF or reset), on the virtual clock."""
    try:
        while await stream.receive_some(65536):
            pass
    except trio.BrokenResourceError:
        pass
    return trio.current_time()


async def test_idle_half_frame_and_byte_a_second_connections_are_closed_after_the_idle_time_and_free_what_they_held(
        tcp, fast_clock):
    await tcp.start_nameserver()
    broker = await tcp.start_broker()
    host, _, port = broker.address.rpartition(":")
    tracemalloc.start()
    try:
        baseline, _ = tracemalloc.get_traced_memory()
        opened = {}

        async def open_(name):
            opened[name] = trio.current_time()  # before the connect: the broker may accept before it returns
            return await trio.open_tcp_stream(host, int(port))

        silent = await open_("silent")
        halves = [await open_(f"half {i}") for i in range(20)]
        for stream in halves:  # an eighth of a 16 MiB frame each, then nothing
            await stream.send_all(frame_head(16 * MiB) + bytes(2 * MiB - 200))
        dripping = await open_("dripping")
        # A registered producer (left to the client housekeeping, 120 s after its heartbeat) that
        # then stalls in a frame: no heartbeat can follow it.
        registered = await open_("registered")
        beat = RemotingCommand.request(RequestCode.HEART_BEAT, body=b'{"clientID":"hostile@1","consumerDataSet":[],'
                                                                   b'"producerDataSet":[{"groupName":"pg"}]}')
        await registered.send_all(encode(beat) + frame_head(1000))

        async def drip():  # a byte a second of a frame that would take days, until the broker closes it
            with contextlib.suppress(trio.BrokenResourceError):
                for byte in frame_head(16 * MiB) + bytes(300):
                    await dripping.send_all(bytes([byte]))
                    await trio.sleep(1)

        held, _ = tracemalloc.get_traced_memory()
        assert trio.current_time() - opened["silent"] < 100, "too slow a machine for this test"
        closes = {}

        async def watch(name, stream):
            closes[name] = await closed_at(stream)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drip)
            nursery.start_soon(watch, "silent", silent)
            nursery.start_soon(watch, "dripping", dripping)
            nursery.start_soon(watch, "registered", registered)
            for i, stream in enumerate(halves):
                nursery.start_soon(watch, f"half {i}", stream)
            with trio.fail_after(200):
                while len(closes) < len(opened):
                    await trio.sleep(1)
            nursery.cancel_scope.cancel()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    waited = {name: round(closes[name] - opened[name], 2) for name in opened}
    assert all(120 <= w <= 150 for w in waited.values()), waited
    assert len(broker.broker.client_channels) == 0
    # What arrived was held (never the 16 MiB each frame announced), and it went with the close.
    assert 40 * MiB <= held - baseline <= 55 * MiB, (held - baseline) / MiB
    assert after - baseline < 10 * MiB, (after - baseline) / MiB


async def test_a_long_polling_consumer_and_a_slave_stay_connected_through_many_idle_times(tcp, fast_clock):
    await tcp.start_nameserver()
    master = await tcp.start_broker()
    await tcp.start_broker("broker-a-1", broker_id=1, master_addr=master.address)
    with trio.fail_after(30):
        while not master.broker.client_channels:  # the slave's replication connection
            await trio.sleep(0.5)
    slave_channel, = master.broker.client_channels
    host, _, port = master.address.rpartition(":")
    pulls = 0
    async with connect(host, int(port)) as consumer:
        start = trio.current_time()
        while trio.current_time() - start < 400:  # each pull held 15 s on the empty queue, then again
            reply = await consumer.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE, {
                "consumerGroup": "cg", "topic": "TopicTest", "queueId": 0, "queueOffset": 0, "maxMsgNums": 32,
                "sysFlag": FLAG_SUSPEND, "commitOffset": 0, "suspendTimeoutMillis": 15000, "subVersion": 0}), 30)
            assert reply.code == ResponseCode.PULL_NOT_FOUND
            pulls += 1
        assert 20 <= pulls <= 28
        assert slave_channel in master.broker.client_channels, "the slave's connection was cut"
        assert len(master.broker.client_channels) == 2  # the slave's and the consumer's, never closed
