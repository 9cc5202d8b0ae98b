"""A clustering push consumer (DefaultMQPushConsumerImpl, RebalancePushImpl, PullAPIWrapper,
RemoteBrokerOffsetStore — 4.9.8), consuming every message as it arrives.

The group splits each topic's queues (rebalance.allocate_averagely over the consumer ids one broker
reports) every rebalanceInterval and whenever a broker says the group changed. Each assigned queue
is pulled one long-polled request after another, each sent from the callback of the reply before
(PullCallback), from the broker id that reply suggested, from a slave when the master is gone.
Offsets live in memory and go to the broker oneway every persistConsumerOffsetInterval, and when a
queue moves to another member.

Events: `consumer.rebalance` when a topic's assignment changes, `consumer.consume` per message,
`consumer.offset_moved` when a broker says the offset is out of range.
"""

from __future__ import annotations

import logging
import re

import trio

from lab.config import CONSUME_FROM
from lab.remoting.flow import in_task
from lab.remoting.java_maps import hash_map
from lab.remoting.message import MessageFormatError, decode_messages, offset_msg_id
from lab.remoting.channels import Node
from nameserver.client import RemotingError
from nameserver.protocol import ResponseCode
from nameserver.protocol.fastjson import Bean, JMap
from nameserver.routes import MASTER_ID, TopicRouteData

from .api import PullResult
from .errors import ClientFailure, MQBrokerError, MQClientError
from .instance import MQClientInstance
from .rebalance import allocate_averagely
from .route_cache import MessageQueue, subscribe_queues

log = logging.getLogger("lab.clients")

# PullSysFlag
FLAG_COMMIT_OFFSET = 1
FLAG_SUSPEND = 2

CONSUMER_TIMEOUT_WHEN_SUSPEND = 30.0  # s: the pull RPC outlives the broker's 15 s hold
OFFSET_RPC_TIMEOUT = 5.0  # s: offset queries (RemoteBrokerOffsetStore)
MAX_OFFSET_TIMEOUT = 6.0  # s: MQAdminImpl
OFFSET_MOVED_DELAY = 10.0  # s: before an out-of-range queue takes the broker's offset
RESET_OFFSET_PAUSE = 10.0  # s: MQClientInstance.resetOffset sleeps this long between drop and move
# A ResetOffsetBody's entries: fastjson writes each MessageQueue key as a JSON object.
RESET_ENTRY = re.compile(r'\{"brokerName":"([^"]*)","queueId":(\d+),"topic":"([^"]*)"\}:(-?\d+)')
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
CLIENT_VERSION = "V4_9_8"
CONSUME_THREADS = 20  # DefaultMQPushConsumer.consumeThreadMin: PROP_THREADPOOL_CORE_SIZE
SENT = object()  # _pull's word for a pull that is out
PULL_SYS_FLAGS = (str(FLAG_SUSPEND), str(FLAG_SUSPEND | FLAG_COMMIT_OFFSET))  # by whether it commits
QUEUE_IDS = tuple(str(i) for i in range(1024))  # queue ids as header fields, made once


def queue_id_field(queue_id: int) -> str:
    return QUEUE_IDS[queue_id] if 0 <= queue_id < len(QUEUE_IDS) else str(queue_id)


def subscription_data(topic: str, sub_version: int) -> Bean:
    """FilterAPI.buildSubscriptionData(topic, "*")."""
    return Bean(classFilterMode=False, codeSet=[], expressionType="TAG", subString="*", subVersion=sub_version,
                tagsSet=[], topic=topic)


def process_queue_info(commit_offset: int) -> Bean:
    return Bean(cachedMsgCount=0, cachedMsgMaxOffset=0, cachedMsgMinOffset=0, cachedMsgSizeInMiB=0,
                commitOffset=commit_offset, consumeFailedMsgs=0, consumeFailedTPS=0.0, consumeOKTPS=0.0,
                consumeRT=0.0, droped=False, lastConsumeTimestamp=0, lastLockTimestamp=0,
                lastPullTimestamp=0, locked=False, pullRT=0.0, pullTPS=0.0, transactionMsgCount=0,
                transactionMsgMaxOffset=0, transactionMsgMinOffset=0, tryUnlockTimes=0)


