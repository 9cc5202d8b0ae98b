"""Live control: a running lab listens on a Unix socket so `nslab chaos ...` can break it from
another terminal.

Where: $XDG_RUNTIME_DIR/nslab (or /tmp/nslab-<uid>), mode 0700 — per user, never beyond the
machine. Each lab writes `<pid>.sock` and `<pid>.json` (what it is, NAMESRV_ADDR) and removes them
when it stops. The protocol is one JSON line each way: {"words": [...]} ->
{"ok": bool, "message": str, "status": [...]}. Beside them `<pid>.events` streams the lab's records
to viewers (feed.py: `nslab attach`), named in the info as "events".
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path

import trio

from chaos.faults import FaultError

from lab.run.cluster import Cluster
from lab.run.supervisor import StartError
from .faults import LabControl, vocabulary
from .feed import EventFeed

MAX_REQUEST = 64 * 1024


class LiveError(Exception):
    """No lab to talk to, or the one named is gone."""


def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "nslab" if base else Path(tempfile.gettempdir()) / f"nslab-{os.getuid()}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def running_labs() -> list[dict]:
    labs = []
    for info_path in sorted(runtime_dir().glob("*.json")):
        try:
            info = json.loads(info_path.read_text())
            os.kill(info["pid"], 0)  # still alive?
        except (OSError, ValueError, KeyError):
            continue  # a lab that died without cleaning up
        labs.append(info)
    return labs


def status(cluster: Cluster) -> list[dict]:
    links = cluster.network.links
    rows = cluster.status()
    for row in rows:
        name = row["node"]
        if name in links.frozen:
            row["state"] = "frozen"
        elif name in links.isolated:
            row["state"] += " (isolated)"
        cut = sorted({b for a, b in links.blocked if a == name} | {a for a, b in links.blocked if b == name})
        if cut:
            row["cut_off_from"] = cut
        toxics = [t.describe() for (a, b), kinds in links.toxics.items() if name in (a, b) for t in kinds.values()]
        if toxics:
            row["toxics"] = sorted(set(toxics))
    return rows


def events_path() -> Path:
    """Where this process's lab streams its records (feed.py)."""
    return runtime_dir() / f"{os.getpid()}.events"


class ControlServer:
    def __init__(self, cluster: Cluster | None, control: LabControl, info: dict, feed: EventFeed | None = None):
        """feed: the lab's event stream, when it offers one; its owner starts and closes it (it
        outlives this server: the run's last records, after control stops, still reach viewers)."""
        self.cluster, self.control, self.feed = cluster, control, feed
        self.info = {**info, "events": str(feed.path)} if feed is not None else info
        self.vocabulary = vocabulary()
        directory = runtime_dir()
        self.socket_path = directory / f"{os.getpid()}.sock"
        self.info_path = directory / f"{os.getpid()}.json"

    def attach(self, cluster: Cluster) -> None:
        """The cluster, once it runs (a server started before it), and its NameServers in the info."""
        self.cluster = cluster
        self.info["namesrv_addr"] = ";".join(cluster.namesrv_addrs)
        self.info_path.write_text(json.dumps({**self.info, "pid": os.getpid(), "socket": str(self.socket_path)}))

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.socket_path.unlink(missing_ok=True)
        # Bound synchronously: trio's async bind may use a worker thread, and on a virtual clock
        # the time that thread takes would leak into the run and break its determinism.
        plain = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        plain.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        plain.listen(16)
        sock = trio.socket.from_stdlib_socket(plain)
        self.info_path.write_text(json.dumps({**self.info, "pid": os.getpid(), "socket": str(self.socket_path)}))
        try:
            task_status.started(self.socket_path)
            await trio.serve_listeners(self._handle, [trio.SocketListener(sock)])
        finally:
            self.socket_path.unlink(missing_ok=True)
            self.info_path.unlink(missing_ok=True)

    async def _handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                data += chunk
            reply = await self.execute(data)
            await stream.send_all(json.dumps(reply).encode() + b"\n")

    async def execute(self, data: bytes) -> dict:
        try:
            words = json.loads(data)["words"]
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return {"ok": False, "message": 'bad request: send {"words": ["kill", "broker-a-0"]}'}
        if words[:1] == ["status"]:
            reply = {"ok": True, "message": f"NAMESRV_ADDR={';'.join(self.cluster.namesrv_addrs)}",
                     "status": status(self.cluster)}
            if self.feed is not None:
                reply["viewers"] = {"attached": self.feed.viewers, "dropped": self.feed.dropped[-5:],
                                    "errors": self.feed.errors[-5:]}
            return reply
        try:
            fault = self.vocabulary.parse_words(words)
            message = await self.control.apply(fault, source="control")
        except (FaultError, StartError) as e:  # a word out of place, a node that would not start
            return {"ok": False, "message": str(e)}
        return {"ok": True, "message": message}


def pick_lab(lab: str | None = None) -> dict:
    """The info of the lab `--lab PID` names, or of the only one running."""
    labs = running_labs()
    if lab is not None:
        labs = [info for info in labs if str(info["pid"]) == str(lab)]
        if not labs:
            raise LiveError(f"no running lab {lab!r}" + _listing())
    elif not labs:
        raise LiveError("no running lab found: start one with `nslab up` (or `nslab up --headless`)")
    elif len(labs) > 1:
        raise LiveError("several labs are running; pick one with --lab PID:" + _listing())
    return labs[0]


def send(words: list[str], lab: str | dict | None = None, timeout: float = 30.0) -> dict:
    """The client side, for `nslab chaos` and an attached view: plain blocking sockets, no trio
    needed. lab: a PID, a lab's info (pick_lab), or None for the only one."""
    info = lab if isinstance(lab, dict) else pick_lab(lab)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(info["socket"])
        sock.sendall(json.dumps({"words": words}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def _listing() -> str:
    return "".join(f"\n  {info['pid']}  {info.get('mode', '?')}  NAMESRV_ADDR={info.get('namesrv_addr', '?')}"
                   for info in running_labs())
