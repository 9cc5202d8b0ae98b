"""Live control: a running lab listens on a Unix socket so `nslab chaos ...` can break it from
another terminal.

Where: the runtime folder (private.py: $XDG_RUNTIME_DIR/nslab, or $TMPDIR/nslab-<uid>), which must
be the user's own, mode 0700, or nothing starts. Each lab writes `<pid>.sock` and `<pid>.json`
(what it is, NAMESRV_ADDR), both mode 0600, and removes them when it stops. Beside them
`<pid>.events` streams the lab's records to viewers (feed.py: `nslab attach`), named in the info
as "events".

The protocol: one JSON line each way, then the lab closes the connection:
{"words": ["kill", "broker-a-0"]} -> {"ok": bool, "message": str, "status": [...]}.
No client can stop or stall the lab. A request is at most MAX_REQUEST bytes up to its newline (or
the client's end of writing), UTF-8, exactly {"words": [...]} with 1..MAX_WORDS strings of at most
MAX_WORD characters, nested no deeper than that; anything else gets {"ok": false, "message": "bad
request: <what was wrong>"}. A request line must arrive within REQUEST_TIMEOUT seconds of
connecting, a reply be taken within REPLY_TIMEOUT, or the connection is closed. At most
MAX_CONNECTIONS are served at once; one more closes the one that has waited longest for its
request, if that is over EVICT_AFTER (a client that sends at once gets through idle ones), else
waits in the backlog for room. A client of another user is refused. A reply to a client that left
is dropped (a debug line on the "nslab.control" logger).

Why threads, not trio, for the sockets (as feed.py): their timeouts must be wall-clock seconds,
and trio's clock is the run's (virtual in --sim, paused in the UI, `--speed` times faster), and a
connection must never wake a task of the run. Only a well-formed request reaches trio: it runs as a
task of the server's nursery (so it ends with the server), its answer handed back to the thread.
"""

from __future__ import annotations

import array
import concurrent.futures
import itertools
import json
import logging
import os
import re
import select
import socket
import threading
import time
from collections import deque
from pathlib import Path

import trio

from chaos.faults import FaultError

from lab.run.cluster import Cluster
from lab.run.supervisor import StartError
from .actions import LabControl, vocabulary
from .feed import EventFeed
from .private import RuntimeDirError, describe_user, peer_uid, write_private
from .private import runtime_dir as _runtime_dir

MAX_REQUEST = 64 * 1024  # bytes of one request line
MAX_WORDS = 64  # words in a request
MAX_WORD = 1024  # characters in a word
REQUEST_TIMEOUT = 5.0  # wall seconds from connecting to the request's last byte
REPLY_TIMEOUT = 5.0  # wall seconds a client may take to take its reply
MAX_CONNECTIONS = 32  # served at once (a thread each)
EVICT_AFTER = 0.5  # s without a request after which a connection makes room for a newcomer
FULL_POLL = 0.05  # s: how often a newcomer waiting for room looks again
BACKLOG = 128  # connections the kernel queues for the accepting thread: a burst must not be refused
MAX_REPLY = 16 * 2**20  # bytes of a reply the client side reads
ACCEPT_POLL = 0.2  # s: how soon the accepting thread notices the server stopping

log = logging.getLogger("nslab.control")

USAGE = 'send {"words": ["kill", "broker-a-0"]}'
STOPPING = {"ok": False, "message": "the lab is stopping"}


class LiveError(OSError):
    """No lab to talk to, the one named is gone or not ours, or its answer makes no sense. An
    OSError: callers that handle the socket's own errors handle these too."""


class RequestError(ValueError):
    """A control request that breaks the protocol: what was wrong, in a few words."""


def runtime_dir():
    """The user's private runtime folder (private.py); LiveError when it is not theirs."""
    try:
        return _runtime_dir()
    except RuntimeDirError as e:
        raise LiveError(str(e)) from None


def running_labs() -> list[dict]:
    labs = []
    for info_path in sorted(runtime_dir().glob("*.json")):
        try:
            info = json.loads(info_path.read_text())
            os.kill(info["pid"], 0)  # still alive?
        except (OSError, ValueError, KeyError, TypeError, OverflowError):
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


# A string, or an unterminated one to the end: one pass, never a retry from each quote.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_NOT_BRACKET = bytes(set(range(256)) - set(b"[]{}"))
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def parse_request(data: bytes) -> list[str]:
    """The words of one request line, or RequestError naming what is wrong with it."""
    if len(data) > MAX_REQUEST:
        raise RequestError(f"longer than {MAX_REQUEST} bytes")
    # Nesting is measured before json.loads sees it: 60,000 `[` would recurse until RecursionError.
    steps = array.array("b", _STRING.sub(b"", data).translate(_STEP, _NOT_BRACKET))  # +1 per opening, -1 per closing
    deepest = max(itertools.accumulate(steps), default=0)
    if deepest > 2:
        raise RequestError(f"nested {deepest} deep; {USAGE}")
    try:
        request = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise RequestError("not UTF-8") from None
    except ValueError as e:
        raise RequestError(f"not JSON ({e}); {USAGE}") from None
    if not isinstance(request, dict) or set(request) != {"words"}:
        raise RequestError(f'not an object with the one key "words"; {USAGE}')
    words = request["words"]
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise RequestError(f'"words" is not a list of strings; {USAGE}')
    if not 1 <= len(words) <= MAX_WORDS:
        raise RequestError(f"{len(words)} words; a request has 1 to {MAX_WORDS}")
    if any(len(w) > MAX_WORD for w in words):
        raise RequestError(f"a word longer than {MAX_WORD} characters")
    return words


