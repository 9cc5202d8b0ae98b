"""A tiny application for tests/lab/test_app_runner.py: a RocketMQ client written with raw sockets.

    python tiny_app.py [--ignore-term] [--exit-after S --code C] [--topic T] [ARGS...]

It prints its NAMESRV_ADDR, NSLAB_APP_DIR, TINY, TINY_FILE and arguments as a JSON line on stdout
(and writes "tiny" into TINY_FILE, if set) and a line on stderr, then every
0.3 s asks each NameServer in NAMESRV_ADDR for the route of TOPIC (GET_ROUTEINFO_BY_TOPIC), each on
its own connection with a 1 s timeout, and prints {"ns", "code", "brokers", "strict"} per answer
("strict": whether a standard JSON parser reads the body) or {"ns", "error"};
every broker address in a route it dials once and sends HEART_BEAT (producer group PG-tiny).
"""

import argparse
import json
import os
import re
import signal
import socket
import struct
import sys
import time

SERIALIZE_JSON = 0


def frame(code: int, opaque: int, ext: dict, body: bytes = b"") -> bytes:
    # version 409: RocketMQ 4.9.8 (MQVersion.Version ordinal), which 4.9.4+ NameServers answer with quoted keys
    header = json.dumps({"code": code, "language": "PYTHON", "version": 409, "opaque": opaque, "flag": 0,
                         "extFields": ext}).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def read_frame(sock: socket.socket) -> tuple[dict, bytes]:
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data
    length, word = struct.unpack(">ii", exactly(8))
    rest = exactly(length - 4)
    hl = word & 0xFFFFFF
    return json.loads(rest[:hl]), rest[hl:]


def call(address: str, code: int, ext: dict, body: bytes = b"", timeout: float = 1.0):
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(frame(code, 1, ext, body))
        return read_frame(sock)


def say(**record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--exit-after", type=float)
    parser.add_argument("--code", type=int, default=0)
    parser.add_argument("--topic", default="TinyTopic")
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, lambda *a: say(term="ignored"))
    say(namesrv=os.environ.get("NAMESRV_ADDR"), argv=args.rest, tiny=os.environ.get("TINY"),
        appdir=os.environ.get("NSLAB_APP_DIR"), tiny_file=os.environ.get("TINY_FILE"))
    if os.environ.get("TINY_FILE"):  # a file of its own, where [app.env] says ({appdir}: its folder)
        with open(os.environ["TINY_FILE"], "w") as f:
            f.write("tiny\n")
    sys.stderr.write("tiny app on stderr\n")
    sys.stderr.flush()
    began = time.monotonic()
    heartbeaten = set()
    while True:
        if args.exit_after is not None and time.monotonic() - began >= args.exit_after:
            sys.exit(args.code)
        for ns in (os.environ.get("NAMESRV_ADDR") or "").split(";"):
            try:
                header, body = call(ns, 105, {"topic": args.topic})
            except (OSError, ConnectionError) as e:
                say(ns=ns, error=type(e).__name__)
                continue
            brokers, strict = [], None
            if header.get("code") == 0 and body:
                brokers = re.findall(r'"(\d+\.\d+\.\d+\.\d+:\d+)"', body.decode())
                try:  # a standard JSON parser's view (the dialect fault's unquoted keys fail it)
                    json.loads(body)
                    strict = True
                except ValueError:
                    strict = False
            say(ns=ns, code=header.get("code"), brokers=brokers, strict=strict)
            for broker in brokers:
                if broker in heartbeaten:
                    continue
                heartbeaten.add(broker)
                data = json.dumps({"clientID": "tiny@1", "producerDataSet": [{"groupName": "PG-tiny"}],
                                   "consumerDataSet": []}).encode()
                try:
                    header, _ = call(broker, 34, {}, data)
                    say(broker=broker, heartbeat=header.get("code"))
                except (OSError, ConnectionError) as e:
                    say(broker=broker, error=type(e).__name__)
        time.sleep(0.3)


if __name__ == "__main__":
    main()
