"""A request the broker forwards to a consumer's own connection (mqadmin's consumerStatus, 307, and
consumeMessageDirectly, 309: AdminBrokerProcessor.callConsumer, 4.9.8) over real loopback TCP, when
the consumer does not answer: mqadmin gets CONSUME_MSG_TIMEOUT once the broker's wait is over, the
broker answers everyone else meanwhile, and an answer that comes too late is dropped, never taken
for the next call's."""

from __future__ import annotations

import json

import trio

from lab.broker import admin, admin_processor
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode

from raw_client import Raw

GROUP, CLIENT_ID = "cg", "10.0.0.9@silent"
WAIT = 2.0  # the broker's wait for the consumer (10 s in 4.9.8 and the lab), shorter for the test


def heartbeat_body() -> bytes:
    return json.dumps({"clientID": CLIENT_ID, "producerDataSet": [], "consumerDataSet": [{
        "groupName": GROUP, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False, "subscriptionDataSet": [
            {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
             "subVersion": 1, "tagsSet": [], "topic": "TopicTest"}]}]}).encode()


async def silent_consumer(broker_address: str) -> Raw:
    """A consumer that has joined GROUP at the broker (a Java client's heartbeat) and answers
    nothing it is asked."""
    consumer = await Raw.dial(broker_address)
    await consumer.send(RemotingCommand.request(RequestCode.HEART_BEAT, None, heartbeat_body(), opaque=1))
    joined = await consumer.frame()
    assert (joined.opaque, joined.code) == (1, ResponseCode.SUCCESS), joined.remark
    return consumer


async def forwarded_call(consumer: Raw) -> RemotingCommand:
    """The next request the broker forwards to the consumer (past its NOTIFY_CONSUMER_IDS_CHANGED)."""
    while True:
        command = await consumer.frame()
        if command.code != RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            return command


async def consumer_status(tcp, broker_address: str) -> RemotingCommand:
    return await tcp.call(broker_address, RequestCode.GET_CONSUMER_RUNNING_INFO,
                          {"consumerGroup": GROUP, "clientId": CLIENT_ID, "jstackEnable": "false"})


async def lab_with_a_silent_consumer(tcp, monkeypatch):
    """A broker, a silent consumer of GROUP on it, the answers mqadmin got so far, and a consumerStatus
    call that adds its answer to them."""
    monkeypatch.setattr(admin_processor, "CALL_CLIENT_TIMEOUT", WAIT)
    await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    consumer = await silent_consumer(broker.address)
    answered: list[RemotingCommand] = []

    async def ask() -> None:
        answered.append(await consumer_status(tcp, broker.address))

    return broker, consumer, answered, ask


async def test_a_consumer_that_never_answers_gets_mqadmin_a_timeout_and_stops_no_one_else(tcp, monkeypatch):
    broker, consumer, answered, ask = await lab_with_a_silent_consumer(tcp, monkeypatch)

    with trio.fail_after(10):  # a broker that waits for ever fails here
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            forwarded = await forwarded_call(consumer)  # the broker asks the consumer, which says nothing
            assert forwarded.code == RequestCode.GET_CONSUMER_RUNNING_INFO
            assert forwarded.field("clientId") == CLIENT_ID and not forwarded.is_response
            # Meanwhile everyone else is answered as ever: the wait is the forwarded call's alone.
            connections = await tcp.call(broker.address, admin.GET_CONSUMER_CONNECTION_LIST,
                                         {"consumerGroup": GROUP})
            assert not answered, "mqadmin was answered before the consumer's time was up"
            assert connections.code == ResponseCode.SUCCESS
            assert [c["clientId"] for c in json.loads(connections.body)["connectionSet"]] == [CLIENT_ID]
    [timed_out] = answered
    assert (timed_out.code, timed_out.remark) == (
        admin.CONSUME_MSG_TIMEOUT, f"consumer <{GROUP}> <{CLIENT_ID}> Timeout: no answer within {WAIT:g} s")

    # The first answer comes too late, while the next call waits: dropped, and the next call gets
    # the consumer's own answer to it.
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            again = await forwarded_call(consumer)
            assert again.opaque != forwarded.opaque
            await consumer.send(RemotingCommand(ResponseCode.SUCCESS, forwarded.opaque, 1, None, None, b"late"))
            await consumer.send(RemotingCommand(ResponseCode.SUCCESS, again.opaque, 1, None, None, b"in time"))
    assert (answered[1].code, answered[1].body) == (ResponseCode.SUCCESS, b"in time")


async def test_a_consumer_that_leaves_mid_call_gets_mqadmin_an_answer_and_the_broker_goes_on(tcp, monkeypatch):
    broker, consumer, answered, ask = await lab_with_a_silent_consumer(tcp, monkeypatch)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await forwarded_call(consumer)
            await consumer.reset()  # killed with the call on its connection
    [answer] = answered
    assert answer.code == admin.CONSUME_MSG_TIMEOUT, answer.remark
    gone = await consumer_status(tcp, broker.address)  # the close took it out of its group
    assert (gone.code, gone.remark) == (ResponseCode.SYSTEM_ERROR, f"The Consumer <{GROUP}> <{CLIENT_ID}> not online")
    sent = await tcp.send(broker.address)
    assert sent.code == ResponseCode.SUCCESS, sent.remark

