"""mqadmin 4.9.8's printMsg, printMsgByQueue, checkMsgSendRT and startMonitoring against a lab
cluster, over real loopback TCP, each with the requests the command sends and the reply fields it
reads (tools/.../command/message, .../consumer/StartMonitoringSubCommand, tools/.../monitor/
MonitorService and the client's DefaultMQPullConsumer / DefaultMQProducer, 4.9.8):

- printMsg -t T [-b/-e time]: the route (105); for each read queue GET_MIN_OFFSET (31) and
  GET_MAX_OFFSET (30), or SEARCH_OFFSET_BY_TIMESTAMP (29) for -b/-e; then PULL_MESSAGE (11) as
  TOOLS_CONSUMER, 32 at a time from the min to the max offset, sysFlag 4 (subscription, no suspend):
  SUCCESS with nextBeginOffset and the messages, PULL_NOT_FOUND (19) at the end, answered at once;
- printMsgByQueue -t T -a broker -i queue [-f true]: the same on one queue; -f counts the TAGS;
- checkMsgSendRT -t T -a N: a producer of a group named by the time; SEND_MESSAGE_V2 (310) to queue
  i % (write queues) for the i-th message, reading each SendResult's queue and offset;
- startMonitoring: a push consumer of __MONITOR_CONSUMER on OFFSET_MOVED_EVENT (its route, heartbeat
  and first pull), and every 20 s: the topic list (206), and for each %RETRY%<group> the group's
  route, GET_CONSUME_STATS (208), GET_CONSUMER_CONNECTION_LIST (203) and, per queue consumed from,
  GET_MAX_OFFSET then a pull of the last message for its store time; then 307 per client, as
  consumerStatus sends it (test_mqadmin_commands.py).
"""

from __future__ import annotations

import json
import time
from collections import Counter

import trio

from lab.broker import admin
from lab.remoting.message import decode_messages
from nameserver.protocol import RequestCode, ResponseCode

from test_broker_admin import heartbeat, mq_table

TOPIC = "TopicTest"  # the harness broker's topic: 4 read and write queues
TOOLS_CONSUMER = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP
MONITOR_CONSUMER = "__MONITOR_CONSUMER"  # MixAll.MONITOR_CONSUMER_GROUP
FLAG_SUBSCRIPTION = 0x4  # PullSysFlag.buildSysFlag(false, false, true, false): a pull that never waits
FLAG_SUSPEND = 0x2
BROKER_SUSPEND_MAX_TIME_MILLIS = 20000  # DefaultMQPullConsumer's brokerSuspendMaxTimeMillis
GET_MIN_OFFSET, GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP = 31, 30, 29


async def cluster(tcp):
    ns = await tcp.start_nameserver(port=0)
    return ns, await tcp.start_broker()


async def route(tcp, ns: str, topic: str) -> dict:
    reply = await tcp.call(ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return json.loads(reply.body)


def read_queues(topic_route: dict) -> list[tuple[str, int]]:
    """MQClientInstance.topicRouteData2TopicSubscribeInfo: each readable QueueData's read queues."""
    return [(qd["brokerName"], q) for qd in topic_route["queueDatas"] if qd["perm"] & 4
            for q in range(qd["readQueueNums"])]


def master_of(topic_route: dict, broker_name: str) -> str:
    bd, = [bd for bd in topic_route["brokerDatas"] if bd["brokerName"] == broker_name]
    return bd["brokerAddrs"]["0"]


async def offset(tcp, address: str, code: int, queue_id: int, topic: str = TOPIC, **fields) -> int:
    reply = await tcp.call(address, code, {"topic": topic, "queueId": queue_id, **fields})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return int(reply.ext_fields["offset"])


async def tools_pull(tcp, address: str, queue_id: int, queue_offset: int, *, max_nums: int = 32,
                     topic: str = TOPIC, group: str = TOOLS_CONSUMER, sub: str = "*"):
    """DefaultMQPullConsumer.pull(mq, sub, offset, maxNums): PullAPIWrapper.pullKernelImpl's header."""
    return await tcp.call(address, RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": queue_offset,
        "maxMsgNums": max_nums, "sysFlag": FLAG_SUBSCRIPTION, "commitOffset": 0,
        "suspendTimeoutMillis": BROKER_SUSPEND_MAX_TIME_MILLIS, "subscription": sub, "subVersion": 0,
        "expressionType": "TAG"})


