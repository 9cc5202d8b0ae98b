"""End to end with the real C++ client (PyPI rocketmq 0.4.4: Apache rocketmq-client-cpp 1.2.3) against
a lab NameServer and broker over loopback: what it exposes of the broker's new answers.

- The message it consumes carries born and store timestamps in epoch milliseconds (it printed
  1970-01-01 00:00:01,114-style times before).
- Its heartbeats make it show in GET_CONSUMER_CONNECTION_LIST (203) and
  GET_PRODUCER_CONNECTION_LIST (204) as language CPP, with its subscription.
- What it consumed shows in GET_CONSUME_STATS (208): brokerOffset counts its message.

The client runs in a child process: its librocketmq.so may take its interpreter down on a bad
reply, which must fail this test, not the suite."""

import json
import os
import re
import sys
import time

import pytest
import trio

pytest.importorskip("rocketmq.client")  # the wheel bundles an x86-64 Linux librocketmq.so

from lab.broker import admin  # noqa: E402
from nameserver.protocol import ResponseCode  # noqa: E402

TOPIC = "TopicTest"
CHILD = r'''
import json, os, sys, threading
from rocketmq.client import Message, Producer, PushConsumer
namesrv = sys.argv[1]
got = threading.Event()
seen = {}
def on_message(msg):
    if msg.body == b"cpp-admin":
        seen.update(born=msg.born_timestamp, store=msg.store_timestamp)
        got.set()
consumer = PushConsumer("CID-cpp-admin")
consumer.set_namesrv_addr(namesrv)
consumer.subscribe("TopicTest", on_message)
consumer.start()
producer = Producer("PID-cpp-admin")
producer.set_namesrv_addr(namesrv)
producer.start()
msg = Message("TopicTest")
msg.set_body("cpp-admin")
producer.send_sync(msg)
got.wait(60)
sys.stdout.write(json.dumps(seen) + "\n")
sys.stdout.flush()
sys.stdin.readline()  # stay connected (heartbeating) until the test is done
os._exit(0)
'''


async def read_line(stream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(4096)
        assert chunk, "the C++ client exited early"
        data += chunk
    return data


async def test_the_cpp_client_sees_epoch_timestamps_and_shows_in_the_admin_answers(tcp, tmp_path):
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    script = tmp_path / "cpp_child.py"
    script.write_text(CHILD)
    env = {**os.environ, "HOME": str(tmp_path)}  # the C++ client logs under ~/logs/rocketmq-cpp
    before = time.time() * 1000
    proc = await trio.lowlevel.open_process([sys.executable, str(script), ns], stdin=-1, stdout=-1, env=env)
    try:
        with trio.fail_after(90):
            seen = json.loads(await read_line(proc.stdout))
        after = time.time() * 1000
        assert before - 1000 <= seen["born"] <= seen["store"] <= after + 1000, seen

        consumers = await tcp.call(broker.address, admin.GET_CONSUMER_CONNECTION_LIST,
                                   {"consumerGroup": "CID-cpp-admin"})
        assert consumers.code == ResponseCode.SUCCESS
        body = json.loads(consumers.body)
        assert {c["language"] for c in body["connectionSet"]} == {"CPP"}
        assert TOPIC in body["subscriptionTable"]
        assert (body["consumeType"], body["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")

        producers = await tcp.call(broker.address, admin.GET_PRODUCER_CONNECTION_LIST,
                                   {"producerGroup": "PID-cpp-admin"})
        assert producers.code == ResponseCode.SUCCESS
        assert {c["language"] for c in json.loads(producers.body)["connectionSet"]} == {"CPP"}

        stats = await tcp.call(broker.address, admin.GET_CONSUME_STATS,
                               {"consumerGroup": "CID-cpp-admin", "topic": TOPIC})
        assert stats.code == ResponseCode.SUCCESS
        offsets = [json.loads(v) for v in re.findall(rb':(\{"brokerOffset"[^{}]*\})', stats.body)]
        assert sum(o["brokerOffset"] for o in offsets) == 1  # its one message
    finally:
        with trio.move_on_after(5):
            await proc.stdin.send_all(b"quit\n")
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
