"""Master-slave replication (RocketMQ's HAService / HAClient, plus what SlaveSynchronize copies).

RocketMQ's slave opens a raw TCP connection to the master's HA port, reports the max commit-log
offset it holds, and the master streams the commit log from there. The lab carries the same exchange
as one remoting request on the broker's own port, so the chaos network treats it like every other
link: nslab's request code HA_TRANSFER, msgpack bodies both ways.

    request   {"offset": slave's max physical offset,
               "offsetsVersion": the master's consumer-offset version the slave last took,
               "syncOffsets": whether the slave wants consumer offsets now (every 10 s at most),
               "dataVersion": the master's topic-table version the slave last took}
    reply     code 0, {"commitLog": whole records from that offset (up to 32 KiB),
                       "masterMaxOffset": int,
                       "consumerOffsets": {"version": int, "table": [[group, topic, queueId, offset], ...]}
                                           only when asked for and the slave's version is old: the
                                           offsets set since that version (all if it has none),
                       "topicConfig": {"dataVersion": [...], "topicConfigTable": {...}} only when it is old}

A slave that is up to date is held by the master until data arrives or haSendHeartbeatInterval has
passed, so records reach the slave as they are written and an idle slave still reports every
interval. Consumer offsets ride along with a reply at most every 10 s, the period of RocketMQ's
SlaveSynchronize, rather than ending the hold: a slave's offsets lag its master's by up to that, as
in RocketMQ. A slave whose offset is beyond the master's log gets code 1: the logs diverged.
"""

from __future__ import annotations

import math
import sys
from typing import Callable, Hashable

import msgpack
import trio

from nameserver.bodies import topic_config_from_wire, topic_config_to_wire
from nameserver.client import RemotingError
from nameserver.protocol import RemotingCommand, ResponseCode
from nameserver.routes import DataVersion

from lab.remoting import flow
from lab.remoting.flow import in_task
from lab.remoting.message import MessageFormatError
from lab.remoting.channels import ChannelTable, Node, request
from .store import MessageStore
from .topic_config import TopicConfigManager

HA_TRANSFER = 0x4D48  # nslab's own request code ('MH'), far from RocketMQ's
HA_TRANSFER_BATCH_SIZE = 32 * 1024  # haTransferBatchSize
HA_HOUSEKEEPING_INTERVAL = 20.0  # seconds: a slave silent this long is gone (haHousekeepingInterval)
OFFSETS_SYNC_INTERVAL = 10.0  # seconds between a slave's consumer-offset syncs (SlaveSynchronize.syncAll)
COMMIT_LOG = "commit-log"  # the hold key a master's HA transfers wait on

# (hold key, ready, timeout, reply): the broker answers with reply() once ready() or at the timeout
ReplyWhen = Callable[[Hashable, Callable[[], bool], float, Callable[[], RemotingCommand]], None]


class HAService:
    """The master side: answers HA_TRANSFER and knows whether a slave is replicating."""

    def __init__(self, store: MessageStore, topics: TopicConfigManager, heartbeat_interval: float):
        self.store = store
        self.topics = topics
        self.heartbeat_interval = heartbeat_interval
        self._last_report = -math.inf

    def slave_available(self, now: float) -> bool:
        return now - self._last_report <= HA_HOUSEKEEPING_INTERVAL

    def transfer(self, req: RemotingCommand, reply_when: ReplyWhen) -> RemotingCommand | None:
        """The reply at once when the logs diverged; else None, and `reply_when(key, ready,
        timeout, reply)` holds the request until `ready()` or the timeout, then sends `reply()`."""
        self._last_report = trio.current_time()
        state = msgpack.unpackb(req.body or b"\x80", raw=False)
        offset = int(state.get("offset", 0))
        if offset > self.store.max_physical_offset:
            return req.response(ResponseCode.SYSTEM_ERROR, f"slave offset {offset} is beyond the master's "
                                f"commit log ({self.store.max_physical_offset}): the logs diverged")

        def topics_stale() -> bool:
            return state.get("dataVersion") != list(self.topics.data_version)

        def reply() -> RemotingCommand:
            body = {"commitLog": self.store.read_commit_log(offset, HA_TRANSFER_BATCH_SIZE),
                    "masterMaxOffset": self.store.max_physical_offset}
            if state.get("syncOffsets", True) and state.get("offsetsVersion") != self.store.consumer_offsets_version:
                body["consumerOffsets"] = {"version": self.store.consumer_offsets_version,
                                           "table": self.store.offsets_since(state.get("offsetsVersion"))}
            if topics_stale():
                body["topicConfig"] = {
                    "dataVersion": list(self.topics.data_version),
                    "topicConfigTable": {n: topic_config_to_wire(tc) for n, tc in self.topics.topic_config_table.items()}}
            return req.response(ResponseCode.SUCCESS, body=msgpack.packb(body))

        # Only new records wake a held slave; offsets and topics ride along with the next reply
        # — a topic table the slave lacks is sent at once. Consumer offsets change with nearly every
        # pull, so answering for them alone would double the round trips per message.
        reply_when(COMMIT_LOG, lambda: self.store.max_physical_offset > offset or topics_stale(),
                   self.heartbeat_interval, reply)
        return None