async def print_queue(tcp, address: str, queue_id: int, begin: int, end: int) -> list:
    """printMsg's READQ loop on one queue: the messages it prints, and the pull codes it saw."""
    messages, codes, at = [], [], begin
    while at < end:
        reply = await tools_pull(tcp, address, queue_id, at)
        codes.append(reply.code)
        at = int(reply.ext_fields["nextBeginOffset"])
        if reply.code == ResponseCode.SUCCESS:
            messages.extend(decode_messages(reply.body))
        elif reply.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
            break
    return messages, codes


async def test_print_msg_reads_every_read_queue_from_its_min_to_its_max_offset(tcp):
    ns, broker = await cluster(tcp)
    for i in range(33):
        assert (await tcp.send(broker.address, f"m{i}".encode(), queue_id=0)).code == ResponseCode.SUCCESS
    await tcp.send(broker.address, b"on two", queue_id=2)
    topic_route = await route(tcp, ns, TOPIC)
    queues = read_queues(topic_route)
    assert queues == [("broker-a", q) for q in range(4)]
    address = master_of(topic_route, "broker-a")
    printed = {}
    for _broker, queue_id in queues:
        low = await offset(tcp, address, GET_MIN_OFFSET, queue_id)
        high = await offset(tcp, address, GET_MAX_OFFSET, queue_id)
        messages, codes = await print_queue(tcp, address, queue_id, low, high)
        printed[queue_id] = (low, high, [m.body for m in messages], codes)
    assert printed[0] == (0, 33, [f"m{i}".encode() for i in range(33)], [0, 0]), "32, then the last one"
    assert printed[1] == (0, 0, [], [])
    assert printed[2] == (0, 1, [b"on two"], [0])
    # what printMessage prints of each: its offset message ID's parts, store time and body
    first = decode_messages((await tools_pull(tcp, address, 0, 0, max_nums=1)).body)[0]
    assert (first.topic, first.queue_id, first.queue_offset) == (TOPIC, 0, 0)
    assert first.store_host == broker.address and first.store_timestamp > 0
    # at the max offset a pull without the suspend flag is answered at once: "print msg finished"
    with trio.fail_after(10):
        at_end = await tools_pull(tcp, address, 0, 33)
    assert (at_end.code, at_end.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_NOT_FOUND, "33")


async def test_print_msg_s_begin_and_end_times_pick_offsets_by_store_time(tcp):
    ns, broker = await cluster(tcp)
    for i in range(3):
        await tcp.send(broker.address, f"m{i}".encode(), queue_id=1)
        await trio.sleep(0.02)  # distinct store times, milliseconds apart
    store = broker.broker.store
    times = [store.store_time(TOPIC, 1, i) for i in range(3)]
    assert times == sorted(set(times))
    begin = await offset(tcp, broker.address, SEARCH_OFFSET_BY_TIMESTAMP, 1, timestamp=times[1])
    end = await offset(tcp, broker.address, SEARCH_OFFSET_BY_TIMESTAMP, 1, timestamp=times[2])
    messages, _codes = await print_queue(tcp, broker.address, 1, begin, end)
    # the end offset only ends the loop: its one pull of 32 prints the queue's rest, as from 4.9.8
    assert (begin, end, [m.body for m in messages]) == (1, 2, [b"m1", b"m2"])


async def test_print_msg_by_queue_counts_the_tags_of_one_queue(tcp):
    """printMsgByQueue -t T -a broker-a -i 3 -f true: calculateByTag over the messages pulled."""
    ns, broker = await cluster(tcp)
    for tag in ("TagA", "TagB", "TagA"):
        await tcp.send(broker.address, queue_id=3, properties=f"TAGS\x01{tag}\x02WAIT\x01true")
    await tcp.send(broker.address, queue_id=0, properties="TAGS\x01TagC")
    low = await offset(tcp, broker.address, GET_MIN_OFFSET, 3)
    high = await offset(tcp, broker.address, GET_MAX_OFFSET, 3)
    messages, codes = await print_queue(tcp, broker.address, 3, low, high)
    assert Counter(m.properties.get("TAGS") for m in messages) == {"TagA": 2, "TagB": 1}
    assert codes == [ResponseCode.SUCCESS]


