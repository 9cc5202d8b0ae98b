"""`nslab nameserver` and `python -m nameserver` as a user runs them: a real process on loopback."""

import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

NSLAB = str(Path(sys.executable).with_name("nslab"))

# A 4.9.8 Java broker's REGISTER_BROKER and a client's route query, as the spec shows them on the wire.
REGISTER_HEADER = (
    b'{"code":103,"extFields":{"brokerAddr":"10.0.0.5:10911","brokerId":"0","brokerName":"broker-a",'
    b'"clusterName":"DefaultCluster","compressed":"false","haServerAddr":"10.0.0.5:10912"},'
    b'"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}')
REGISTER_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":12,'
    b'"timestamp":1700000000000},"topicConfigTable":{"TopicTest":{"order":false,"perm":6,'
    b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,'
    b'"writeQueueNums":4}}}}')
ROUTE_HEADER = (b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,'
                b'"serializeTypeCurrentRPC":"JSON","version":409}')
ROUTE_BODY = (b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.5:10911"},"brokerName":"broker-a",'
              b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a",'
              b'"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
CLUSTER_HEADER = (b'{"code":106,"flag":0,"language":"JAVA","opaque":8,"serializeTypeCurrentRPC":"JSON",'
                  b'"version":409}')
CLUSTER_BODY = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.5:10911"},"brokerName":"broker-a",'
                b'"cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), serialize_type << 24 | len(header)) + header + body


def read_frame(sock) -> tuple[int, bytes, bytes]:
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data
    length, word = struct.unpack(">ii", exactly(8))
    rest = exactly(length - 4)
    header_length = word & 0xFFFFFF
    return word >> 24, rest[:header_length], rest[header_length:]


def rocketmq_route_request(topic: str, opaque: int) -> bytes:
    key, value = b"topic", topic.encode()
    ext = struct.pack(">h", len(key)) + key + struct.pack(">i", len(value)) + value
    header = struct.pack(">hbhii", 105, 0, 409, opaque, 0) + struct.pack(">i", 0) + struct.pack(">i", len(ext)) + ext
    return frame(header, serialize_type=1)


@pytest.fixture(params=[[NSLAB, "nameserver"], [sys.executable, "-m", "nameserver"]], ids=["nslab", "python-m"])
def nameserver_process(request):
    proc = subprocess.Popen(request.param + ["--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    assert line.startswith("NAMESRV_ADDR=127.0.0.1:"), line + proc.stderr.read()
    host, port = line.strip().split("=")[1].split(":")
    yield proc, host, int(port)
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_the_command_answers_the_spec_wire_examples_and_stops_on_sigterm(nameserver_process):
    proc, host, port = nameserver_process
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(frame(REGISTER_HEADER, REGISTER_BODY))
        stype, header, body = read_frame(sock)
        assert (stype, body) == (0, b"")
        assert header == (b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":1,'
                          b'"serializeTypeCurrentRPC":"JSON","version":409}')

        sock.sendall(frame(ROUTE_HEADER))
        stype, header, body = read_frame(sock)
        assert header.startswith(b'{"code":0,"flag":1,') and b'"opaque":7' in header
        assert body == ROUTE_BODY

        sock.sendall(frame(CLUSTER_HEADER))
        assert read_frame(sock)[2] == CLUSTER_BODY

        sock.sendall(rocketmq_route_request("TopicTest", 9))
        stype, header, body = read_frame(sock)
        code, _lang, _version, opaque, flag = struct.unpack_from(">hbhii", header)
        assert (stype, code, opaque, flag, body) == (1, 0, 9, 1, ROUTE_BODY)

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert "shutting down" in proc.stderr.read()


def test_a_port_in_use_is_a_clear_error(nameserver_process):
    _, host, port = nameserver_process
    result = subprocess.run([NSLAB, "nameserver", "--port", str(port)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


def test_a_bad_duration_names_the_flag():
    result = subprocess.run([NSLAB, "nameserver", "--expiry", "2 fortnights"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "--expiry" in result.stderr and "bad duration" in result.stderr


def test_the_lab_binds_to_loopback_by_default():
    from lab.cli import build_parser
    assert build_parser().parse_args(["nameserver"]).host == "127.0.0.1"
