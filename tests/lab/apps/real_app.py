"""A small application on the real C++ RocketMQ client (PyPI rocketmq 0.4.4), for
tests/lab/test_app_real.py: run by `nslab run --app`, it finds the NameServers in NAMESRV_ADDR.

    python real_app.py TOPIC GROUP [--gap S]

A producer sends "real-N" to TOPIC every GAP seconds (default 0.2) and a push consumer in GROUP
consumes TOPIC; one JSON line per send ({"i", "status"}) and per message consumed ({"body"}).
SIGTERM: both shut down and it exits 0.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer

_out = threading.Lock()


def say(**record) -> None:
    with _out:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("topic")
    parser.add_argument("group")
    parser.add_argument("--gap", type=float, default=0.2)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    namesrv = os.environ["NAMESRV_ADDR"]

    consumer = PushConsumer(args.group)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(args.topic, lambda msg: say(body=msg.body.decode(errors="replace")))
    consumer.start()
    producer = Producer(f"{args.group}-producer", timeout=2000)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    say(started=True)
    i = 0
    while not stop.wait(args.gap):
        msg = Message(args.topic)
        msg.set_body(f"real-{i}")
        try:
            say(i=i, status=producer.send_sync(msg).status.name)
        except Exception as e:
            say(i=i, status="ERROR", error=str(e)[:200])
        i += 1
    producer.shutdown()
    consumer.shutdown()
    say(stopped=True)
    sys.stdout.flush()
    os._exit(0)  # skip the ctypes wrappers' __del__ after shutdown


if __name__ == "__main__":
    main()