class RemoteBrokerOffsetStore:
    """The consumer's offsets, in memory; the broker keeps the persisted copy."""

    def __init__(self):
        self.offset_table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        old = self.offset_table.get(mq, -1)
        if offset != old and (not increase_only or offset > old):
            self.offset_table[mq] = offset

    def read_offset(self, mq: MessageQueue) -> int:
        return self.offset_table.get(mq, -1)

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)


class ProcessQueue:
    """An assigned queue's pulling (RocketMQ's ProcessQueue and PullRequest): the next offset, the
    cancel scope of the queue's task while it has one, and whether the queue was taken away — a
    reply that lands after that is ignored."""

    __slots__ = ("next_offset", "scope", "dropped")  # one per assigned queue: 80,000 on a large cluster

    def __init__(self, next_offset: int):
        self.next_offset = next_offset
        self.scope: trio.CancelScope | None = None
        self.dropped = False

    def drop(self) -> None:
        self.dropped = True
        if self.scope is not None:
            self.scope.cancel()


class ProcessQueueTable(dict):
    """processQueueTable (MessageQueue -> ProcessQueue) that also knows each topic's queues, in the
    table's own order: a rebalance looks at one topic's queues, and scanning the whole table for
    each of 2,000 topics cost more than the rest of the rebalance (bench_cluster_scale.py).
    Changed only by setting, `pop` and `clear`, each of which tells `on_change` first."""

    def __init__(self, on_change):
        super().__init__()
        self._by_topic: dict[str, dict[MessageQueue, None]] = {}
        self.on_change = on_change

    def of_topic(self, topic: str):
        """The topic's queues, as a set-like view (no copy)."""
        return self._by_topic.get(topic, {}).keys()

    def __setitem__(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        self.on_change()
        super().__setitem__(mq, pq)
        self._by_topic.setdefault(mq.topic, {})[mq] = None

    def pop(self, mq: MessageQueue) -> ProcessQueue:
        self.on_change()
        pq = super().pop(mq)
        queues = self._by_topic[mq.topic]
        del queues[mq]
        if not queues:
            del self._by_topic[mq.topic]
        return pq

    def clear(self) -> None:
        self.on_change()
        super().clear()
        self._by_topic.clear()


class PendingPull:
    """A pull that is out: where its reply goes (`__call__`, PullCallback) and whether an empty
    answer would bring the same pull back (`would_pull_again`). An object with slots, not two
    partials: a large cluster's consumers keep 80,000 pulls out."""

    __slots__ = ("consumer", "mq", "pq", "addr", "commit_offset")

    def __init__(self, consumer: Consumer, mq: MessageQueue, pq: ProcessQueue, addr: str, commit_offset: int):
        self.consumer, self.mq, self.pq, self.addr, self.commit_offset = consumer, mq, pq, addr, commit_offset

    def __call__(self, result: PullResult | Exception) -> None:
        self.consumer._on_pulled(self.mq, self.pq, self.addr, result)

    def would_pull_again(self) -> bool:
        """Whether an empty answer (PULL_NOT_FOUND, which suggests the master, nextBeginOffset the
        offset asked for) would leave everything as it is — the offset table too — and send the
        same pull, with the same commit, to the same broker."""
        consumer, mq, pq = self.consumer, self.mq, self.pq
        offset = consumer.offset_store.read_offset(mq)
        if (pq.dropped or offset != self.commit_offset or offset < pq.next_offset
                or consumer.pull_from_which_node_table.get(mq, MASTER_ID) != MASTER_ID):
            return False
        found = consumer.instance.route_cache.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, False)
        return found is not None and found.broker_addr == self.addr


