"""ConsumerRunningInfo (4.9.8): what a consumer says of itself when a broker forwards mqadmin's
GET_CONSUMER_RUNNING_INFO (consumerStatus) to it. Pure: the consumer's state and `now_ms` in, the
body's bean out (fastjson's text: nameserver/protocol/fastjson.py).

Java's body: `properties` (the consumer's settings, and the PROP_* keys consumerStatus reads),
`subscriptionSet` (a TreeSet ordered by "topic@subString"), `mqTable` (a TreeMap of MessageQueue ->
ProcessQueueInfo, keys written as JSON objects) and `statusTable` (a TreeMap of topic -> ConsumeStatus).
A lab consumer hands each pulled message over at once, so it caches none, and it keeps no
timings: ProcessQueueInfo's cache figures and ConsumeStatus's rates are 0.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from lab.broker.java_maps import hash_map
from nameserver.protocol.fastjson import Bean, JMap, encode

__all__ = ["consumer_running_info", "encode"]

CLIENT_VERSION = "V4_9_8"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
CONSUME_THREADS = 20  # DefaultMQPushConsumer.consumeThreadMin: PROP_THREADPOOL_CORE_SIZE


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


def consumer_running_info(*, group: str, settings: Mapping[str, object], subscriptions: Mapping[str, int],
                          queues: Iterable[tuple[tuple[str, str, int], int]], namesrv_addrs: Iterable[str],
                          start_ms: int) -> Bean:
    """`subscriptions`: topic -> subVersion (the %RETRY% topic among them); `queues`: ((topic,
    brokerName, queueId), committed offset) of each queue the consumer holds now."""
    properties = {**{k: str(v) for k, v in settings.items()}, "consumerGroup": group,
                  "PROP_CONSUMEORDERLY": "false", "PROP_THREADPOOL_CORE_SIZE": str(CONSUME_THREADS),
                  "PROP_CONSUMER_START_TIMESTAMP": str(start_ms),
                  "PROP_NAMESERVER_ADDR": "".join(f"{addr};" for addr in namesrv_addrs),
                  "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CLIENT_VERSION": CLIENT_VERSION}
    subs = sorted(subscriptions.items(), key=lambda s: f"{s[0]}@*")  # SubscriptionData.compareTo
    mq_table = JMap((Bean(brokerName=broker, queueId=queue_id, topic=topic), process_queue_info(offset))
                    for (topic, broker, queue_id), offset in sorted(queues))  # MessageQueue.compareTo
    status = JMap((topic, Bean(consumeFailedMsgs=0, consumeFailedTPS=0.0, consumeOKTPS=0.0, consumeRT=0.0,
                               pullRT=0.0, pullTPS=0.0)) for topic, _ in subs)
    return Bean(mqTable=mq_table, properties=hash_map(properties.items()),
                statusTable=JMap(sorted(status)), subscriptionSet=[subscription_data(t, v) for t, v in subs])
