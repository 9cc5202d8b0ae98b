"""The broker against real NameServers on the simulated network (virtual clock), and once over
real loopback sockets: what a NameServer, a producer and a consumer see of it."""

import json
import struct

import pytest
import trio

from lab.remoting.message import decode_messages, encode_batch, offset_msg_id
from lab.broker.pull import CONSUME_SLOWLY_LAG, FLAG_SUSPEND
from lab.broker.store import MessageStore
from lab.remoting.epoch import SIM_EPOCH_MS
from nameserver import bodies
from nameserver.client import RemotingError
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode, SerializeType, encode
from nameserver.protocol.codes import PERM_READ
from nameserver.routes import TopicConfig

TOPIC = "TopicTest"


def route(sim, ns_addr, topic=TOPIC):
    return sim.nameservers[ns_addr].routes.pickup_topic_route_data(topic)


def bodies_of(reply):
    return [m.body for m in decode_messages(reply.body or b"")]


def heartbeat(client_id, group="cg", *, as_ints=False):
    """HeartbeatData as Java (enum names) or the C++ client (ordinals) sends it."""
    consumer = {"groupName": group, "subscriptionDataSet": [{"topic": TOPIC, "subString": "*"}],
                **({"consumeType": 1, "messageModel": 1, "consumeFromWhere": 0} if as_ints else
                   {"consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET"})}
    return json.dumps({"clientID": client_id, "consumerDataSet": [consumer]}).encode()


class RawConnection:
    """A connection that sees the broker's frames as bytes: header JSON and body."""

    def __init__(self, stream):
        self.stream = stream
        self.buffer = b""

    async def send(self, command: RemotingCommand) -> None:
        await self.stream.send_all(encode(command))

    async def frame(self) -> tuple[dict, bytes]:
        while len(self.buffer) < 4 or len(self.buffer) < 4 + struct.unpack(">i", self.buffer[:4])[0]:
            data = await self.stream.receive_some(65536)
            assert data, "connection closed"
            self.buffer += data
        length, header_length = struct.unpack(">ii", self.buffer[:8])
        header = json.loads(self.buffer[8:8 + header_length])
        body, self.buffer = self.buffer[8 + header_length:4 + length], self.buffer[4 + length:]
        return header, body


async def raw(sim, address, name="raw-client"):
    return RawConnection(await sim.network.connect(name, address))


# --- NameServers -------------------------------------------------------------------------------------

async def test_registers_with_every_nameserver_at_start_then_after_10_s_and_every_30_s(sim, autojump_clock):
    nameservers = [await sim.start_nameserver("ns-0", 9876), await sim.start_nameserver("ns-1", 9877)]
    broker = await sim.start_broker()
    for ns in nameservers:
        assert route(sim, ns).broker_datas[0].broker_addrs == {0: broker.address}
    await trio.sleep(75)
    registrations = sim.kinds("broker.register")
    assert [round(e["t"]) for e in registrations] == [0, 0, 10, 10, 40, 40, 70, 70]
    assert {e["ns"] for e in registrations} == set(nameservers)
    assert all(e["ok"] and e["code"] == 0 and e["latency"] >= 0 for e in registrations)


async def test_a_compressed_registration_reaches_the_nameserver_just_the_same(sim, autojump_clock):
    sim.config.broker.compressedRegister = True
    ns = await sim.start_nameserver()
    broker = await sim.start_broker(topics={TOPIC: TopicConfig(TOPIC, 2, 2, 6)})
    queue, = route(sim, ns).queue_datas
    assert (queue.write_queue_nums, queue.perm) == (2, 6)
    assert route(sim, ns, "TBW102").broker_datas[0].broker_addrs == {0: broker.address}


async def test_a_nameserver_that_is_down_costs_only_its_own_registration(sim, autojump_clock):
    ns = await sim.start_nameserver()
    sim.nameservers["127.0.0.1:9999"] = None  # listed, but nothing listens there
    await sim.start_broker()
    failed, = sim.kinds("broker.register", ns="127.0.0.1:9999")
    assert not failed["ok"] and "refused" in failed["error"]
    assert sim.kinds("broker.register", ns=ns, ok=True)