class Consumer:
    def __init__(self, node: Node, instance: MQClientInstance, topics: list[str]):
        self.node = node
        self.instance = instance
        self.config = node.config.consumer
        if self.config.consumeFromWhere not in CONSUME_FROM:
            raise MQClientError(f"consumeFromWhere {self.config.consumeFromWhere!r} is not supported "
                                f"(use {' or '.join(CONSUME_FROM)})")
        self.consumer_group = self.config.consumerGroup
        # A clustering consumer subscribes its group's retry topic too (copySubscription) and
        # rebalances and pulls it as any other: last, as the lab keeps its topics in order. The
        # retry topic exists once a broker has taken the group's first heartbeat (it creates the
        # topic then and registers it at once), so a new group's first route fetch of it fails, as
        # Java's does, and its queues are pulled from the next rebalance on. A lab consumer fails no
        # message, so it only finds there what other clients sent back (CONSUMER_SEND_MSG_BACK).
        self.retry_topic = RETRY_GROUP_TOPIC_PREFIX + self.consumer_group
        self.topics = [*(t for t in topics if t != self.retry_topic), self.retry_topic]
        sub_version = int(node.now() * 1000)
        self.start_ms = node.now_ms()  # consumerStartTimestamp
        self.sub_versions = {topic: sub_version for topic in self.topics}  # what it subscribes to
        self._sub_version_fields = {topic: str(version) for topic, version in self.sub_versions.items()}
        self._pull_batch_size = str(self.config.pullBatchSize)
        self._suspend_timeout_millis = str(round(self.config.brokerSuspendMaxTimeMillis * 1000))
        self.topic_subscribe_info_table: dict[str, list[MessageQueue]] = {}
        self.process_queue_table = ProcessQueueTable(self._queues_changed)
        self.pull_from_which_node_table: dict[MessageQueue, int] = {}
        self.offset_store = RemoteBrokerOffsetStore()
        self.consumed = 0
        self._kept: dict[str, tuple] = {}  # topic -> (mq_set, members) keeps_queues found kept
        self.rebalances = 0  # rounds begun: a round's random picks are drawn by it (consumer_list_broker)
        # From the start of shutdown: a reply that lands while it persists and leaves the group
        # (an offset query, a member list) gives it no queue, as RocketMQ's stopped consume service.
        self.stopping = False

    # --- life cycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        self.instance.consumers.append(self)
        await self.instance.start(self.topics)
        await self.instance.send_heartbeat_to_all_broker()
        self.instance.rebalance_immediately()

    async def shutdown(self) -> None:
        """Stop pulling, persist every offset, leave the group (its brokers tell the others)."""
        self.stopping = True
        self.instance.consumers.remove(self)
        for pq in self.process_queue_table.values():
            pq.drop()
        await self.persist_consumer_offset()
        self.process_queue_table.clear()
        await self.instance.unregister_client(None, self.consumer_group)
        self.instance.shutdown()

    def consumer_data(self) -> dict:
        """This consumer in a HEART_BEAT body."""
        return {
            "groupName": self.consumer_group, "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING", "consumeFromWhere": self.config.consumeFromWhere,
            "unitMode": False,
            "subscriptionDataSet": [subscription_data(topic, version) for topic, version in self.sub_versions.items()],
        }

    def running_info(self) -> Bean:
        """consumerRunningInfo: what the consumer says of itself when a broker forwards mqadmin's
        GET_CONSUMER_RUNNING_INFO (consumerStatus) to it, as a bean for fastjson's text; Java's
        sets and maps are sorted (TreeSet, TreeMap), and a JMap writes MessageQueue keys as JSON
        objects. A lab consumer hands each pulled message over at once, so it caches none, and it
        keeps no timings: ProcessQueueInfo's cache figures and ConsumeStatus's rates are 0."""
        properties = {"messageModel": "CLUSTERING", "consumeFromWhere": self.config.consumeFromWhere,
                      "pullBatchSize": str(self.config.pullBatchSize), "pullInterval": "0",
                      "consumeThreadMin": str(CONSUME_THREADS), "consumeThreadMax": str(CONSUME_THREADS),
                      "consumerGroup": self.consumer_group, "PROP_CONSUMEORDERLY": "false",
                      "PROP_THREADPOOL_CORE_SIZE": str(CONSUME_THREADS),
                      "PROP_CONSUMER_START_TIMESTAMP": str(self.start_ms),
                      "PROP_NAMESERVER_ADDR": "".join(f"{addr};" for addr in self.instance.source.addrs),
                      "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CLIENT_VERSION": CLIENT_VERSION}
        subs = sorted(self.sub_versions.items(), key=lambda s: f"{s[0]}@*")  # SubscriptionData.compareTo
        mq_table = JMap((Bean(brokerName=mq.broker_name, queueId=mq.queue_id, topic=mq.topic),
                         process_queue_info(self.offset_store.read_offset(mq)))
                        for mq in sorted(self.process_queue_table))  # MessageQueue.compareTo
        status = JMap((topic, Bean(consumeFailedMsgs=0, consumeFailedTPS=0.0, consumeOKTPS=0.0, consumeRT=0.0,
                                   pullRT=0.0, pullTPS=0.0)) for topic, _ in subs)
        return Bean(mqTable=mq_table, properties=hash_map(properties.items()),
                    statusTable=JMap(sorted(status)), subscriptionSet=[subscription_data(t, v) for t, v in subs])

    # --- routes -------------------------------------------------------------------------------------

    def needs_route(self, topic: str) -> bool:
        return topic in self.sub_versions and topic not in self.topic_subscribe_info_table

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.sub_versions:
            self._queues_changed()
            self.topic_subscribe_info_table[topic] = subscribe_queues(topic, route)

    def _queues_changed(self) -> None:
        """A topic's queues or their assignment change (told before the change): a kept allocation
        may not be kept any more."""
        self._kept.clear()

    # --- rebalance ------------------------------------------------------------------------------------

    async def do_rebalance(self) -> None:
        """doRebalance: every subscribed topic, one after another. The rebalance service runs it
        as a Flow (lab/remoting/flow.py): a round of 2,000 topics' member lists wakes no task."""
        self.rebalances += 1  # this round's random picks are drawn by it (consumer_list_broker)
        await self._rebalance_topics(self.topics)

    async def _rebalance_topics(self, topics: list[str]) -> None:
        for topic in topics:
            if self.stopping:
                return
            await self.rebalance_by_topic(topic)

    async def rebalance_by_topic(self, topic: str) -> None:
        """rebalanceByTopic (clustering): the topic's queues shared out among the group's members
        as one broker of the topic sees them; without the queues or the members, the assignment
        stays as it is. Then updateProcessQueueTableInRebalance, unless the allocation is the
        queues it pulls already (keeps_queues)."""
        mq_set = self.topic_subscribe_info_table.get(topic)
        cid_all = await self.instance.find_consumer_id_list(topic, self.consumer_group, self._round_key())
        if self.stopping or not mq_set or not cid_all or self.keeps_queues(topic, mq_set, cid_all):
            return
        allocated = allocate_averagely(self.instance.client_id, mq_set, cid_all)
        if await self.update_process_queue_table(topic, allocated) and not self.stopping:
            self.node.emit("consumer.rebalance", topic=topic, queues=[str(mq) for mq in allocated],
                           consumers=len(cid_all))

    def consumer_list_broker(self, topic: str) -> str | None:
        """The broker this round asks for the topic's members (MQClientInstance.consumer_list_broker)."""
        return self.instance.consumer_list_broker(topic, self._round_key())

    def _round_key(self) -> str:
        return f"{self.consumer_group}:{self.rebalances}"

    def keeps_queues(self, topic: str, mq_set: list[MessageQueue], cid_all: tuple[str, ...]) -> bool:
        """Whether the topic's allocation over these members is the queues this consumer pulls.
        Remembered per topic for the very lists it was found with (a consumer of 2,000 topics asks
        for each every 20 s), until the queues or their assignment change."""
        kept = self._kept.get(topic)
        if kept is not None and kept[0] is mq_set and kept[1] is cid_all:
            return True
        if set(allocate_averagely(self.instance.client_id, mq_set, cid_all)) != self.process_queue_table.of_topic(topic):
            return False
        self._kept[topic] = (mq_set, cid_all)
        return True

    async def update_process_queue_table(self, topic: str, allocated: list[MessageQueue]) -> bool:
        """updateProcessQueueTableInRebalance: queues taken away are dropped and their offsets
        persisted (removeUnnecessaryMessageQueue); each new one gets its offset (one query after
        another, as RocketMQ's) and its first pull. Whether the table changed. A step of a Flow
        or of a task (lab/remoting/flow.py): a large cluster's 80,000 first offsets wake no task."""
        changed = False
        keep = set(allocated)
        for mq in [mq for mq in self.process_queue_table.of_topic(topic) if mq not in keep]:
            self.process_queue_table.pop(mq).drop()
            await in_task(self.instance.nursery, self.persist, mq)  # so the next owner starts where this one stopped
            self.offset_store.remove_offset(mq)
            changed = True
        for mq in allocated:
            if self.stopping:
                break  # as RocketMQ's stopped consumer: no more queries, no queue
            if mq not in self.process_queue_table:
                self.offset_store.remove_offset(mq)  # removeDirtyOffset
                changed |= self._add_queue(mq, await self.compute_pull_from_where(mq))
        return changed

    def _add_queue(self, mq: MessageQueue, next_offset: int) -> bool:
        """Into processQueueTable with its first pull out; not without an offset (the next
        rebalance tries again)."""
        if next_offset < 0 or self.stopping:
            return False
        pq = self.process_queue_table[mq] = ProcessQueue(next_offset)
        self._pull_task(mq, pq, self._pull(mq, pq))
        return True

    # --- offsets --------------------------------------------------------------------------------------

    async def _offset_broker(self, mq: MessageQueue) -> str:
        """Offsets belong to the master; with it gone (after a route refresh) any broker of the name."""
        found = self.instance.route_cache.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None:  # not in the cache: refresh the route first
            found = await in_task(self.instance.nursery, self.instance.find_broker_address_in_subscribe,
                                  mq, MASTER_ID, True)
        if found is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        return found.broker_addr

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """computePullFromWhere: the broker's stored offset; with none (the broker says so),
        consumeFromWhere decides: the queue's max offset or 0. -1 when the brokers cannot be asked."""
        api = self.instance.api
        try:
            return await api.query_consumer_offset(await self._offset_broker(mq), self.consumer_group, mq,
                                                   OFFSET_RPC_TIMEOUT)
        except MQBrokerError:
            pass  # no offset stored for this group and queue
        except (RemotingError, MQClientError) as e:
            log.info("%s: offset of %s unknown: %s", self.instance.client_id, mq, e)
            return -1
        if self.config.consumeFromWhere == "CONSUME_FROM_FIRST_OFFSET" or mq.topic == self.retry_topic:
            return 0  # (RebalancePushImpl: a retry queue without an offset starts at 0)
        addr = self.instance.route_cache.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            return -1
        try:
            return await api.get_max_offset(addr, mq, MAX_OFFSET_TIMEOUT)
        except ClientFailure as e:
            log.info("%s: max offset of %s unknown: %s", self.instance.client_id, mq, e)
            return -1

    async def persist(self, mq: MessageQueue) -> str | None:
        """The queue's offset, oneway, to its broker: the address it went to, None if it did not go."""
        offset = self.offset_store.offset_table.get(mq)
        if offset is None:
            return None
        try:
            addr = await self._offset_broker(mq)
            await self.instance.api.update_consumer_offset_oneway(addr, self.consumer_group, mq, offset)
        except (RemotingError, MQClientError) as e:
            log.info("%s: persisting the offset of %s failed: %s", self.instance.client_id, mq, e)
            return None
        return addr

    async def persist_consumer_offset(self) -> None:
        """persistAll: the offsets of assigned queues go to the broker; the others are forgotten."""
        for mq in list(self.offset_store.offset_table):
            if mq in self.process_queue_table:
                await self.persist(mq)
            else:
                self.offset_store.remove_offset(mq)

    # --- pulling --------------------------------------------------------------------------------------

    def _pull_task(self, mq: MessageQueue, pq: ProcessQueue, trouble: object) -> None:
        """A task for what the pull chain cannot do in a callback (see _pull_loop): none when the
        pull went out (`trouble` is SENT, _pull's word) or the queue was taken away."""
        if trouble is not SENT and not pq.dropped:
            self.instance.nursery.start_soon(self._pull_loop, mq, pq, trouble)

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, trouble: object = None) -> None:
        """The queue's pulls are sent from the callback of the one before (PullCallback, then
        executePullRequestImmediately), so a message wakes no task. A task runs only for what must
        wait — the pause after `trouble` (a failed pull), a route refresh or a connect before a
        pull, an offset out of range — and ends once a pull is out: the queue then has no task,
        as RocketMQ's has no thread, until a reply's callback starts one again. (A task per
        queue, parked, was most of a large cluster's memory: 80,000 queues.)"""
        delay = self.config.pullTimeDelayMillsWhenException
        pq.scope = trio.CancelScope()  # one per task: a scope is entered once
        with pq.scope:
            try:
                while not pq.dropped:
                    if isinstance(trouble, PullResult):  # PULL_OFFSET_MOVED
                        await self._offset_moved(mq, pq, trouble.next_begin_offset)
                        pq.dropped = True
                        return
                    if trouble is not None:
                        log.log(logging.WARNING if isinstance(trouble, MessageFormatError) else logging.INFO,
                                "%s: pull %s failed: %s", self.instance.client_id, mq, trouble)
                        await self.node.sleep(delay)
                    found = await self.instance.find_broker_address_in_subscribe(
                        mq, self.pull_from_which_node_table.get(mq, MASTER_ID), False)
                    try:
                        if found is None:
                            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
                        await self.instance.api.connect(found.broker_addr)
                        trouble = self._pull(mq, pq)
                    except (RemotingError, MQClientError) as e:
                        trouble = e
                    if trouble is SENT:
                        return
            except BaseException:
                pq.dropped = True  # cancelled (taken away, the consumer stopping) or crashed
                raise
            finally:
                pq.scope = None

    def _pull(self, mq: MessageQueue, pq: ProcessQueue) -> object:
        """pullKernelImpl, asynchronous, from the broker the last reply suggested: SENT, or why
        not — None when the broker is unknown or not connected (a task looks it up and connects),
        or the RemotingError the send failed with."""
        found = self.instance.route_cache.find_broker_address_in_subscribe(
            mq.broker_name, self.pull_from_which_node_table.get(mq, MASTER_ID), False)
        if found is None or not self.instance.channels.is_connected(found.broker_addr):
            return None
        commit_offset = self.offset_store.read_offset(mq)
        # A slave does not store consumer offsets: the commit rides along to masters only.
        sys_flag = PULL_SYS_FLAGS[commit_offset > 0 and not found.slave]
        pending = PendingPull(self, mq, pq, found.broker_addr, commit_offset)
        try:
            # Strings where a value is the same pull after pull: each held pull keeps its fields.
            self.instance.api.pull_message_async(found.broker_addr, {
                "consumerGroup": self.consumer_group, "topic": mq.topic, "queueId": queue_id_field(mq.queue_id),
                "queueOffset": pq.next_offset, "maxMsgNums": self._pull_batch_size,
                "sysFlag": sys_flag, "commitOffset": commit_offset,
                "suspendTimeoutMillis": self._suspend_timeout_millis,
                "subVersion": self._sub_version_fields[mq.topic], "expressionType": "TAG", "bname": mq.broker_name,
            }, CONSUMER_TIMEOUT_WHEN_SUSPEND, pending, pending.would_pull_again)
        except RemotingError as e:
            return e
        return SENT

    def _on_pulled(self, mq: MessageQueue, pq: ProcessQueue, addr: str, result: PullResult | Exception) -> None:
        """PullCallback: consume what came, move the offset on, pull again."""
        if pq.dropped:
            return  # the queue went to another member while the pull was out
        if isinstance(result, Exception):
            self._pull_task(mq, pq, result)
            return
        self.pull_from_which_node_table[mq] = result.suggest_which_broker_id
        if result.code == ResponseCode.SUCCESS:
            try:
                self._consume(mq, addr, result)
            except MessageFormatError as e:
                self._pull_task(mq, pq, e)  # the same offset again, after the pause
                return
        elif result.code == ResponseCode.PULL_OFFSET_MOVED:
            self._pull_task(mq, pq, result)
            return
        # Everything below nextBeginOffset is consumed (or filtered out): that is the offset.
        pq.next_offset = result.next_begin_offset
        self.offset_store.update_offset(mq, pq.next_offset, increase_only=True)
        self._pull_task(mq, pq, self._pull(mq, pq))  # executePullRequestImmediately

    def _consume(self, mq: MessageQueue, addr: str, result: PullResult) -> None:
        """Hand every message on: here, to the event log."""
        for msg in decode_messages(result.body or b""):
            msg_id = msg.properties.get("UNIQ_KEY") or offset_msg_id(msg.store_host, msg.commit_log_offset)
            self.node.emit("consumer.consume", msg_id=msg_id, topic=mq.topic, broker=mq.broker_name,
                           queue=mq.queue_id, offset=msg.queue_offset, broker_addr=addr)
            self.consumed += 1

    async def reset_offset(self, topic: str, body: bytes | None) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET from a broker (mqadmin resetOffsetByTime,
        skipAccumulatedMessage), as 4.9.8's MQClientInstance.resetOffset: the topic's queues in the
        table are dropped (their pulls' answers ignored), RESET_OFFSET_PAUSE later each takes its
        new offset, which is committed to its broker, and leaves the process queue table
        (removeUnnecessaryMessageQueue); then the consumer rebalances (resume), and the queues
        come back at the offsets their brokers now hold. Unlike 4.9.8, the consumer's other topics
        keep being pulled meanwhile (4.9.8 suspends the whole consumer)."""
        table = {MessageQueue(t, b, int(q)): int(o) for b, q, t, o in RESET_ENTRY.findall((body or b"").decode())}
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic == topic and mq in table:
                pq.drop()
        await self.node.sleep(RESET_OFFSET_PAUSE)
        for mq in list(self.process_queue_table.of_topic(topic)):
            if mq in table:
                self.offset_store.update_offset(mq, table[mq], increase_only=False)
                await self.persist(mq)
                self.offset_store.remove_offset(mq)
                if mq in self.process_queue_table:
                    self.process_queue_table.pop(mq).drop()
        self.instance.rebalance_immediately()

    async def _offset_moved(self, mq: MessageQueue, pq: ProcessQueue, next_begin_offset: int) -> None:
        """OFFSET_ILLEGAL: after a pause, take the broker's offset, persist it and drop the queue;
        the next rebalance picks it up again from there."""
        self.node.emit("consumer.offset_moved", topic=mq.topic, broker=mq.broker_name, queue=mq.queue_id,
                       offset=pq.next_offset, next_offset=next_begin_offset)
        await self.node.sleep(OFFSET_MOVED_DELAY)
        self.offset_store.update_offset(mq, next_begin_offset, increase_only=False)
        await self.persist(mq)
        if self.process_queue_table.get(mq) is pq:
            self.process_queue_table.pop(mq)