def read_request(sock: socket.socket, deadline: float) -> bytes:
    """The bytes up to the first newline, or to the client's end of writing; TimeoutError at
    `deadline` (time.monotonic) however slowly they come; RequestError past MAX_REQUEST."""
    data = bytearray()
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST and b"\n" not in data[:MAX_REQUEST + 1]:
            raise RequestError(f"longer than {MAX_REQUEST} bytes")
    return bytes(data.partition(b"\n")[0])


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
        self.errors: deque[str] = deque(maxlen=20)  # what went wrong serving clients (a bug, EMFILE)
        self._lock = threading.Lock()
        self._active = 0
        self._waiting: dict[socket.socket, float] = {}  # connections whose request is not in, since when
        self._evicted: set[socket.socket] = set()
        self._closed = False
        self._nursery: trio.Nursery | None = None
        self._token: trio.lowlevel.TrioToken | None = None

    def attach(self, cluster: Cluster) -> None:
        """The cluster, once it runs (a server started before it), and its NameServers in the info."""
        self.cluster = cluster
        self.info["namesrv_addr"] = ";".join(cluster.namesrv_addrs)
        self._write_info()

    def _write_info(self) -> None:
        write_private(self.info_path, json.dumps({**self.info, "pid": os.getpid(), "socket": str(self.socket_path)}))

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.socket_path.unlink(missing_ok=True)
        # Bound synchronously: trio's async bind may use a worker thread, and on a virtual clock
        # the time that thread takes would leak into the run and break its determinism.
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.socket_path))
            os.chmod(self.socket_path, 0o600)
            listener.listen(BACKLOG)
            listener.settimeout(ACCEPT_POLL)
            self._write_info()
        except BaseException:
            listener.close()
            raise
        try:
            async with trio.open_nursery() as nursery:
                self._nursery, self._token = nursery, trio.lowlevel.current_trio_token()
                # The thread closes the listener as it leaves: closing it under a blocked accept
                # could let the descriptor's number be reused before the accept returns.
                threading.Thread(target=self._accept, args=(listener,), name="nslab-control-accept",
                                 daemon=True).start()
                task_status.started(self.socket_path)
                await trio.sleep_forever()
        finally:
            self._closed = True
            self.socket_path.unlink(missing_ok=True)
            self.info_path.unlink(missing_ok=True)

    def _error(self, message: str, exc_info: bool = False) -> None:
        self.errors.append(message)
        log.error("%s", message, exc_info=exc_info)

    # --- the threads --------------------------------------------------------------------------

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while not self._closed:
                if not select.select([listener], [], [], ACCEPT_POLL)[0]:
                    continue  # nobody is waiting to connect
                with self._lock:
                    room = self._active < MAX_CONNECTIONS or self._evict(time.monotonic() - EVICT_AFTER)
                if not room:  # every one is in use: the newcomer waits in the backlog for one
                    time.sleep(FULL_POLL)
                    continue
                try:
                    sock, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError as e:  # out of descriptors, say: said, then tried again a little later
                    if not self._closed:
                        self._error(f"accepting a control connection: {e}")
                        time.sleep(ACCEPT_POLL)
                    continue
                with self._lock:
                    self._active += 1
                    self._waiting[sock] = time.monotonic()
                try:
                    threading.Thread(target=self._serve_one, args=(sock,), name="nslab-control", daemon=True).start()
                except RuntimeError as e:  # no thread to be had
                    with self._lock:
                        self._active -= 1
                        self._waiting.pop(sock, None)
                    sock.close()
                    self._error(f"serving a control connection: {e}")

    def _evict(self, before: float) -> bool:
        """With the lock held: the connection that has waited longest for its request, if since
        `before`, is shut (its thread then answers and leaves); False when there is none."""
        if not self._waiting:
            return False
        oldest = min(self._waiting, key=self._waiting.__getitem__)
        if self._waiting[oldest] > before:
            return False
        del self._waiting[oldest]
        self._evicted.add(oldest)
        try:
            oldest.shutdown(socket.SHUT_RD)  # its recv returns at once
        except OSError:  # already gone
            pass
        return True

    def _serve_one(self, sock: socket.socket) -> None:
        try:
            with sock:
                reply = self._answer(sock)
                if reply is not None:
                    _reply(sock, reply, REPLY_TIMEOUT)
        except Exception as e:  # a bug: the client goes, the lab runs on, the error is kept
            self._error(f"serving a control connection: {type(e).__name__}: {e}", exc_info=True)
        finally:
            with self._lock:
                self._active -= 1
                self._waiting.pop(sock, None)
                self._evicted.discard(sock)

    def _answer(self, sock: socket.socket) -> dict | None:
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():
            return {"ok": False, "message": f"refused: this lab answers {describe_user(os.getuid())} only"}
        try:
            data = read_request(sock, time.monotonic() + REQUEST_TIMEOUT)
            with self._lock:
                self._waiting.pop(sock, None)
                evicted = sock in self._evicted
            if evicted:
                log.debug("a control connection idle for the longest closed for a newer one")
                return {"ok": False, "message": f"closed: {MAX_CONNECTIONS} control connections were open "
                                                "and this one had sent no request for the longest"}
            if not data:
                return None  # connected and left, having said nothing
            words = parse_request(data)
        except RequestError as e:
            return {"ok": False, "message": f"bad request: {e}"}
        except TimeoutError:
            log.debug("a control client sent no full request within %g s: closed", REQUEST_TIMEOUT)
            return {"ok": False, "message": f"bad request: no full line within {REQUEST_TIMEOUT:g} s"}
        except OSError as e:
            log.debug("a control client left before its request: %s", e)
            return None
        answer: concurrent.futures.Future[dict] = concurrent.futures.Future()
        try:
            trio.from_thread.run_sync(self._nursery.start_soon, self._execute_into, words, answer,
                                      trio_token=self._token)
        except (trio.RunFinishedError, RuntimeError):  # the run, or this server, has ended
            return STOPPING
        return answer.result()

    async def _execute_into(self, words: list[str], answer: concurrent.futures.Future) -> None:
        try:
            answer.set_result(await self.execute_words(words))
        except Exception as e:  # a bug applying it: said to the client and kept, the lab runs on
            self._error(f"{' '.join(words)!r}: {type(e).__name__}: {e}", exc_info=True)
            answer.set_result({"ok": False, "message": f"the lab failed on {' '.join(words)!r}: "
                                                       f"{type(e).__name__}: {e} (it runs on)"})
        finally:
            if not answer.done():  # cancelled: the server is stopping
                answer.set_result(STOPPING)

    # --- the requests -------------------------------------------------------------------------

    async def execute(self, data: bytes) -> dict:
        """One request line's answer."""
        try:
            words = parse_request(data)
        except RequestError as e:
            return {"ok": False, "message": f"bad request: {e}"}
        return await self.execute_words(words)

    async def execute_words(self, words: list[str]) -> dict:
        if words[:1] == ["status"]:
            reply = {"ok": True, "message": f"NAMESRV_ADDR={';'.join(self.cluster.namesrv_addrs)}",
                     "status": status(self.cluster)}
            if self.feed is not None:
                reply["viewers"] = {"attached": self.feed.viewers, "dropped": self.feed.dropped[-5:],
                                    "errors": self.feed.errors[-5:]}
            if self.errors:
                reply["control_errors"] = list(self.errors)[-5:]
            return reply
        try:
            fault = self.vocabulary.parse_words(words)
            message = await self.control.apply(fault, source="control")
        except (FaultError, StartError) as e:  # a word out of place, a node that would not start
            return {"ok": False, "message": str(e)}
        return {"ok": True, "message": message}


