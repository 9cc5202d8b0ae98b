"""A broken application: it crashes when every NameServer is down.

What it gets wrong: it treats the NameServer as a hard dependency. A health-check thread asks each
NameServer in NAMESRV_ADDR for its topic's route every 2 s (GET_ROUTEINFO_BY_TOPIC over a plain
socket, as a readiness probe or an admin call might); after three checks in a row with no answer
from any NameServer it logs "no NameServer reachable" and exits with code 2. Its RocketMQ client
needed no NameServer: producers and consumers run on their cached routes while every NameServer is
down, talking to the brokers directly.

Which expectation catches it: app_keeps_running on app-all-nameservers-down ("app exited at
t=... (exit code 2) before the lab stopped it, during ns-down all"); and, from then on, app_send_rate
in the phase the NameServers are down.

    nslab run app-all-nameservers-down --app 'python examples/apps/ns_crash_app.py'
"""

import json
import os
import socket
import struct
import sys
import threading

from python_app import App, main, say

CHECKS = 3  # failed checks in a row before giving up
GET_ROUTEINFO_BY_TOPIC = 105


def route_answered(address: str, topic: str, timeout: float = 2.0) -> bool:
    """Whether the NameServer at host:port answers a GET_ROUTEINFO_BY_TOPIC (any code) in time."""
    host, _, port = address.strip().rpartition(":")
    header = json.dumps({"code": GET_ROUTEINFO_BY_TOPIC, "language": "PYTHON", "version": 399, "opaque": 1,
                         "flag": 0, "extFields": {"topic": topic}}).encode()
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">ii", 4 + len(header), len(header)) + header)
            return len(sock.recv(8)) == 8
    except OSError:
        return False


class NsCrashApp(App):
    def run(self) -> int:
        threading.Thread(target=self.health, name="health", daemon=True).start()
        return super().run()

    def health(self) -> None:
        failed = 0
        while not self.stopping.wait(2.0):
            if any(route_answered(a, self.args.topic) for a in self.args.namesrv.split(";") if a.strip()):
                failed = 0
                continue
            failed += 1
            if failed >= CHECKS:  # the mistake: the registry is down, so the app goes down too
                say("no NameServer reachable: exiting")
                sys.stdout.flush()
                os._exit(2)


if __name__ == "__main__":
    main(NsCrashApp)
