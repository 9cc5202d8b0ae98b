"""A real RocketMQ client (PyPI rocketmq==0.4.4: the Apache C++ client 1.2.3 via ctypes) driven
over stdin/stdout, one JSON line per event.

It runs as a child process of the test: the bundled librocketmq.so can take its interpreter down on
a bad reply (a SIGSEGV), and that must fail one test, not the suite.

    python rmq_client.py produce NAMESRV TOPIC PREFIX [--timeout MS]
        stdin: "send N [GAP]" -> N messages, GAP seconds apart (default 0); one
               {"i","status","ms"[,"error"]} line per message, then {"sent": total}
               "quit"   -> shutdown and exit
    python rmq_client.py consume NAMESRV TOPIC GROUP PREFIX
        stdout: {"started": true}, then {"body": ...} for each consumed message whose body starts
        with PREFIX (the lab's own producers write to the same topics); stdin "quit" -> exit
"""

import argparse
import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer

_out = threading.Lock()


def say(**record) -> None:
    with _out:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


def produce(args) -> None:
    # Producer(timeout=) is the per-attempt send timeout; a frozen broker costs one of these per send.
    producer = Producer("PID-real", timeout=args.timeout)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    say(started=True)
    sent = 0
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["send"]:
            gap = float(words[2]) if len(words) > 2 else 0.0
            for n in range(int(words[1])):
                if n and gap:
                    time.sleep(gap)
                msg = Message(args.topic)
                msg.set_body(f"{args.prefix}{sent}")
                begin = time.monotonic()
                try:
                    result = producer.send_sync(msg)
                    record = {"status": result.status.name}
                except Exception as e:  # e.g. every attempt failed: "No route info of this topic"
                    record = {"status": "ERROR", "error": str(e)[:300]}
                say(i=sent, ms=round((time.monotonic() - begin) * 1000), **record)
                sent += 1
            say(sent=sent)
        elif words[:1] == ["quit"]:
            break
    producer.shutdown()


def consume(args) -> None:
    def on_message(msg) -> None:  # returning (not raising) acknowledges the message
        body = msg.body.decode(errors="replace")
        if body.startswith(args.prefix):
            say(body=body)

    consumer = PushConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.subscribe(args.topic, on_message)
    consumer.start()
    say(started=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
    consumer.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("produce")
    p.add_argument("namesrv")
    p.add_argument("topic")
    p.add_argument("prefix")
    p.add_argument("--timeout", type=int, default=3000)
    c = sub.add_parser("consume")
    c.add_argument("namesrv")
    c.add_argument("topic")
    c.add_argument("group")
    c.add_argument("prefix")
    args = parser.parse_args()
    produce(args) if args.mode == "produce" else consume(args)
    sys.stdout.flush()
    os._exit(0)  # skip the ctypes wrappers' __del__ after shutdown: they may touch freed handles


if __name__ == "__main__":
    main()