def _reply(sock: socket.socket, reply: dict, timeout: float) -> None:
    """Sent whole within `timeout`, or dropped: a client that left or does not read is its own loss."""
    try:
        sock.settimeout(timeout)
        sock.sendall(json.dumps(reply).encode() + b"\n")
    except OSError as e:  # BrokenPipeError, ConnectionResetError, TimeoutError
        log.debug("a control reply dropped (%s): the client left or does not read", type(e).__name__)

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
    needed. lab: a PID, a lab's info (pick_lab), or None for the only one. LiveError (an OSError)
    when the lab cannot be reached, is not this user's, or answers nonsense."""
    info = lab if isinstance(lab, dict) else pick_lab(lab)
    name = f"lab {info.get('pid', '?')}"
    data = bytearray()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(info["socket"])
            uid = peer_uid(sock)
            if uid is not None and uid != os.getuid():  # someone else's socket where the lab's should be
                raise LiveError(f"{info['socket']} is served by {describe_user(uid)}, not by you: refusing to talk to it")
            sock.sendall(json.dumps({"words": words}).encode() + b"\n")
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                if len(data) > MAX_REPLY:
                    raise LiveError(f"{name} answered more than {MAX_REPLY // 2**20} MiB: not a reply")
    except TimeoutError:
        raise LiveError(f"{name} did not answer within {timeout:g} s") from None
    except LiveError:
        raise
    except OSError as e:
        raise LiveError(f"cannot reach {name} at {info['socket']}: {e.strerror or e}") from None
    if not data:
        raise LiveError(f"{name} closed the connection without an answer")
    try:
        reply = json.loads(data)
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool) or not isinstance(reply.get("message"), str):
        raise LiveError(f"{name} answered something that is not a reply: {bytes(data[:80])!r}")
    return reply


def _listing() -> str:
    return "".join(f"\n  {info['pid']}  {info.get('mode', '?')}  NAMESRV_ADDR={info.get('namesrv_addr', '?')}"
                   for info in running_labs())
