"""The live event stream: a running lab's records, to any process that connects (`nslab attach`,
`nslab serve`'s browser tabs).

Where: `<pid>.events`, a Unix socket beside the control socket (live.py), named in the lab's info
file as "events". The protocol is one way: connect, and the lab sends every record so far (so a
view catches up: the story, the tables), then each new record as it is written — msgpack maps
back to back, exactly the bytes an event log file holds (read_events reads them). When the run
ends the lab sends what is left, run.end last, and closes. A viewer the lab gives up on is
closed without run.end.

Why threads, not trio: a viewer must never change the run. Trio shuffles each batch of ready
tasks with the run's seeded RNG, so one more task woken in a batch (an accept, a send) would
reorder a simulated run's own tasks and change its records. Here the run only calls `record`, which
packs the record and appends it to buffers under a lock; accepting and sending happen in threads
the run never waits for. A viewer that stops reading is bounded (LAG bytes behind, STALL seconds
on one send), then dropped with its reason kept in `dropped` (`nslab chaos status` shows it).
Only this user's processes are served (the socket is mode 0600 in the private runtime folder, and a
peer of another uid is refused), at most MAX_VIEWERS at once; the reasons kept are the last KEPT.

Every record so far is kept for the next viewer to catch up from: the piece being filled in
memory, full pieces in an unlinked temporary file (a large cluster writes 5 MB of records a
virtual minute, and a lab may run for hours). Senders read them back with pread.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import NamedTuple

from lab.events import pack_record
from .private import peer_uid

LAG = 16 * 1024 * 1024  # bytes of new records a viewer may be behind before it is dropped
STALL = 30.0  # seconds one send to a viewer may take before it is dropped
CHUNK = 64 * 1024  # the history is kept in pieces of about this size: a new viewer copies no bytes
COALESCE = 0.05  # s a sender waits after each send for records to gather: ≤ 20 wake-ups a second
FLUSH = 2.0  # s the lab waits, as it ends, for viewers to get the last records
ACCEPT_POLL = 0.2  # s: how soon the accepting thread notices the feed closing
MAX_VIEWERS = 256  # at once: each costs a thread; one more is closed at once, the reason kept
KEPT = 100  # reasons kept in `dropped` and in `errors`: a flood of viewers must not grow them


class _Spilled(NamedTuple):
    """A full piece of the history, in the feed's file."""
    offset: int
    size: int


class _Viewer:
    def __init__(self, sock: socket.socket, backlog: list[_Spilled | bytes], lock: threading.Lock, number: int):
        self.sock = sock
        self.number = number
        self.pending: deque[_Spilled | bytes] = deque(backlog)  # the history first, then new records
        self.lag = 0  # bytes of new records waiting
        self.wake = threading.Condition(lock)
        self.closing = False  # the run ended: send what is left, then close
        self.dropped: str | None = None