async def test_graceful_shutdown_unregisters_from_each_nameserver(sim, autojump_clock):
    nameservers = [await sim.start_nameserver("ns-0", 9876), await sim.start_nameserver("ns-1", 9877)]
    broker = await sim.start_broker()
    await broker.broker.shutdown()
    assert [(e["ns"], e["ok"]) for e in sim.kinds("broker.unregister")] == [(ns, True) for ns in nameservers]
    assert all(route(sim, ns) is None for ns in nameservers)
    assert [e["graceful"] for e in sim.kinds("broker.stop")] == [True]


async def test_a_killed_broker_closes_its_connections_so_nameservers_and_clients_notice_at_once(sim, autojump_clock):
    nameservers = [await sim.start_nameserver("ns-0", 9876), await sim.start_nameserver("ns-1", 9877)]
    broker = await sim.start_broker()

    async def kill_soon():
        await trio.sleep(1)
        broker.kill()

    sim.nursery.start_soon(kill_soon)
    with pytest.raises(RemotingError):  # a long-polled pull fails with the connection, not a timeout
        await sim.pull(broker.address, sys_flag=FLAG_SUSPEND)
    assert trio.current_time() == pytest.approx(1, abs=0.01)
    await trio.sleep(0.01)
    assert all(route(sim, ns) is None for ns in nameservers)
    assert sim.kinds("broker.unregister") == []
    assert sim.kinds("broker.stop")[0]["graceful"] is False


# --- producing and consuming ---------------------------------------------------------------------------

