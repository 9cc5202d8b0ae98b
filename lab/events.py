"""The event log: append-only msgpack records, one map each, written as the run goes.

Every record has `t` (virtual seconds since the run started), `node` and `kind`; the first is
`run.start`. The schema is in docs/events.md, versioned by SCHEMA_VERSION. Records are written in
the order they happen and hold only plain values, so in simulated mode the same seed gives the
same bytes.
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

import msgpack

SCHEMA_VERSION = 4
FLUSH_EVERY = 256  # records; a reader copes with a torn last record anyway

Subscriber = Callable[[dict], None]


class EventLog:
    def __init__(self, clock: Callable[[], float], path: str | Path | None = None):
        """clock: returns the current time in seconds (trio.current_time); t is measured from
        the first call to `start`."""
        self._clock = clock
        self._origin = 0.0
        self._file: BinaryIO | None = open(path, "wb") if path else None
        # Records are packed one by one into a buffer, which goes to the hash and the file
        # FLUSH_EVERY records at a time: one write and one hash update per batch, not per record.
        # (Not into a packer's own buffer: msgpack empties it when a pack fails.)
        self._buffer = bytearray()
        self._sha = hashlib.sha256()
        self._unflushed = 0
        self.count = 0
        self.subscribers: list[Subscriber] = []
        self.path = Path(path) if path else None

    def start(self, **fields) -> dict:
        self._origin = self._clock()
        return self.emit("lab", "run.start", schema=SCHEMA_VERSION, **fields)

    def now(self) -> float:
        return self._clock() - self._origin

    def clock_time(self, t: float) -> float:
        """The clock's time at run time `t`: a scenario's `at = "1m"` is t = 60.000 in the log."""
        return self._origin + t

    def emit(self, node: str, kind: str, **fields) -> dict:
        record = {"t": round(self.now(), 6), "node": node, "kind": kind, **fields}
        self._buffer += pack_record(record)
        self.count += 1
        self._unflushed += 1
        if self._unflushed >= FLUSH_EVERY:
            self.flush()
        for subscriber in self.subscribers:
            subscriber(record)
        return record

    def flush(self) -> None:
        data = bytes(self._buffer)
        self._buffer.clear()
        self._unflushed = 0
        self._sha.update(data)
        if self._file is not None:
            self._file.write(data)
            self._file.flush()

    def sha256(self) -> str:
        self.flush()
        return self._sha.hexdigest()

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None


# A string a hostile peer sent may hold lone surrogates: they are written as "\udXXX" text.
_pack = msgpack.Packer(unicode_errors="backslashreplace").pack


def pack_record(record: dict) -> bytes:
    """One record in msgpack, whatever a peer put in it."""
    try:
        return _pack(record)
    except (TypeError, ValueError, OverflowError):  # a value msgpack cannot hold: an int beyond 64 bits
        return _pack(_packable(record))


def _packable(value: object) -> object:
    """`value` with what msgpack cannot hold (an integer beyond 64 bits, an unknown type) as text."""
    if isinstance(value, dict):
        return {_packable(k): _packable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_packable(v) for v in value]
    if value is None or isinstance(value, (bool, float, str, bytes)):
        return value
    if isinstance(value, int) and -2**63 <= value < 2**64:
        return value
    return str(value)


def read_events(source: str | Path | BinaryIO | bytes) -> Iterator[dict]:
    """Every complete record; a torn last record (a run killed mid-write) is skipped."""
    if isinstance(source, (bytes, bytearray)):
        source = io.BytesIO(source)
    if isinstance(source, (str, Path)):
        with open(source, "rb") as f:
            yield from read_events(f)
        return
    unpacker = msgpack.Unpacker(source, raw=False, strict_map_key=False)
    try:
        for record in unpacker:
            if isinstance(record, dict):
                yield record
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError):
        return


# What a damaged log raises mid-file: bytes that are no msgpack, a string that is no UTF-8, a map
# keyed by a list, nesting too deep.
_UNREADABLE = (msgpack.FormatError, msgpack.StackError, ValueError, TypeError)
# The largest record a reader takes: the largest the lab writes (an ns.tables of a 10,000-topic
# table) is a few MB; a bit flipped in a length must not make a reader wait for gigabytes.
MAX_RECORD_BYTES = 64 << 20


@dataclass
class LogScan:
    """A log read up to its first unreadable byte: what a report or a replay can still use."""
    records: list[dict]
    problem: str | None  # None when the log is sound, else a short reason (scan_events' words)
    end: int  # the byte after the last sound record
    size: int  # the log's length in bytes

    @property
    def torn(self) -> bool:
        """Only the last record is cut off, as a run killed mid-write leaves it: every byte before
        it was read. Anything else unreadable is damage in the middle."""
        return self.problem is not None and self.problem.startswith("truncated")


def scan_events(data: bytes) -> tuple[list[dict], str | None]:
    """A whole log's records up to the first that cannot be read, and what is wrong with the log:
    None when it is sound, else a short reason. Unlike read_events, which skips what it cannot use,
    this is for a report that must not count a damaged run as a whole one."""
    scan = scan_stream(io.BytesIO(data), len(data))
    return scan.records, scan.problem


def scan_file(path: str | Path) -> LogScan:
    """scan_events for a file, read as a stream: memory for the records, not the file too."""
    with open(path, "rb") as f:
        return scan_stream(f, os.fstat(f.fileno()).st_size)


def scan_stream(stream: BinaryIO, size: int) -> LogScan:
    unpacker = msgpack.Unpacker(stream, raw=False, strict_map_key=False, max_buffer_size=MAX_RECORD_BYTES)
    records: list[dict] = []
    end, problem = 0, None  # end: the byte after the last sound record
    try:
        for record in unpacker:
            if type(record) is not dict:
                problem = f"record {len(records)} is not a map"
                break
            records.append(record)
            end = unpacker.tell()
    except _UNREADABLE:
        problem = f"corrupt at byte {end}"
    except msgpack.BufferFull:
        problem = f"corrupt at byte {end}: a record over {MAX_RECORD_BYTES >> 20} MiB"
    if problem is None and end < size:  # the unpacker waits for the rest of a record that never came
        problem = f"truncated: the last record is cut off at byte {end}"
    if not size:
        problem = "empty: no event records"
    elif not records or records[0].get("kind") != "run.start":
        problem = "not an event log: it does not begin with run.start"
    elif problem is None and not any(r.get("kind") == "run.end" for r in reversed(records)):
        problem = "incomplete: no run.end (the run was cut short)"
    return LogScan(records, problem, end, size)
