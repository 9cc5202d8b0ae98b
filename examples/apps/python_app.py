"""A well-behaved RocketMQ application on the real C++ client (PyPI rocketmq==0.4.4), for nslab's app
scenarios (docs/apps.md):

    nslab run app-broker-crash --app 'python examples/apps/python_app.py'

What it does right:
- reads NAMESRV_ADDR (every NameServer, ';'-separated) from its environment, as RocketMQ clients do;
- starts its push consumer (group APP_GROUP) before its producer, so a new group reads from offset 0;
- sends APP_RATE messages a second to APP_TOPIC, each with send_sync (the client's own attempts,
  each on another broker), and when every attempt failed retries the same message 0.5 s later until
  it is acknowledged or the app is stopping: a broker crash or a partition delays messages, it does
  not drop them;
- processes each message in the consume callback, before the client commits its offset;
- keeps running whatever happens to the NameServers or brokers;
- on SIGTERM (the lab's stop) stops producing, waits up to APP_DRAIN seconds for its consumer to
  receive what its producer got acknowledged, shuts both down and exits 0 — well within the lab's
  grace (10 s by default).

With APP_HISTORY set (or --history PATH) it writes one JSON line per completed operation, the
history nslab's app_history and app_acked_consumed (history = ...) read — the app scenarios set
APP_HISTORY = "{appdir}/history.jsonl", in the app's own folder beside its stdout (NSLAB_APP_DIR):
    {"op": "send", "topic", "offset", "uniq_key", "ok": true}             acknowledged
    {"op": "send", "topic", "ok": false, "error"}                          every attempt failed
    {"op": "receive", "topic", "queue", "offset", "uniq_key", "ok": true}  processed

Settings (environment, or the options of the same name): APP_TOPIC (AppTopic), APP_GROUP (CG-app),
APP_PRODUCER_GROUP (PG-app), APP_RATE (5 a second), APP_SEND_TIMEOUT_MS (3000: the client's
per-attempt timeout), APP_DRAIN (5 s), APP_HISTORY. The C++ client's intervals are fixed (route
poll 30 s, heartbeat 30 s, offset commit 5 s, rebalance 10 s): the app scenarios allow for them.

The other apps in this folder are this one with one mistake each.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer


def settings(argv=None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default=env("NAMESRV_ADDR"), help="NameServer addresses, ';'-separated")
    parser.add_argument("--topic", default=env("APP_TOPIC", "AppTopic"))
    parser.add_argument("--group", default=env("APP_GROUP", "CG-app"), help="the consumer group")
    parser.add_argument("--producer-group", default=env("APP_PRODUCER_GROUP", "PG-app"))
    parser.add_argument("--rate", type=float, default=float(env("APP_RATE", "5")), help="messages a second")
    parser.add_argument("--send-timeout-ms", type=int, default=int(env("APP_SEND_TIMEOUT_MS", "3000")))
    parser.add_argument("--drain", type=float, default=float(env("APP_DRAIN", "5")),
                        help="seconds to wait at shutdown for the consumer to catch up")
    parser.add_argument("--history", default=env("APP_HISTORY"), help="write the operation history here")
    args = parser.parse_args(argv)
    if not args.namesrv:
        parser.error("no NameServer: set NAMESRV_ADDR or give --namesrv")
    return args


def say(*words) -> None:
    print(time.strftime("%H:%M:%S"), *words, flush=True)


class App:
    """The application: a producer at a steady rate, a push consumer, a history."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.history = open(args.history, "w", encoding="utf-8") if args.history else None
        self.acked: set[str] = set()  # UNIQ_KEYs the brokers acknowledged
        self.received: set[str] = set()  # UNIQ_KEYs processed
        self.sent = self.failed_attempts = 0
        self.producer: Producer | None = None
        self.consumer: PushConsumer | None = None

    # --- history ------------------------------------------------------------------------------------

    def write(self, **op) -> None:
        if self.history is None:
            return
        with self.lock:
            self.history.write(json.dumps(op) + "\n")
            self.history.flush()

    # --- consuming ----------------------------------------------------------------------------------

    def on_message(self, msg) -> None:
        """The push consumer's callback: returning acknowledges the message (its offset is then
        committed); raising asks for it again."""
        self.process(msg)

    def process(self, msg) -> None:
        with self.lock:
            self.received.add(msg.id)
        self.write(op="receive", topic=msg.topic, queue=msg.queue_id, offset=msg.queue_offset, uniq_key=msg.id,
                   ok=True)

    def start_consumer(self) -> None:
        self.consumer = PushConsumer(self.args.group)
        self.consumer.set_namesrv_addr(self.args.namesrv)
        self.consumer.subscribe(self.args.topic, self.on_message)
        self.consumer.start()

    # --- producing ----------------------------------------------------------------------------------

    def start_producer(self) -> None:
        self.producer = Producer(self.args.producer_group, timeout=self.args.send_timeout_ms)
        self.producer.set_namesrv_addr(self.args.namesrv)
        self.producer.start()

    def message(self, n: int) -> Message:
        msg = Message(self.args.topic)
        msg.set_keys(f"k{n}")
        msg.set_body(f"app message {n}")
        return msg

    def send_once(self, n: int):
        """One send_sync: the client's own attempts. The SendResult, or raises when all failed."""
        result = self.producer.send_sync(self.message(n))
        with self.lock:
            self.acked.add(result.msg_id)
        self.write(op="send", topic=self.args.topic, offset=result.offset, uniq_key=result.msg_id, ok=True)
        return result

    def send(self, n: int) -> None:
        """Send message n until it is acknowledged or the app is stopping."""
        while True:
            try:
                self.send_once(n)
                self.sent += 1
                return
            except Exception as e:  # every attempt failed: "No route info of this topic", a timeout...
                self.failed_attempts += 1
                self.write(op="send", topic=self.args.topic, ok=False, error=str(e)[:200])
                print(f"send {n} failed, retrying: {str(e)[:200]}", file=sys.stderr, flush=True)
                if self.stopping.wait(0.5):
                    return

    def produce(self) -> None:
        gap, n = 1.0 / self.args.rate, 0
        due = time.monotonic()
        while not self.stopping.is_set():
            self.send(n)
            n += 1
            due = max(due + gap, time.monotonic() - gap)  # a slow send delays the next, no burst after
            self.stopping.wait(max(0.0, due - time.monotonic()))

    # --- the whole life -----------------------------------------------------------------------------

    def report(self) -> None:
        while not self.stopping.wait(5.0):
            say(f"sent {self.sent}, failed attempts {self.failed_attempts}, received {len(self.received)}")

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        say(f"NAMESRV_ADDR={self.args.namesrv} topic={self.args.topic} group={self.args.group}")
        self.start_consumer()
        self.start_producer()
        producing = threading.Thread(target=self.produce, name="produce", daemon=True)
        producing.start()
        threading.Thread(target=self.report, name="report", daemon=True).start()
        while not self.stopping.wait(0.5):
            pass
        return self.shutdown(producing)

    def shutdown(self, producing: threading.Thread) -> int:
        say("stopping")
        producing.join(self.args.send_timeout_ms * 5 / 1000)
        self.producer.shutdown()
        deadline = time.monotonic() + self.args.drain
        while time.monotonic() < deadline:
            with self.lock:
                missing = len(self.acked - self.received)
            if not missing:
                break
            time.sleep(0.1)
        self.consumer.shutdown()
        with self.lock:
            missing = len(self.acked - self.received)
        say(f"stopped: sent {self.sent}, received {len(self.received)}, acknowledged but not received {missing}")
        if self.history is not None:
            self.history.close()
        return 0


def main(app_class=App) -> None:
    code = app_class(settings()).run()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip the ctypes wrappers' __del__ after shutdown: they may touch freed handles


if __name__ == "__main__":
    main()