async def test_sent_messages_come_back_from_a_pull_in_the_commit_log_format(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker()
    v2 = await sim.send(broker.address, b"m1")
    assert v2.code == ResponseCode.SUCCESS
    assert v2.ext_fields == {"msgId": offset_msg_id(broker.address, 0), "queueId": "0", "queueOffset": "0",
                             "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
    v1 = await sim.call(broker.address, RequestCode.SEND_MESSAGE, {
        "producerGroup": "pg", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 0, "sysFlag": 0, "bornTimestamp": 1000, "flag": 0, "properties": "KEYS\u0001k2\u0002",
        "batch": "0"}, b"m2")
    assert v1.ext_fields["queueOffset"] == "1"
    batch = await sim.call(broker.address, RequestCode.SEND_BATCH_MESSAGE,
                           {"a": "pg", "b": TOPIC, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1000, "h": 0, "m": "true"},
                           encode_batch([(0, b"b1", {"UNIQ_KEY": "u1"}), (0, b"b2", {"UNIQ_KEY": "u2"})]))
    assert batch.ext_fields["queueOffset"] == "2" and len(batch.ext_fields["msgId"].split(",")) == 2

    pulled = await sim.pull(broker.address)
    assert pulled.code == ResponseCode.SUCCESS
    assert pulled.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "4", "minOffset": "0", "maxOffset": "4"}
    messages = decode_messages(pulled.body)
    assert [m.body for m in messages] == [b"m1", b"m2", b"b1", b"b2"]
    assert [m.queue_offset for m in messages] == [0, 1, 2, 3]
    assert messages[0].properties == {"TAGS": "tagA", "CLUSTER": "DefaultCluster"}
    assert messages[1].properties["KEYS"] == "k2" and messages[2].properties == {"UNIQ_KEY": "u1"}
    assert offset_msg_id(messages[1].store_host, messages[1].commit_log_offset) == v1.ext_fields["msgId"]

    caught_up = await sim.pull(broker.address, offset=4)
    assert (caught_up.code, caught_up.ext_fields["nextBeginOffset"], caught_up.body) == (ResponseCode.PULL_NOT_FOUND, "4", None)
    too_far = await sim.pull(broker.address, offset=9)
    assert (too_far.code, too_far.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_OFFSET_MOVED, "0")


async def test_reply_header_values_are_json_strings_for_the_cpp_client(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker()
    conn = await raw(sim, broker.address)
    await conn.send(RemotingCommand.request(RequestCode.SEND_MESSAGE, {
        "producerGroup": "pg", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 1, "sysFlag": 0, "bornTimestamp": 1, "flag": 0}, b"x", opaque=7))
    header, _ = await conn.frame()
    assert (header["code"], header["flag"], header["opaque"]) == (0, 1, 7)
    assert all(isinstance(v, str) for v in header["extFields"].values())
    await conn.send(RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "cg", "topic": TOPIC, "queueId": 1, "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 0},
        opaque=8))
    header, body = await conn.frame()
    assert header["extFields"]["nextBeginOffset"] == "1" and decode_messages(body)[0].body == b"x"


async def test_a_long_polled_pull_is_answered_when_a_message_arrives(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker()

    async def send_later():
        await trio.sleep(3)
        await sim.send(broker.address, b"late")

    sim.nursery.start_soon(send_later)
    start = trio.current_time()
    reply = await sim.pull(broker.address, sys_flag=FLAG_SUSPEND)
    assert reply.code == ResponseCode.SUCCESS and bodies_of(reply) == [b"late"]
    assert trio.current_time() - start == pytest.approx(3, abs=0.01)

    start = trio.current_time()
    reply = await sim.pull(broker.address, offset=1, sys_flag=FLAG_SUSPEND, suspendTimeoutMillis=15000)
    assert reply.code == ResponseCode.PULL_NOT_FOUND
    assert trio.current_time() - start == pytest.approx(15, abs=0.01)


async def test_without_long_polling_a_held_pull_is_answered_after_the_short_polling_time(sim, autojump_clock):
    sim.config.broker.longPollingEnable = False
    await sim.start_nameserver()
    broker = await sim.start_broker()
    start = trio.current_time()
    reply = await sim.pull(broker.address, sys_flag=FLAG_SUSPEND)
    assert reply.code == ResponseCode.PULL_NOT_FOUND
    assert trio.current_time() - start == pytest.approx(1.0, abs=0.01)


async def test_wiping_write_permission_refuses_sends_and_reaches_the_nameservers(sim, autojump_clock):
    nameservers = [await sim.start_nameserver("ns-0", 9876), await sim.start_nameserver("ns-1", 9877)]
    broker = await sim.start_broker()
    await sim.send(broker.address, b"before")
    await broker.broker.set_permission(PERM_READ)
    refused = await sim.send(broker.address, b"after")
    assert refused.code == ResponseCode.NO_PERMISSION and "forbidden" in refused.remark
    assert all(route(sim, ns).queue_datas[0].perm == PERM_READ for ns in nameservers)
    assert bodies_of(await sim.pull(broker.address)) == [b"before"]


async def test_a_send_to_an_unknown_topic_creates_it_from_tbw102_and_registers_it(sim, autojump_clock):
    ns = await sim.start_nameserver()
    broker = await sim.start_broker()
    reply = await sim.send(broker.address, topic="NewTopic", d=2)
    assert reply.code == ResponseCode.SUCCESS
    await trio.sleep(0.1)
    queue, = route(sim, ns, "NewTopic").queue_datas
    assert (queue.write_queue_nums, queue.perm) == (2, 6)
    assert sim.kinds("broker.topic", topic="NewTopic", reason="auto_create")
    assert sim.kinds("broker.register", trigger="topics")


async def test_without_auto_create_an_unknown_topic_is_refused(sim, autojump_clock):
    sim.config.broker.autoCreateTopicEnable = False
    await sim.start_nameserver()
    broker = await sim.start_broker()
    reply = await sim.send(broker.address, topic="NewTopic")
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST and "NewTopic" in reply.remark


async def test_a_restarted_broker_on_the_same_store_keeps_every_acknowledged_message(sim, autojump_clock):
    await sim.start_nameserver()
    store, topics = MessageStore(), {TOPIC: TopicConfig(TOPIC, 4, 4, 6)}
    broker = await sim.start_broker(store=store, topics=topics)
    acked = [(await sim.send(broker.address, f"m{i}".encode(), queue_id=i % 2)).code for i in range(6)]
    assert acked == [ResponseCode.SUCCESS] * 6
    port = int(broker.address.rpartition(":")[2])
    broker.kill()
    await trio.sleep(1)
    restarted = await sim.start_broker(store=store, topics=topics, port=port)
    assert sim.kinds("broker.start")[-1]["messages"] == 6
    assert bodies_of(await sim.pull(restarted.address, queue_id=0)) == [b"m0", b"m2", b"m4"]
    assert bodies_of(await sim.pull(restarted.address, queue_id=1)) == [b"m1", b"m3", b"m5"]


async def test_a_consumer_sending_a_message_back_finds_it_in_its_retry_topic(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker()
    sent = await sim.send(broker.address, b"failed once")
    origin = decode_messages((await sim.pull(broker.address)).body)[0]
    reply = await sim.call(broker.address, RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": origin.commit_log_offset, "group": "cg", "delayLevel": 0, "originMsgId": "", "originTopic": TOPIC})
    assert reply.code == ResponseCode.SUCCESS
    retry, = decode_messages((await sim.pull(broker.address, topic="%RETRY%cg")).body)
    assert (retry.body, retry.reconsume_times, retry.properties["RETRY_TOPIC"]) == (b"failed once", 1, TOPIC)
    assert retry.properties["ORIGIN_MESSAGE_ID"] == sent.ext_fields["msgId"]


# --- offsets ------------------------------------------------------------------------------------------

async def test_offsets_a_new_group_starts_at_0_and_oneway_updates_get_no_reply(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker()
    for i in range(3):
        await sim.send(broker.address, f"m{i}".encode())
    query = {"consumerGroup": "cg", "topic": TOPIC, "queueId": 0}
    fresh = await sim.call(broker.address, RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert (fresh.code, fresh.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})

    conn = await raw(sim, broker.address)
    await conn.send(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**query, "commitOffset": 2},
                                            oneway=True, opaque=1))
    await conn.send(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, query, opaque=2))
    header, _ = await conn.frame()
    assert (header["opaque"], header["extFields"]) == (2, {"offset": "2"})  # nothing came for opaque 1
    await conn.send(RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**query, "commitOffset": 3}, opaque=3))
    header, _ = await conn.frame()
    assert (header["opaque"], header["code"]) == (3, 0)  # the C++ client's "oneway" arrives as flag 0

    pulled = await sim.pull(broker.address, offset=3, sys_flag=1, commitOffset=1)  # COMMIT_OFFSET flag
    assert pulled.code == ResponseCode.PULL_NOT_FOUND
    assert (await sim.call(broker.address, RequestCode.QUERY_CONSUMER_OFFSET, query)).ext_fields["offset"] == "1"

    queue = {"topic": TOPIC, "queueId": 0}
    answers = {code: (await sim.call(broker.address, code, {**queue, "timestamp": 0})).ext_fields
               for code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET,
                            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, RequestCode.GET_EARLIEST_MSG_STORETIME)}
    assert answers == {RequestCode.GET_MAX_OFFSET: {"offset": "3"}, RequestCode.GET_MIN_OFFSET: {"offset": "0"},
                       RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: {"offset": "0"},
                       RequestCode.GET_EARLIEST_MSG_STORETIME: {"timestamp": str(SIM_EPOCH_MS)}}  # t = 0, as epoch ms
    # 4.9.8's ConsumeQueue.getOffsetInQueueByTime: a time after every message gives the last one's offset
    late = await sim.call(broker.address, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": 2**62})
    assert late.ext_fields == {"offset": "2"}


async def test_unknown_codes_get_request_code_not_supported(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker()
    reply = await sim.call(broker.address, 999)
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "999" in reply.remark


# --- consumer groups ----------------------------------------------------------------------------------

async def test_heartbeats_make_a_consumer_group_whose_members_hear_of_every_change(sim, autojump_clock):
    ns = await sim.start_nameserver()
    broker = await sim.start_broker()
    heard = {"c1": [], "c2": []}
    c1 = sim.channel_table("consumer-1", on_request=heard["c1"].append)
    c2 = sim.channel_table("consumer-2", on_request=heard["c2"].append)

    async def consumers():
        reply = await sim.call(broker.address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
        return bodies.load(reply.body, SerializeType.JSON)["consumerIdList"] if reply.code == 0 else reply.remark

    beat = await c1.invoke(broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=heartbeat("10.0.0.2@b")), 3)
    assert (beat.code, beat.version) == (ResponseCode.SUCCESS, 409)
    await c2.invoke(broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=heartbeat("10.0.0.1@a", as_ints=True)), 3)
    await trio.sleep(0.1)
    assert await consumers() == ["10.0.0.1@a", "10.0.0.2@b"]
    assert [(n.code, n.ext_fields, n.is_oneway) for n in heard["c1"]] == \
        [(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "cg"}, True)] * 2
    retry, = route(sim, ns, "%RETRY%cg").queue_datas
    assert (retry.read_queue_nums, retry.perm) == (1, 6)

    c2.close(broker.address)  # its connection closes: it leaves at once
    await trio.sleep(0.1)
    assert await consumers() == ["10.0.0.2@b"] and len(heard["c1"]) == 3
    await trio.sleep(135)  # c1 stays connected but never heartbeats again
    assert await consumers() == "no consumer for this group, cg"
    assert [e["change"] for e in sim.kinds("broker.consumers")] == ["register", "register", "closed", "expired"]