class HAClient:
    """The slave side: pulls the master's commit log, offsets and topics into its own store."""

    def __init__(self, node: Node, channels: ChannelTable, store: MessageStore, topics: TopicConfigManager,
                 heartbeat_interval: float, master_addr: str | None = None):
        self.node = node
        self.channels = channels
        self.store = store
        self.topics = topics
        self.heartbeat_interval = heartbeat_interval
        self.master_addr = master_addr  # kept up to date by the broker's registrations
        # What the slave last took from its master; None until then. Its own DataVersion cannot
        # stand in for the master's: on a virtual clock two fresh brokers have equal versions.
        self._offsets_version: int | None = None
        self._topics_version: list[int] | None = None
        self._next_offsets_sync = -math.inf  # when the slave next asks for consumer offsets
        self._trouble: str | None = None  # the last failure reported, until a transfer succeeds

    async def run(self) -> None:
        """HAClient.run, as a Flow (lab/remoting/flow.py): each transfer's reply resumes it, so a
        replicated message wakes no task."""
        await flow.run(self._replicate())

    async def _replicate(self) -> None:
        """Transfers one after another to the master the registrations name (reportSlaveMaxOffset:
        the offset it has, answered with the commit log past it); after a failure, report it (once
        per change of trouble) and wait haSendHeartbeatInterval before trying again."""
        while True:
            master = self.master_addr
            try:
                if master is None:
                    raise RemotingError("master address unknown")
                while self.master_addr == master:
                    self._apply(master, await self.channels.call(master, self._transfer_request(),
                                                                 self.heartbeat_interval + HA_HOUSEKEEPING_INTERVAL))
                    self._trouble = None
            except (RemotingError, MessageFormatError, ValueError) as e:
                if str(e) != self._trouble:  # one event per change of trouble, not one per retry
                    self._trouble = str(e)
                    self.node.emit("broker.replicate", master=master, ok=False, error=self._trouble)
                await in_task(self.channels.nursery, self.node.sleep, self.heartbeat_interval)

    def _transfer_request(self) -> RemotingCommand:
        state = {"offset": self.store.max_physical_offset, "offsetsVersion": self._offsets_version,
                 "syncOffsets": trio.current_time() >= self._next_offsets_sync, "dataVersion": self._topics_version}
        return request(HA_TRANSFER, body=msgpack.packb(state))

    def _apply(self, master: str, reply: RemotingCommand) -> None:
        if reply.code != ResponseCode.SUCCESS:
            raise RemotingError(f"HA transfer refused ({reply.code}): {reply.remark}")
        data = msgpack.unpackb(reply.body or b"\x80", raw=False)
        count = self.store.put_replica(data.get("commitLog", b""))
        offsets = data.get("consumerOffsets")
        if offsets is not None:
            for group, topic, queue_id, offset in offsets["table"]:
                # one copy of each name, as the master keeps its own: not two new strings per queue
                self.store.commit_offset(sys.intern(group), sys.intern(topic), queue_id, offset)
            self._offsets_version = offsets["version"]
            self._next_offsets_sync = trio.current_time() + OFFSETS_SYNC_INTERVAL
        topics = data.get("topicConfig")
        if topics is not None:
            table = {n: topic_config_from_wire(n, tc) for n, tc in topics["topicConfigTable"].items()}
            self.topics.replace_all(table, DataVersion(*topics["dataVersion"]))
            self._topics_version = topics["dataVersion"]
        if count:
            self.node.emit("broker.replicate", master=master, ok=True, messages=count,
                           bytes=len(data["commitLog"]), offset=self.store.max_physical_offset,
                           master_offset=data.get("masterMaxOffset"))
