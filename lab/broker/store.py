"""MessageStore: a broker's disk — the commit log, its consume queues, consumer offsets, and the
config files a 4.9.8 broker rewrites as it runs (store/config/subscriptionGroup.json, and the
broker's properties file updateBrokerConfig rewrites): `config_files`, name -> content.

The commit log holds every record in arrival order at physical offsets that grow by each record's
size, as RocketMQ's does; a consume queue per (topic, queueId) maps logical offsets 0, 1, 2, ... to
records. Nothing is ever deleted, so every queue's min offset is 0.

It outlives its broker the way a disk does: in simulated mode whoever owns the cluster keeps the
object and hands it to the restarted broker; in socket mode give it a `path`: every record and offset
change is appended there (msgpack) and flushed before `put` returns, so what a broker acknowledged
survives the process being killed. Opening replays the file; a torn last record (the process died
mid-write) is cut off. Flushing reaches the OS, which is what a killed process needs; power loss
would need fsync and is not a lab fault.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import BinaryIO, NamedTuple

import msgpack

from lab.remoting.message import MessageExt, RecordIndex, decode_messages, encode_message, index_records, offset_msg_id


class PutMessageResult(NamedTuple):
    msg_id: str  # the offset msgId
    queue_offset: int
    commit_log_offset: int


class MessageStore:
    def __init__(self, path: str | Path | None = None):
        self._commit_log: list[RecordIndex] = []
        self._physical_offsets: list[int] = []  # parallel to _commit_log, for bisect
        self._consume_queues: dict[tuple[str, int], list[RecordIndex]] = {}
        self.max_physical_offset = 0  # where the next record goes
        self.consumer_offsets: dict[tuple[str, str, int], int] = {}  # (group, topic, queueId)
        self.consumer_offsets_version = 0  # bumped on every change; a slave syncs by it
        self._offset_versions: dict[tuple[str, str, int], int] = {}  # the version each offset was set at
        self.config_files: dict[str, object] = {}  # name -> content (msgpack-able), the last one saved
        self.path = Path(path) if path else None
        self._file: BinaryIO | None = None
        if self.path is not None:
            self._replay()
            self._file = open(self.path, "ab")

    # --- writing ------------------------------------------------------------------------------------

    def put(self, msg: MessageExt) -> PutMessageResult:
        """Append a message: its queue offset and physical offset are assigned here."""
        msg.queue_offset = len(self._consume_queues.get((msg.topic, msg.queue_id), ()))
        msg.commit_log_offset = self.max_physical_offset
        self._append(RecordIndex(msg.topic, msg.queue_id, msg.queue_offset, msg.commit_log_offset,
                                 msg.store_timestamp, encode_message(msg)))
        return PutMessageResult(offset_msg_id(msg.store_host, msg.commit_log_offset),
                                msg.queue_offset, msg.commit_log_offset)

    def put_replica(self, data: bytes) -> int:
        """Append records copied from a master's commit log, at the offsets the master gave them.
        Returns how many; raises ValueError if they do not continue this log exactly."""
        records = index_records(data)
        for r in records:
            queue_len = len(self._consume_queues.get((r.topic, r.queue_id), ()))
            if r.commit_log_offset != self.max_physical_offset or r.queue_offset != queue_len:
                raise ValueError(
                    f"replica record at {r.commit_log_offset} (queue offset {r.queue_offset}) does "
                    f"not continue this log at {self.max_physical_offset} (queue offset {queue_len})")
            self._append(r)  # the master's bytes as they are: a replica is a copy
        return len(records)

    def _append(self, record: RecordIndex) -> None:
        self._write({"m": record.data})
        self._index(record)

    def _index(self, record: RecordIndex) -> None:
        self._commit_log.append(record)
        self._physical_offsets.append(record.commit_log_offset)
        self._consume_queues.setdefault((record.topic, record.queue_id), []).append(record)
        self.max_physical_offset = record.commit_log_offset + len(record.data)

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = (group, topic, queue_id)
        if self.consumer_offsets.get(key) != offset:
            self._write({"o": [group, topic, queue_id, offset]})
            self._set_offset(key, offset)

    def save_config(self, name: str, content: object) -> None:
        """ConfigManager.persist: the whole file written again (the last write is what a restart reads)."""
        self._write({"c": [name, content]})
        self.config_files[name] = content

    def _set_offset(self, key: tuple[str, str, int], offset: int) -> None:
        self.consumer_offsets[key] = offset
        self.consumer_offsets_version += 1
        self._offset_versions[key] = self.consumer_offsets_version

    def offsets_since(self, version: int | None) -> list[tuple[str, str, int, int]]:
        """(group, topic, queueId, offset) of every offset set after `version`: what a slave that
        synced at that version lacks. All of them for None (or a version this store never had)."""
        if version is None or version > self.consumer_offsets_version:
            return [(*key, offset) for key, offset in self.consumer_offsets.items()]
        return [(*key, self.consumer_offsets[key]) for key, set_at in self._offset_versions.items()
                if set_at > version]

    def _write(self, record: dict) -> None:
        if self._file is not None:
            self._file.write(msgpack.packb(record))
            self._file.flush()

    def _replay(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            unpacker = msgpack.Unpacker(f, raw=False, strict_map_key=False)
            good = 0
            try:
                for record in unpacker:
                    self._replay_one(record)
                    good = unpacker.tell()
            except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError):
                pass  # a torn or garbled tail: keep what came before it
        if good < self.path.stat().st_size:
            with open(self.path, "r+b") as f:
                f.truncate(good)  # later appends must follow the last good record

    def _replay_one(self, record: dict) -> None:
        if "m" in record:
            (r,) = index_records(record["m"])
            self._index(r)
        elif "c" in record:
            name, content = record["c"]
            self.config_files[name] = content
        else:
            group, topic, queue_id, offset = record["o"]
            self._set_offset((group, topic, queue_id), offset)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    # --- reading ------------------------------------------------------------------------------------

    def get(self, topic: str, queue_id: int, offset: int, max_nums: int) -> list[bytes]:
        """Up to max_nums encoded records from logical `offset` on."""
        queue = self._consume_queues.get((topic, queue_id), [])
        return [r.data for r in queue[max(offset, 0):max(offset, 0) + max(max_nums, 0)]]

    def min_offset(self, topic: str, queue_id: int) -> int:
        return 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The logical offset the next message of the queue will get."""
        return len(self._consume_queues.get((topic, queue_id), ()))

    def message_count(self) -> int:
        return len(self._commit_log)

    def search_offset(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first offset stored at or after `timestamp` (ms); the max offset if none is."""
        queue = self._consume_queues.get((topic, queue_id), [])
        return bisect.bisect_left(queue, timestamp, key=lambda r: r.store_timestamp)

    def offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """ConsumeQueue.getOffsetInQueueByTime, 4.9.8's binary search as it is (docs/broker-admin.md,
        222). 4.9.8 first picks the consume-queue file by its last-modified time; a lab queue is one."""
        queue = self._consume_queues.get((topic, queue_id))
        if not queue:
            return 0
        low, high = 0, len(queue) - 1
        left = right = -1
        left_value = right_value = -1
        while high >= low:
            mid = (low + high) // 2
            store_time = queue[mid].store_timestamp
            if store_time == timestamp:
                return mid
            if store_time > timestamp:
                high, right, right_value = mid - 1, mid, store_time
            else:
                low, left, left_value = mid + 1, mid, store_time
        if left_value == -1:
            return right
        if right_value == -1:
            return left
        return right if abs(timestamp - left_value) > abs(timestamp - right_value) else left

    def store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """getMessageStoreTimeStamp: store time (ms) of the message at a logical offset, -1 if none."""
        queue = self._consume_queues.get((topic, queue_id), ())
        return queue[offset].store_timestamp if 0 <= offset < len(queue) else -1

    def earliest_message_time(self) -> int:
        """Store time (ms) of the commit log's first record, -1 if it has none."""
        return self._commit_log[0].store_timestamp if self._commit_log else -1

    def lookup(self, physical_offset: int) -> MessageExt | None:
        """The message stored at a commit-log offset (CONSUMER_SEND_MSG_BACK names one)."""
        data = self.record_at(physical_offset)
        return decode_messages(data)[0] if data is not None else None

    def record_at(self, physical_offset: int) -> bytes | None:
        """selectOneMessageByOffset (VIEW_MESSAGE_BY_ID): the record stored at a commit-log offset,
        as it is stored; None if no record starts there."""
        i = bisect.bisect_left(self._physical_offsets, physical_offset)
        if i < len(self._commit_log) and self._physical_offsets[i] == physical_offset:
            return self._commit_log[i].data
        return None

    def consume_queue(self, topic: str, queue_id: int) -> list[RecordIndex] | None:
        """getConsumeQueue: the queue's records by logical offset, None if the queue has none (4.9.8
        makes a consume queue with its first message)."""
        return self._consume_queues.get((topic, queue_id))

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[RecordIndex]:
        """IndexService.queryOffset + DefaultMessageStore.queryMessage (docs/broker-admin.md, 12). No
        index file: the log is read from its end when asked, so a run that never queries pays nothing."""
        found: list[RecordIndex] = []
        if max_num <= 0:
            return found
        for record in reversed(self._commit_log):
            if record.topic != topic or not begin <= record.store_timestamp <= end:
                continue
            props = decode_messages(record.data)[0].properties
            keys = props.get("KEYS") or ""
            if props.get("UNIQ_KEY") == key or (key and key in keys.split(" ")):
                found.append(record)
                if len(found) >= max_num:
                    break
        found.reverse()
        return found

    def last_record(self) -> RecordIndex | None:
        return self._commit_log[-1] if self._commit_log else None

    def read_commit_log(self, physical_offset: int, max_bytes: int) -> bytes:
        """Whole records from `physical_offset` on, at least one if any, about max_bytes in all."""
        i = bisect.bisect_left(self._physical_offsets, physical_offset)
        parts, size = [], 0
        while i < len(self._commit_log) and (not parts or size + len(self._commit_log[i].data) <= max_bytes):
            parts.append(self._commit_log[i].data)
            size += len(parts[-1])
            i += 1
        return b"".join(parts)
