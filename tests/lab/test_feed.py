"""The live event stream (lab/control/feed.py): every record, once, in order, to each viewer; a
viewer that stops reading costs the lab nothing and is dropped with its reason."""

from __future__ import annotations

import socket
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

from lab.control.feed import EventFeed
from lab.events import pack_record, read_events
from other_user import python_for_other_user, run_as_other_user


def record(i: int, size: int = 100) -> dict:
    return {"t": i / 10, "node": "producer-0", "kind": "producer.send", "msg_id": f"M{i}", "pad": "x" * size}


def connect(feed: EventFeed, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(str(feed.path))
    return sock


def read_all(sock: socket.socket, into: bytearray) -> None:
    while chunk := sock.recv(65536):
        into += chunk


def wait_for(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def test_a_late_viewer_gets_the_history_then_every_new_record_exactly_once(tmp_path):
    feed = EventFeed(tmp_path / "lab.events")
    feed.start()
    records = [record(i) for i in range(3000)]
    for r in records[:2000]:  # more than a history piece: the pieces and the one being filled
        feed.record(r)
    sock = connect(feed)
    received = bytearray()
    reader = threading.Thread(target=read_all, args=(sock, received))
    reader.start()
    wait_for(lambda: feed.viewers == 1, "the viewer is registered")
    for r in records[2000:]:  # while it catches up
        feed.record(r)
    feed.close()
    reader.join(10)
    assert bytes(received) == b"".join(pack_record(r) for r in records)
    assert list(read_events(bytes(received))) == records
    assert feed.dropped == [] and feed.errors == []


def late_viewer_gets(feed: EventFeed) -> bytes:
    """What a viewer that connects now receives by the time the feed is closed."""
    sock = connect(feed)
    received = bytearray()
    reader = threading.Thread(target=read_all, args=(sock, received))
    reader.start()
    wait_for(lambda: feed.viewers == 1, "the viewer is registered")
    feed.close()
    reader.join(10)
    return bytes(received)


def test_the_history_is_kept_out_of_memory_and_a_late_viewer_still_gets_all_of_it(tmp_path):
    """A large cluster writes 5 MB of records a virtual minute, and a lab may run for hours."""
    feed = EventFeed(tmp_path / "lab.events")
    feed.start()
    records = [record(i, size=1000) for i in range(20_000)]  # ~20 MB
    tracemalloc.start()
    try:
        for r in records:
            feed.record(r)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 2 << 20, f"the feed holds {held / 2**20:.1f} MB of a 20 MB history in memory"
    assert late_viewer_gets(feed) == b"".join(pack_record(r) for r in records)
    assert feed.dropped == [] and feed.errors == []


def test_a_history_file_that_fails_costs_nothing_but_memory_and_is_said(tmp_path, monkeypatch):
    import errno

    import lab.control.feed as feed_module

    feed = EventFeed(tmp_path / "lab.events")
    feed.start()
    records = [record(i, size=1000) for i in range(400)]
    for r in records[:200]:
        feed.record(r)
    real_pwrite = feed_module.os.pwrite

    def full_disk(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(feed_module.os, "pwrite", full_disk)
    for r in records[200:]:  # the lab goes on
        feed.record(r)
    monkeypatch.setattr(feed_module.os, "pwrite", real_pwrite)
    assert late_viewer_gets(feed) == b"".join(pack_record(r) for r in records)
    assert len(feed.errors) == 1 and "No space left on device" in feed.errors[0]


def test_a_viewer_that_stops_reading_never_slows_the_lab_and_is_dropped_with_a_reason(tmp_path):
    feed = EventFeed(tmp_path / "lab.events", lag=2 << 20)
    feed.start()
    stuck = connect(feed, rcvbuf=4096)  # never reads
    good = connect(feed)
    received = bytearray()
    reader = threading.Thread(target=read_all, args=(good, received))
    reader.start()
    wait_for(lambda: feed.viewers == 2, "both viewers are registered")
    records = [record(i, size=400) for i in range(20_000)]  # ~8 MB: far past the stuck one's 2 MB
    slowest = 0.0
    for i, r in enumerate(records):
        if i % 100 == 0:
            time.sleep(0.002)  # a busy lab, yet one a reading viewer keeps up with
        start = time.perf_counter()
        feed.record(r)
        slowest = max(slowest, time.perf_counter() - start)
    assert slowest < 0.05, f"a record took {slowest * 1000:.0f} ms: the lab waited on a viewer"
    assert feed.dropped == ["viewer 1 fell 2 MB behind (not reading)"]
    feed.close()
    reader.join(10)
    assert list(read_events(bytes(received))) == records, "the reading viewer still got everything"
    stuck.close()


def test_a_viewer_that_leaves_is_let_go(tmp_path):
    feed = EventFeed(tmp_path / "lab.events")
    feed.start()
    sock = connect(feed)
    wait_for(lambda: feed.viewers == 1, "the viewer is registered")
    sock.close()
    deadline = time.monotonic() + 10
    while feed.viewers and time.monotonic() < deadline:  # its sender notices on its next send
        feed.record(record(0, size=50_000))
        time.sleep(0.06)
    assert feed.viewers == 0 and feed.dropped == ["viewer 1 left"]
    feed.close()
    assert not feed.path.exists()


def test_an_accept_that_fails_is_said_and_the_next_viewer_still_served(tmp_path):
    """Out of file descriptors for a moment (EMFILE): the feed says so and goes on accepting."""
    import errno

    feed = EventFeed(tmp_path / "lab.events")
    feed.start()
    real = feed._listener

    class OutOfDescriptors:
        def __init__(self):
            self.failed = False

        def accept(self):
            if not self.failed:
                self.failed = True
                raise OSError(errno.EMFILE, "Too many open files")
            return real.accept()

        def close(self):
            real.close()

    flaky = feed._listener = OutOfDescriptors()
    wait_for(lambda: flaky.failed, "the accept failed once")
    feed.record(record(0))
    assert late_viewer_gets(feed) == pack_record(record(0))
    assert feed.errors == ["accept: [Errno 24] Too many open files"]


def test_viewers_past_the_cap_are_refused_with_a_reason(tmp_path, monkeypatch):
    import lab.control.feed as feed_module

    monkeypatch.setattr(feed_module, "MAX_VIEWERS", 2, raising=False)
    feed = EventFeed(tmp_path / "lab.events")
    feed.start()
    first, second = connect(feed), connect(feed)
    wait_for(lambda: feed.viewers == 2, "two viewers are registered")
    third = connect(feed)
    third.settimeout(5)
    assert third.recv(1) == b"", "closed at once"
    assert feed.viewers == 2 and feed.dropped == ["viewer 3 refused: 2 viewers attached"]
    feed.close()
    for sock in (first, second, third):
        sock.close()


def test_a_viewer_of_another_user_is_refused(tmp_path):
    """Even were the socket within its reach (a folder and socket someone opened up by hand)."""
    import os
    import shutil

    python_for_other_user()  # skips, saying why, when no other user can be acted as
    shared = Path(tempfile.mkdtemp(prefix="nslab-feed-", dir="/tmp"))
    try:
        os.chmod(shared, 0o755)
        feed = EventFeed(shared / "lab.events")
        feed.start()
        os.chmod(feed.path, 0o666)
        feed.record(record(0))
        code = ("import socket, sys\n"
                "s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])\n"
                "data = b''\n"
                "try:\n"
                "    while chunk := s.recv(65536): data += chunk\n"
                "except TimeoutError: pass\n"
                "print(len(data))\n")
        other = run_as_other_user(code, str(feed.path), timeout=30)
        assert other.stdout.strip() == "0", f"the other user read {other.stdout.strip()} bytes of the lab's records"
        assert feed.dropped == ["viewer 1 refused: uid 65534 is not the lab's user"]
        feed.close()
    finally:
        shutil.rmtree(shared)
