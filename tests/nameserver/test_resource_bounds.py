"""What a peer cannot take from a NameServer, over real loopback TCP: memory by a zip bomb, its
accept loop by exhausting file descriptors."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
import tracemalloc
import zlib

import pytest
import trio

from nameserver import bodies
from nameserver.bodies import MAX_INFLATED_BODY
from nameserver.client import connect
from nameserver.protocol import (FRAME_MAX_LENGTH, FrameDecoder, RemotingCommand, RequestCode, ResponseCode, crc32,
                                 encode)
from nameserver.routes import DataVersion, TopicConfig
from nameserver.server import NameServer
from nameserver.tcp import ACCEPT_LOG_INTERVAL, AcceptFailures

HOST = "127.0.0.1"
MiB = 2**20


def zlib_bomb(inflated: int) -> bytes:
    """A zlib stream of `inflated` zero bytes (a multiple of 1 MiB), at ~1,000:1, built in a blink:
    after a full flush each MiB of zeros compresses to the same bytes; the trailer's checksum is the
    whole stream's."""
    deflate, zeros, checksum = zlib.compressobj(9), bytes(MiB), 1
    first = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    for _ in range(inflated // MiB):
        checksum = zlib.adler32(zeros, checksum)
    return first + again * (inflated // MiB - 1) + deflate.flush()[:-4] + checksum.to_bytes(4, "big")


def test_the_bomb_is_what_it_says():
    bomb = zlib_bomb(64 * MiB)
    assert len(bomb) < 70_000 and len(zlib.decompress(bomb)) == 64 * MiB


def test_the_inflation_bound_is_the_frame_cap():
    assert MAX_INFLATED_BODY == FRAME_MAX_LENGTH == 16 * MiB


def register(body: bytes, name: str, compressed: bool) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, {
        "brokerName": name, "brokerAddr": f"127.0.0.1:{10911 + len(name)}", "clusterName": "DefaultCluster",
        "haServerAddr": "127.0.0.1:10912", "brokerId": 0, "compressed": compressed, "bodyCrc32": crc32(body)}, body)


async def test_a_zip_bomb_registration_is_refused_naming_the_limit_and_stalls_no_other_connection(nursery):
    host, port = await nursery.start(NameServer().serve_tcp, HOST, 0)
    bomb = zlib_bomb(256 * MiB)  # 16 times the cap; 4.9.8 would inflate all of it
    good_body = bodies.encode_compressed_register_body({"CheckTopic": TopicConfig("CheckTopic", 4, 4, 6)},
                                                       DataVersion(1, 1), [])
    async with connect(host, port) as good, connect(host, port) as attacker:
        assert (await good.invoke(register(good_body, "broker-good", True), 5)).code == ResponseCode.SUCCESS
        query = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "CheckTopic"})
        expected = (await good.invoke(query, 5)).body
        waits, answer = [], []

        async def bomb_it():
            answer.append(await attacker.invoke(register(bomb, "broker-bomb", True), 30))

        tracemalloc.start()
        try:
            async with trio.open_nursery() as during:
                during.start_soon(bomb_it)
                while not answer:  # route queries all the while the bomb is sent and handled
                    started = time.monotonic()
                    reply = await good.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                      {"topic": "CheckTopic"}), 30)
                    waits.append(time.monotonic() - started)
                    assert (reply.code, reply.body) == (ResponseCode.SUCCESS, expected)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        reply, = answer
        assert reply.code == ResponseCode.SYSTEM_ERROR  # as for any body that does not decode
        assert "inflates to more than 16777216 bytes (16 MiB)" in reply.remark, reply.remark
        # What this process allocated meanwhile (bomb, frames, the inflated prefix and its copy):
        # the 256 MiB inflated would be 256 MiB at least.
        assert peak < 3 * MAX_INFLATED_BODY, f"{peak / MiB:.0f} MiB allocated while the bomb was handled"
        assert max(waits) < 1.0, f"another connection waited {max(waits):.2f} s for a route"
        # and the bomb registered nothing: the good broker is all the cluster holds
        info = await good.invoke(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
        assert b"broker-bomb" not in info.body and b"broker-good" in info.body


# --- accept loops at the file-descriptor limit -------------------------------------------------------------

def test_accept_failures_are_logged_once_per_interval_with_the_count_of_the_others():
    failures, error = AcceptFailures(), OSError(24, "Too many open files")
    first = failures.line(100.0, error, "NameServer")
    assert first == "NameServer: accept failed: [Errno 24] Too many open files; retrying every 0.1 s"
    assert [failures.line(100.0 + i / 10, error, "NameServer") for i in range(1, 99)] == [None] * 98
    later = failures.line(100.0 + ACCEPT_LOG_INTERVAL, error, "NameServer")
    assert later.endswith("(98 more failures since the last line)")
    assert failures.line(100.0 + ACCEPT_LOG_INTERVAL + 1, error, "NameServer") is None


# A NameServer in a process allowed 64 descriptors, logging to stderr.
FD_LIMITED_NAMESERVER = textwrap.dedent("""
    import logging, resource, sys
    import trio
    from nameserver.server import NameServer

    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")

    async def serve():
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(NameServer().serve_tcp, "127.0.0.1", 0)
            print(port, flush=True)

    trio.run(serve)
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


def test_a_nameserver_at_its_descriptor_limit_keeps_accepting_and_logs_a_line_not_a_traceback_per_try():
    child = subprocess.Popen([sys.executable, "-c", FD_LIMITED_NAMESERVER], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        query = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        # More connections than it may open (the kernel completes them in the backlog): accept()
        # fails with EMFILE, and a new client waits.
        socks = [socket.create_connection((HOST, port), timeout=5) for _ in range(150)]
        with pytest.raises(TimeoutError):
            answers(port, query, 0.5)
        time.sleep(2)  # twenty retries of accept
        assert child.poll() is None, "the NameServer stopped"
        for sock in socks:
            sock.close()
        assert answers(port, query, 10) == ResponseCode.SUCCESS  # descriptors back: it accepts again
        assert child.poll() is None
    finally:
        child.terminate()
        _, stderr = child.communicate(timeout=10)
    lines = stderr.splitlines()
    about_accept = [line for line in lines if "accept" in line]
    assert about_accept and "Too many open files" in about_accept[0], stderr[-2000:]
    assert len(about_accept) <= 2 and not [line for line in lines if "Traceback" in line], stderr[-2000:]