class EventFeed:
    def __init__(self, path: Path, *, lag: int = LAG, stall: float = STALL):
        self.path = Path(path)
        self.lag_limit, self.stall = lag, stall
        self._lock = threading.Lock()
        self._chunks: list[_Spilled | bytes] = []  # the history: full pieces, in the file...
        self._current = bytearray()  # ...and the one being filled
        # Closed when the feed is collected (a sender thread may still be reading it). Once a
        # write to it failed, new pieces stay in memory (_spilling False); those in it are read on.
        self._history = tempfile.TemporaryFile(prefix="nslab-feed-")
        self._spilling = True
        self._history_size = 0
        self._viewers: list[_Viewer] = []
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self._closed = False
        self._count = 0
        self.dropped: list[str] = []  # why each dropped viewer was dropped, in order
        self.errors: list[str] = []  # what went wrong accepting viewers or keeping the history

    # --- the run's side: called for every record, never blocks --------------------------------

    def record(self, record: dict) -> None:
        data = pack_record(record)
        with self._lock:
            self._current += data
            if len(self._current) >= CHUNK:
                self._chunks.append(self._spill(bytes(self._current)))
                self._current.clear()
            for viewer in list(self._viewers):
                if viewer.lag + len(data) > self.lag_limit:
                    self._drop(viewer, f"viewer {viewer.number} fell {self.lag_limit // 2**20} MB behind (not reading)")
                    continue
                if not viewer.pending:
                    viewer.wake.notify()
                viewer.pending.append(data)
                viewer.lag += len(data)

    def _spill(self, piece: bytes) -> _Spilled | bytes:
        """A full piece of the history, written to the file; kept in memory if the file cannot
        take it (a full disk must not stop the lab), said once in `errors`."""
        if self._spilling:
            try:
                size = os.pwrite(self._history.fileno(), piece, self._history_size)
                if size != len(piece):
                    raise OSError(f"took {size} of {len(piece)} bytes")
            except OSError as e:
                self.errors.append(f"history file: {e}; the history is kept in memory from here on")
                self._spilling = False
            else:
                spilled = _Spilled(self._history_size, size)
                self._history_size += size
                return spilled
        return piece

    @property
    def viewers(self) -> int:
        with self._lock:
            return len(self._viewers)

    def _drop(self, viewer: _Viewer, reason: str) -> None:
        """With the lock held: the viewer is let go and the reason kept; its sender, maybe blocked
        in a send, is woken by the shutdown and leaves."""
        if viewer.dropped is not None:
            return
        viewer.dropped = reason
        _keep(self.dropped, reason)
        if viewer in self._viewers:
            self._viewers.remove(viewer)
        viewer.pending.clear()
        viewer.wake.notify()
        try:
            viewer.sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # already gone
            pass

    # --- the threads --------------------------------------------------------------------------

    def start(self) -> None:
        """Listen at `path` (mode 0600: the same user only, like the control socket)."""
        self.path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        os.chmod(self.path, 0o600)
        listener.listen(16)
        listener.settimeout(ACCEPT_POLL)
        self._listener = listener
        # Not in _threads: close() does not wait for it (it notices the close within ACCEPT_POLL),
        # or every run would end ACCEPT_POLL later.
        threading.Thread(target=self._accept, name="nslab-feed-accept", daemon=True).start()

    def _spawn(self, target, name: str, *args) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        number = 0
        while not self._closed:
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError as e:
                if self._closed:  # the listener closed under us is the normal end
                    return
                with self._lock:  # out of descriptors, say: said, then tried again a little later
                    _keep(self.errors, f"accept: {e}")
                time.sleep(ACCEPT_POLL)
                continue
            number += 1
            sock.settimeout(self.stall)
            uid = peer_uid(sock)
            with self._lock:
                if self._closed:
                    sock.close()
                    return
                refused = (f"viewer {number} refused: uid {uid} is not the lab's user" if uid not in (None, os.getuid())
                           else f"viewer {number} refused: {MAX_VIEWERS} viewers attached"
                           if len(self._viewers) >= MAX_VIEWERS else None)
                if refused:
                    _keep(self.dropped, refused)
                    sock.close()
                    continue
                # The history and the registration under one lock: no record is missed or sent twice.
                backlog = [*self._chunks, bytes(self._current)]
                viewer = _Viewer(sock, backlog, self._lock, number)
                self._viewers.append(viewer)
                # Started under the lock too: close() (which takes it first) then joins only started
                # threads, and every registered viewer's thread is among them.
                self._spawn(self._send, f"nslab-feed-{number}", viewer)

    def _send(self, viewer: _Viewer) -> None:
        """One viewer's sender: whatever waits, in pieces of at most 1 MB (STALL is per send)."""
        try:
            while True:
                with viewer.wake:
                    while not viewer.pending and not viewer.closing and viewer.dropped is None:
                        viewer.wake.wait()
                    if viewer.dropped is not None:
                        break
                    if not viewer.pending:  # closing, all sent
                        break
                    batch, size = [], 0
                    while viewer.pending and size < 2**20:
                        piece = viewer.pending.popleft()
                        batch.append(piece)
                        size += piece.size if type(piece) is _Spilled else len(piece)
                    viewer.lag = max(0, viewer.lag - size)
                    behind = bool(viewer.pending)
                viewer.sock.sendall(b"".join(map(self._read, batch)))
                if not behind and not viewer.closing:  # caught up: let the next records gather
                    time.sleep(COALESCE)
        except (TimeoutError, OSError) as e:
            with self._lock:
                if viewer.dropped is None:
                    gone = isinstance(e, (BrokenPipeError, ConnectionResetError))
                    self._drop(viewer, f"viewer {viewer.number} left" if gone else
                               f"viewer {viewer.number} stalled {self.stall:g} s on one send" if isinstance(e, TimeoutError)
                               else f"viewer {viewer.number}: {e}")
        except Exception as e:  # anything else is a bug: the viewer goes, the reason stays
            with self._lock:
                self._drop(viewer, f"viewer {viewer.number}: {type(e).__name__}: {e}")
        finally:
            viewer.sock.close()
            with self._lock:
                if viewer in self._viewers:
                    self._viewers.remove(viewer)

    def _read(self, piece: _Spilled | bytes) -> bytes:
        if type(piece) is not _Spilled:
            return piece
        data = os.pread(self._history.fileno(), piece.size, piece.offset)
        if len(data) != piece.size:
            raise OSError(f"the event feed's history file gave {len(data)} of {piece.size} bytes at {piece.offset}")
        return data

    def close(self, flush: float = FLUSH) -> None:
        """The run is over: stop accepting, give the viewers up to `flush` seconds to get the
        last records (run.end), then let go of the rest."""
        with self._lock:
            self._closed = True
            viewers = list(self._viewers)
            for viewer in viewers:
                viewer.closing = True
                viewer.wake.notify()
        if self._listener is not None:
            self._listener.close()
            self.path.unlink(missing_ok=True)
        deadline = time.monotonic() + flush
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._lock:
            for viewer in list(self._viewers):
                self._drop(viewer, f"viewer {viewer.number} still had records when the lab ended")


def _keep(reasons: list[str], reason: str) -> None:
    """With the lock held: the reason, and the last KEPT before it."""
    reasons.append(reason)
    del reasons[:-KEPT]