async def test_check_msg_send_rt_sends_the_i_th_message_to_queue_i_mod_the_write_queues(tcp):
    """checkMsgSendRT -t T -a 8 -s 128: its selector picks mqs[i % mqs.size()] of the publish info
    (each writable QueueData's write queues); each SendResult names the queue and its offset."""
    ns, broker = await cluster(tcp)
    topic_route = await route(tcp, ns, TOPIC)
    mqs = [(qd["brokerName"], q) for qd in topic_route["queueDatas"] if qd["perm"] & 2
           for q in range(qd["writeQueueNums"])]
    assert len(mqs) == 4
    group = str(int(time.time() * 1000))  # setProducerGroup(Long.toString(System.currentTimeMillis()))
    results = []
    for i in range(8):
        broker_name, queue_id = mqs[i % len(mqs)]
        address = master_of(topic_route, broker_name)
        # Message(topic, body): WAIT=true, and the UNIQ_KEY the producer sets (HashMap order)
        reply = await tcp.send(address, b"a" * 128, queue_id=queue_id, a=group,
                               properties=f"UNIQ_KEY\x01AC11000100002A9F0000000000{i:06d}\x02WAIT\x01true\x02")
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        results.append((int(reply.ext_fields["queueId"]), int(reply.ext_fields["queueOffset"])))
        assert reply.ext_fields["msgId"]
    assert results == [(q, i // 4) for i, q in enumerate([0, 1, 2, 3] * 2)]


async def test_start_monitoring_s_consumer_and_each_round_s_requests(tcp):
    ns, broker = await cluster(tcp)
    # The push consumer: OFFSET_MOVED_EVENT, a system topic every broker registers, has a route.
    moved = await route(tcp, ns, "OFFSET_MOVED_EVENT")
    assert read_queues(moved) == [("broker-a", 0)]
    address = master_of(moved, "broker-a")
    beat = await tcp.call(address, RequestCode.HEART_BEAT, body=heartbeat(
        "10.0.0.9@MonitorService_1", consumer=MONITOR_CONSUMER, producer="CLIENT_INNER_PRODUCER",
        topic="OFFSET_MOVED_EVENT"))
    assert beat.code == ResponseCode.SUCCESS
    first = await tcp.call(address, RequestCode.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": MONITOR_CONSUMER, "topic": "OFFSET_MOVED_EVENT", "queueId": 0})
    assert (first.code, first.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
    with trio.move_on_after(0.5) as held:  # an empty queue: the push consumer's pull is held
        await tcp.pull(address, topic="OFFSET_MOVED_EVENT", consumerGroup=MONITOR_CONSUMER,
                       sys_flag=FLAG_SUSPEND | FLAG_SUBSCRIPTION, subscription="*")
    assert held.cancelled_caught

    # A consumer group to watch: it consumed 2 of 3 messages on queue 0.
    await tcp.call(address, RequestCode.HEART_BEAT, body=heartbeat("10.0.0.9@app", consumer="cg"))
    for i in range(3):
        await tcp.send(address, f"m{i}".encode(), queue_id=0)
    await tcp.call(address, RequestCode.UPDATE_CONSUMER_OFFSET,
                   {"consumerGroup": "cg", "topic": TOPIC, "queueId": 0, "commitOffset": 2})
    await trio.sleep(0.1)  # the retry topics' registrations

    # doMonitorWork: the topic list, then each %RETRY%<group>'s group.
    topics = json.loads((await tcp.call(ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)["topicList"]
    groups = sorted(t[len("%RETRY%"):] for t in topics if t.startswith("%RETRY%"))
    assert groups == sorted(["cg", MONITOR_CONSUMER])
    retry_route = await route(tcp, ns, "%RETRY%cg")  # examineConsumeStats asks each master of it
    stats = await tcp.call(master_of(retry_route, "broker-a"), admin.GET_CONSUME_STATS, {"consumerGroup": "cg"})
    assert stats.code == ResponseCode.SUCCESS
    table = mq_table(stats.body)
    wrapper = table[(TOPIC, 0)]
    assert (wrapper["brokerOffset"], wrapper["consumerOffset"]) == (3, 2)
    assert wrapper["lastTimestamp"] == broker.broker.store.store_time(TOPIC, 0, 1)
    connection = await tcp.call(address, admin.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg"})
    clients = [c["clientId"] for c in json.loads(connection.body)["connectionSet"]]
    assert clients == ["10.0.0.9@app"]
    # computeUndoneMsgs: for a queue with a lastTimestamp, the store time of its last message
    high = await offset(tcp, address, GET_MAX_OFFSET, 0)
    last = await tools_pull(tcp, address, 0, high - 1, max_nums=1)
    assert last.code == ResponseCode.SUCCESS
    message, = decode_messages(last.body)
    assert message.store_timestamp - wrapper["lastTimestamp"] >= 0
