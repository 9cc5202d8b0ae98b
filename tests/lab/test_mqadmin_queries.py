"""mqadmin 4.9.8's message queries, store maintenance and ACL commands against a lab broker, over
real loopback TCP, each with the request mqadmin sends and the reply fields it reads
(tools/.../command/message, .../queue, .../broker, .../acl and MQAdminImpl / MQClientAPIImpl, 4.9.8):

- queryMsgById: the SEND reply's msgId decodes (MessageDecoder.decodeMessageId) to the broker's
  address and a commit-log offset; VIEW_MESSAGE_BY_ID (33) header `offset` -> the record;
- queryMsgByKey / queryMsgByUniqueKey / queryMsgTraceById: QUERY_MESSAGE (12) header topic, key,
  maxNum, beginTimestamp, endTimestamp and extField `_UNIQUE_KEY_QUERY` -> the records, header
  indexLastUpdateTimestamp / indexLastUpdatePhyoffset; none -> 22;
- queryCq: QUERY_CONSUME_QUEUE (321) -> QueryConsumeQueueResponseBody;
- cleanExpiredCQ (306), cleanUnusedTopic (316), deleteExpiredCommitLog (329) -> SUCCESS;
- updateAclConfig (50), deleteAclConfig (51), updateGlobalWhiteAddr (53): 4.9.8 with ACL off answers
  209 / 210 / 211 with the NullPointerException's message; clusterAclConfigVersion (52) is never
  answered.
"""

from __future__ import annotations

import json
import struct

import pytest
import trio

from lab.broker import admin_processor as ap
from lab.broker import query_message as qm
from lab.remoting.message import decode_messages
from nameserver.protocol import ResponseCode

TOPIC = "TopicTest"
LONG_MAX = 2**63 - 1


async def cluster(tcp):
    ns = await tcp.start_nameserver(port=0)
    return ns, await tcp.start_broker()


def props(**kv) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in kv.items())


def decode_message_id(msg_id: str) -> tuple[str, int]:
    """MessageDecoder.decodeMessageId: 4 bytes IPv4, 4 bytes port, 8 bytes commit-log offset."""
    raw = bytes.fromhex(msg_id)
    ip, port, offset = struct.unpack(">4siq", raw)
    return f"{'.'.join(str(b) for b in ip)}:{port}", offset


async def test_query_msg_by_id_finds_the_message_a_send_reply_s_msg_id_names(tcp):
    ns, broker = await cluster(tcp)
    await tcp.send(broker.address, b"first")
    sent = await tcp.send(broker.address, b"second", queue_id=1, properties=props(TAGS="tagB", KEYS="order-7"))
    assert sent.code == ResponseCode.SUCCESS
    addr, offset = decode_message_id(sent.field("msgId"))
    assert addr == broker.address and offset > 0

    reply = await tcp.call(addr, qm.VIEW_MESSAGE_BY_ID, {"offset": offset})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    (msg,) = decode_messages(reply.body)
    assert (msg.body, msg.topic, msg.queue_id, msg.commit_log_offset) == (b"second", TOPIC, 1, offset)
    assert msg.properties["KEYS"] == "order-7"

    missing = await tcp.call(addr, qm.VIEW_MESSAGE_BY_ID, {"offset": offset + 1})
    assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR,
                                              f"can not find message by the offset, {offset + 1}")