async def test_lock_batch_mq_grants_every_queue_asked_for(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker()
    mq_set = [{"brokerName": "broker-a", "queueId": 0, "topic": TOPIC}]
    reply = await sim.call(broker.address, RequestCode.LOCK_BATCH_MQ,
                           body=json.dumps({"consumerGroup": "cg", "clientId": "c", "mqSet": mq_set}).encode())
    assert bodies.load(reply.body, SerializeType.JSON) == {"lockOKMQSet": mq_set}


# --- master and slave ---------------------------------------------------------------------------------

async def start_pair(sim):
    await sim.start_nameserver()
    master = await sim.start_broker("broker-a-0")
    slave_store = MessageStore()
    slave = await sim.start_broker("broker-a-1", broker_id=1, store=slave_store, topics={})
    return master, slave, slave_store


async def test_a_slave_replicates_its_master_and_serves_reads_after_the_master_is_gone(sim, autojump_clock):
    master, slave, slave_store = await start_pair(sim)
    await trio.sleep(1)  # the slave is up to date and held by its master
    for i in range(3):
        await sim.send(master.address, f"m{i}".encode())
    await trio.sleep(0.1)  # records reach the slave as they are written
    assert slave_store.max_physical_offset == master.broker.store.max_physical_offset
    assert route(sim, "127.0.0.1:9876").broker_datas[0].broker_addrs == {0: master.address, 1: slave.address}
    offset = {"consumerGroup": "cg", "topic": TOPIC, "queueId": 0}
    await sim.call(master.address, RequestCode.UPDATE_CONSUMER_OFFSET, {**offset, "commitOffset": 2})
    await trio.sleep(5)
    assert (await sim.call(slave.address, RequestCode.QUERY_CONSUMER_OFFSET, offset)).ext_fields == {"offset": "0"}
    await trio.sleep(10)  # consumer offsets follow every 10 s (SlaveSynchronize), with the next transfer
    assert (await sim.call(slave.address, RequestCode.QUERY_CONSUMER_OFFSET, offset)).ext_fields == {"offset": "2"}
    from_slave = await sim.pull(slave.address)
    assert bodies_of(from_slave) == [b"m0", b"m1", b"m2"] and from_slave.ext_fields["suggestWhichBrokerId"] == "0"
    assert sum(e["messages"] for e in sim.kinds("broker.replicate", ok=True)) == 3
    assert (await sim.send(slave.address, b"to the slave")).code == ResponseCode.SERVICE_NOT_AVAILABLE

    master.kill()
    await trio.sleep(30)
    assert bodies_of(await sim.pull(slave.address)) == [b"m0", b"m1", b"m2"]
    assert sim.kinds("broker.replicate", ok=False)


async def test_a_long_poll_on_a_slave_finds_replicated_messages_at_its_5_s_recheck(sim, autojump_clock):
    master, slave, _ = await start_pair(sim)
    await trio.sleep(1.5)

    async def send_soon():
        await trio.sleep(1)
        await sim.send(master.address, b"m")

    sim.nursery.start_soon(send_soon)
    start = trio.current_time()
    reply = await sim.pull(slave.address, sys_flag=FLAG_SUSPEND)  # a slave is not told of arrivals
    assert bodies_of(reply) == [b"m"] and trio.current_time() - start == pytest.approx(5, abs=0.01)


async def test_a_master_sends_a_lagging_consumer_to_its_slave(sim, autojump_clock):
    master, slave, _ = await start_pair(sim)
    backlog = CONSUME_SLOWLY_LAG + 40
    await sim.call(master.address, RequestCode.SEND_BATCH_MESSAGE,
                   {"a": "pg", "b": TOPIC, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0},
                   encode_batch([(0, b"x", {})] * backlog))
    lagging = await sim.pull(master.address, offset=0)
    assert lagging.ext_fields["suggestWhichBrokerId"] == "1"
    close = await sim.pull(master.address, offset=backlog - 32)
    assert close.ext_fields["suggestWhichBrokerId"] == "0"
    slave.kill()
    await trio.sleep(30)  # the master no longer hears from a slave
    assert (await sim.pull(master.address, offset=0)).ext_fields["suggestWhichBrokerId"] == "0"


# --- bad input ----------------------------------------------------------------------------------------

async def test_a_malformed_frame_closes_only_its_own_connection(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker()
    good, bad = await raw(sim, broker.address, "good"), await raw(sim, broker.address, "bad")
    await bad.stream.send_all(b"\x00\x00\x00\x02??")  # a frame length below 4
    assert await bad.stream.receive_some(100) == b""
    await good.send(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": 0}, opaque=5))
    header, _ = await good.frame()
    assert (header["opaque"], header["code"]) == (5, 0)


async def test_a_bad_heartbeat_body_is_a_system_error_not_a_crash(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker()
    reply = await sim.call(broker.address, RequestCode.HEART_BEAT, body=b"{not json")
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert (await sim.send(broker.address)).code == ResponseCode.SUCCESS


async def a_pull_whose_hold_check_raises(lab, port, monkeypatch) -> None:
    """A bug met while a pull is being held is that request's, as any processor's is: the broker
    and its other requests go on."""
    from lab.broker.held_replies import SuspendedPull

    has_new, planted = SuspendedPull.has_new, [True]

    def broken_once(self):
        if planted:
            planted.clear()
            raise ZeroDivisionError("planted")
        return has_new(self)

    await lab.start_nameserver(port=port)
    broker = await lab.start_broker()
    monkeypatch.setattr(SuspendedPull, "has_new", broken_once)
    reply = await lab.pull(broker.address, sys_flag=FLAG_SUSPEND)
    assert reply.code == ResponseCode.SYSTEM_ERROR and "planted" in reply.remark
    assert (await lab.send(broker.address)).code == ResponseCode.SUCCESS
    assert bodies_of(await lab.pull(broker.address, sys_flag=FLAG_SUSPEND)) == [b"hello"]


async def test_a_pull_whose_hold_check_raises_is_a_system_error_for_it_alone(sim, autojump_clock, monkeypatch):
    await a_pull_whose_hold_check_raises(sim, 9876, monkeypatch)


# --- real sockets -------------------------------------------------------------------------------------

async def test_send_and_pull_over_real_loopback_sockets(tcp):
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    assert route(tcp, ns).broker_datas[0].broker_addrs == {0: broker.address}
    sent = await tcp.send(broker.address, b"over tcp")
    assert sent.code == ResponseCode.SUCCESS
    assert bodies_of(await tcp.pull(broker.address)) == [b"over tcp"]


async def test_a_pull_whose_hold_check_raises_is_a_system_error_for_it_alone_over_real_sockets(tcp, monkeypatch):
    await a_pull_whose_hold_check_raises(tcp, 0, monkeypatch)