async def test_query_msg_by_key_gets_every_message_with_the_key_among_its_keys(tcp):
    ns, broker = await cluster(tcp)
    for i, keys in enumerate(["k1 shared", "k2", "shared k3", "sharedX"]):
        assert (await tcp.send(broker.address, f"m{i}".encode(), queue_id=i % 4,
                               properties=props(TAGS="t", KEYS=keys))).code == ResponseCode.SUCCESS
    fields = {"topic": TOPIC, "key": "shared", "maxNum": 64, "beginTimestamp": 0, "endTimestamp": LONG_MAX,
              qm.UNIQUE_MSG_QUERY_FLAG: "false"}
    reply = await tcp.call(broker.address, qm.QUERY_MESSAGE, fields)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert [m.body for m in decode_messages(reply.body)] == [b"m0", b"m2"]  # commit-log order
    store = broker.broker.store
    last = store.last_record()
    assert int(reply.field("indexLastUpdateTimestamp")) == last.store_timestamp
    assert int(reply.field("indexLastUpdatePhyoffset")) == last.commit_log_offset

    newest = await tcp.call(broker.address, qm.QUERY_MESSAGE, {**fields, "maxNum": 1})
    assert [m.body for m in decode_messages(newest.body)] == [b"m2"]  # the index is read from its end
    later = await tcp.call(broker.address, qm.QUERY_MESSAGE, {**fields, "beginTimestamp": last.store_timestamp + 1})
    assert (later.code, later.remark) == (ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct")
    assert later.field("indexLastUpdateTimestamp") == "0"
    other_topic = await tcp.call(broker.address, qm.QUERY_MESSAGE, {**fields, "topic": "Other"})
    assert other_topic.code == ResponseCode.QUERY_NOT_FOUND


async def test_query_msg_by_unique_key_uses_the_store_s_default_max_num(tcp):
    ns, broker = await cluster(tcp)
    uniq = "7F00000100002A9F0000000000000001"
    await tcp.send(broker.address, b"u", properties=props(TAGS="t", UNIQ_KEY=uniq))
    await tcp.send(broker.address, b"v", properties=props(TAGS="t", UNIQ_KEY=uniq[:-1] + "2"))
    reply = await tcp.call(broker.address, qm.QUERY_MESSAGE, {
        "topic": TOPIC, "key": uniq, "maxNum": 0, "beginTimestamp": 0, "endTimestamp": LONG_MAX,
        qm.UNIQUE_MSG_QUERY_FLAG: "true"})  # maxNum is the broker's (32) for a unique key
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert [(m.body, m.properties["UNIQ_KEY"]) for m in decode_messages(reply.body)] == [(b"u", uniq)]


async def test_query_msg_trace_by_id_finds_nothing_when_nothing_is_traced(tcp):
    ns, broker = await cluster(tcp)
    await tcp.send(broker.address, b"x", properties=props(TAGS="t", UNIQ_KEY="AB"))
    reply = await tcp.call(broker.address, qm.QUERY_MESSAGE, {
        "topic": "RMQ_SYS_TRACE_TOPIC", "key": "AB", "maxNum": 64, "beginTimestamp": 0,
        "endTimestamp": 1_900_000_000_000, qm.UNIQUE_MSG_QUERY_FLAG: "false"})
    assert (reply.code, reply.remark) == (ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct")


async def test_query_cq_lists_a_consume_queue_s_entries(tcp):
    ns, broker = await cluster(tcp)
    for i in range(3):
        await tcp.send(broker.address, f"m{i}".encode(), queue_id=2, properties=props(TAGS="TagA"))
    reply = await tcp.call(broker.address, ap.QUERY_CONSUME_QUEUE,
                           {"topic": TOPIC, "queueId": 2, "index": 1, "count": 10, "consumerGroup": "cg"})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    body = json.loads(reply.body)
    assert (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 3)
    assert body["filterData"] == "cg@TopicTest is not online!" and "subscriptionData" not in body
    queue = broker.broker.store.consume_queue(TOPIC, 2)
    tags_code = 2598919  # "TagA".hashCode()
    assert body["queueData"] == [{"eval": False, "physicOffset": r.commit_log_offset, "physicSize": len(r.data),
                                  "tagsCode": tags_code} for r in queue[1:]]
    none = await tcp.call(broker.address, ap.QUERY_CONSUME_QUEUE,
                          {"topic": TOPIC, "queueId": 3, "index": 0, "count": 10})
    assert (none.code, none.remark) == (ResponseCode.SYSTEM_ERROR, "3@TopicTest is not exist!")
    beyond = await tcp.call(broker.address, ap.QUERY_CONSUME_QUEUE,
                            {"topic": TOPIC, "queueId": 2, "index": 3, "count": 10})
    assert (beyond.code, beyond.remark, beyond.body) == (ResponseCode.SUCCESS, "Index 3 of 2@TopicTest is not exist!",
                                                         None)


@pytest.mark.parametrize("code", [ap.CLEAN_EXPIRED_CONSUMEQUEUE, ap.CLEAN_UNUSED_TOPIC, ap.DELETE_EXPIRED_COMMITLOG])
async def test_store_cleaning_answers_success_with_nothing_to_delete(tcp, code):
    ns, broker = await cluster(tcp)
    await tcp.send(broker.address, b"kept")
    reply = await tcp.call(broker.address, code)
    assert (reply.code, reply.remark, reply.body) == (ResponseCode.SUCCESS, None, None)
    assert broker.broker.store.message_count() == 1


async def test_acl_commands_get_4_9_8_s_answers_with_acl_disabled(tcp):
    ns, broker = await cluster(tcp)
    update = await tcp.call(broker.address, ap.UPDATE_AND_CREATE_ACL_CONFIG, {
        "accessKey": "RocketMQ", "secretKey": "12345678", "admin": "false", "defaultTopicPerm": "DENY"})
    assert (update.code, update.remark) == (209, 'Cannot invoke "org.apache.rocketmq.acl.AccessValidator.'
                                            'updateAccessConfig(org.apache.rocketmq.common.PlainAccessConfig)" '
                                            'because "accessValidator" is null')
    delete = await tcp.call(broker.address, ap.DELETE_ACL_CONFIG, {"accessKey": "RocketMQ"})
    assert delete.code == 210 and "deleteAccessConfig(String)" in delete.remark
    white = await tcp.call(broker.address, ap.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.10.*.*"})
    assert white.code == 211 and "updateGlobalWhiteAddrsConfig(java.util.List, String)" in white.remark
    with pytest.raises(Exception):  # never answered: the client's own timeout
        await tcp.call(broker.address, ap.GET_BROKER_CLUSTER_ACL_INFO, timeout=1.0)
    assert (await tcp.call(broker.address, ap.CLEAN_UNUSED_TOPIC)).code == ResponseCode.SUCCESS  # still serving


async def test_query_msg_by_id_with_a_consumer_has_it_consume_the_message_directly(tcp):
    """queryMsgById / queryMsgByUniqueKey -g <group> -d <clientId>: CONSUME_MESSAGE_DIRECTLY (309) with
    the message's offset msgId; the broker forwards the stored message to the consumer, whose
    ConsumeMessageDirectlyResult comes back."""
    from lab.clients.consumer import Consumer
    from lab.clients.instance import MQClientInstance

    ns, broker = await cluster(tcp)
    sent = await tcp.send(broker.address, b"direct", properties=props(TAGS="t", UNIQ_KEY="C0FFEE"))
    node = tcp.node("consumer-0")
    consumer = Consumer(node, MQClientInstance(node, [ns], tcp.nursery), [TOPIC])
    await consumer.start()
    group = consumer.consumer_group
    with trio.fail_after(10):
        while not broker.broker.consumer_manager.get_all_client_id(group):
            await trio.sleep(0.05)
    (client_id,) = broker.broker.consumer_manager.get_all_client_id(group)
    reply = await tcp.call(broker.address, ap.CONSUME_MESSAGE_DIRECTLY,
                           {"consumerGroup": group, "clientId": client_id, "msgId": sent.field("msgId")})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert json.loads(reply.body) == {"autoCommit": True, "consumeResult": "CR_SUCCESS", "order": False,
                                      "spentTimeMills": 0}
    other = await tcp.call(broker.address, ap.CONSUME_MESSAGE_DIRECTLY,
                           {"consumerGroup": "nobody", "clientId": client_id, "msgId": sent.field("msgId")})
    assert (other.code, other.remark) == (ResponseCode.SYSTEM_ERROR, f"The Consumer <nobody> <{client_id}> not online")
    await consumer.shutdown()
