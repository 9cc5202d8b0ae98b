"""Producers and consumers against real NameServers and brokers on the simulated network, on a
virtual clock: routes and their cache, NameServer failover, retries, rebalance, slave reads."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import trio

from chaos.links import Toxic
from chaos.request_faults import RequestFault
from lab.broker import admin
from lab.clients.api import MQClientAPI
from lab.clients.consumer import Consumer
from lab.clients.errors import MQClientError
from lab.clients.instance import MQClientInstance
from lab.clients.producer import Producer
from lab.config import LabConfig
from lab.remoting.channels import Node
from lab.remoting import flow
from lab.remoting.flow import Step
from lab.sim.clients import client_instance_class, consumer_class
from lab.broker.store import MessageStore
from nameserver.protocol import RequestCode, ResponseCode

TOPIC = "TopicTest"  # the topic conftest's brokers serve, 4 queues each


class ClientLab:
    """conftest's SimLab plus NameServers that can be killed, and producers and consumers."""

    def __init__(self, sim):
        self.sim = sim
        self.ns_scopes: dict[str, trio.CancelScope] = {}

    async def start_nameserver(self, name: str, port: int) -> str:
        listener, address = await self.sim.network.listen(name, port)
        scope = self.ns_scopes[name] = trio.CancelScope()

        server = self.sim.nameservers[address] = self.sim.roles.name_server()  # brokers register with each listed

        async def serve(task_status=trio.TASK_STATUS_IGNORED):
            with scope:
                await server.serve([listener], task_status=task_status)

        await self.sim.nursery.start(serve)
        return address

    async def start_cluster(self, nameservers: int = 1, masters: tuple[str, ...] = ("broker-a",)):
        """NameServers ns-0, ns-1, ... and a master per broker name: (NameServer addresses, brokers)."""
        addrs = [await self.start_nameserver(f"ns-{i}", 9876 + i) for i in range(nameservers)]
        brokers = {name: await self.sim.start_broker(f"{name}-0", broker_name=name) for name in masters}
        return addrs, brokers

    def kill_nameserver(self, name: str) -> None:
        self.ns_scopes[name].cancel()
        self.sim.network.close_node(name)

    def node(self, name: str, **consumer) -> Node:
        config = dataclasses.replace(LabConfig(), consumer=dataclasses.replace(LabConfig().consumer, **consumer))
        return Node(name, self.sim.network, self.sim.events, config, random.Random(name))

    def instance(self, node: Node) -> MQClientInstance:
        # the lab's classes for its network, as lab/run/cluster.py builds them
        return client_instance_class(self.sim.network)(node, list(self.sim.nameservers), self.sim.nursery)

    async def producer(self, name: str = "producer-0") -> Producer:
        node = self.node(name)
        producer = Producer(node, self.instance(node), [TOPIC])
        await producer.start()
        return producer

    async def consumer(self, name: str) -> Consumer:
        node = self.node(name, consumeFromWhere="CONSUME_FROM_FIRST_OFFSET")
        consumer = consumer_class(self.sim.network)(node, self.instance(node), [TOPIC])
        await consumer.start()
        return consumer

    def mark(self) -> int:
        """A point in the event log; many events share a virtual instant, so times cannot tell."""
        return len(self.sim.records)

    def events(self, kind: str, since: int = 0, **match) -> list[dict]:
        return [r for r in self.sim.records[since:]
                if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())]

    def consumed(self, since: int = 0, **match) -> set[str]:
        return {e["msg_id"] for e in self.events("consumer.consume", since, **match)}

    def assignment(self, node: str, topic: str = TOPIC) -> list[str]:
        """The node's queues of `topic` (its group's %RETRY% topic has rebalances of its own)."""
        rebalances = self.events("consumer.rebalance", node=node, topic=topic)
        return rebalances[-1]["queues"] if rebalances else []

    async def wait_until(self, condition, timeout: float = 60.0) -> None:
        with trio.fail_after(timeout):
            while not condition():
                await trio.sleep(0.1)


@pytest.fixture
async def lab(sim):
    """Tests take `autojump_clock` too: pytest-trio runs on a clock only the test itself takes."""
    return ClientLab(sim)


async def send_all(producer: Producer, n: int) -> set[str]:
    """Send n messages one after the other; the ids of those acknowledged."""
    acked = set()
    for i in range(n):
        try:
            acked.add((await producer.send(TOPIC, b"m%d" % i)).msg_id)
        except MQClientError:
            pass  # counted and logged: the tests look at the events
    return acked


async def test_the_client_fails_over_to_the_next_namesrv_and_then_lives_on_its_cache(lab, autojump_clock):
    await lab.start_cluster(nameservers=2)
    node = lab.node("client-0")
    instance = lab.instance(node)
    await instance.start([TOPIC])
    (start,) = lab.events("client.ns_switch")
    assert start["from"] is None and start["reason"] == "start"
    fresh = lab.events("client.route", node="client-0")[-1]
    assert (fresh["source"], fresh["ok"], fresh["ns"]) == ("nameserver", True, start["to"])

    chosen = lab.sim.network.node_at[start["to"]]
    lab.kill_nameserver(chosen)
    await trio.sleep(0.1)
    route = await instance.update_topic_route_info_from_name_server(TOPIC)
    switch = lab.events("client.ns_switch")[-1]
    assert (switch["from"], switch["reason"]) == (start["to"], "channel_closed")
    assert switch["to"] != start["to"]
    assert lab.events("client.route", node="client-0")[-1]["ns"] == switch["to"]

    lab.kill_nameserver({"ns-0": "ns-1", "ns-1": "ns-0"}[chosen])
    await trio.sleep(0.1)
    assert await instance.update_topic_route_info_from_name_server(TOPIC) == route
    cached = lab.events("client.route", node="client-0")[-1]
    assert (cached["source"], cached["ok"]) == ("cache", False)
    assert "cannot reach any NameServer" in cached["error"]


async def test_after_its_namesrv_restarts_a_clients_first_good_route_has_its_own_record(lab, autojump_clock):
    # The event log counts a poll's fetches that change nothing (client.route_poll); the first over
    # a new connection is recorded, route unchanged or not: it shows when clients got routes again.
    await lab.start_cluster(nameservers=1)
    node = lab.node("producer-0")
    producer = Producer(node, lab.instance(node), [TOPIC])
    await lab.sim.nursery.start(producer.run)
    await trio.sleep(35)
    assert lab.events("client.route_poll", node="producer-0")[-1]["unchanged"] == 1, "a quiet poll is counted"
    lab.kill_nameserver("ns-0")
    await trio.sleep(5)  # no poll while it is down
    assert lab.events("client.route", lab.mark() - 1, node="producer-0") == []
    back = lab.mark()
    await lab.start_nameserver("ns-0", 9876)
    await trio.sleep(60)
    fetched = lab.events("client.route", back, node="producer-0")
    assert fetched and fetched[0]["ok"] and fetched[0]["source"] == "nameserver" and not fetched[0]["changed"]
    assert lab.events("client.route_poll", back, node="producer-0")[-1]["unchanged"] == 1, "then counted again"


async def test_with_every_namesrv_down_a_running_producer_keeps_sending_and_a_new_one_has_no_route(lab, autojump_clock):
    await lab.start_cluster(nameservers=2)
    node = lab.node("producer-0")
    producer = Producer(node, lab.instance(node), [TOPIC])
    await lab.sim.nursery.start(producer.run)
    await trio.sleep(5)
    lab.kill_nameserver("ns-0")
    lab.kill_nameserver("ns-1")
    down = lab.mark()
    await trio.sleep(65)  # two route polls with no NameServer

    assert len(lab.events("producer.ack", down)) >= 60 * node.config.producer.rate
    assert lab.events("producer.failed") == []
    polls = lab.events("client.route", down, node="producer-0")
    assert len(polls) >= 2 and all(e["source"] == "cache" and not e["ok"] for e in polls)

    # 4.9.8: start() needs no NameServer; the sends fail, each with the real cause.
    late = await lab.producer("producer-1")
    with pytest.raises(MQClientError, match="No route info of this topic: TopicTest.*cannot reach any NameServer"):
        await late.send(TOPIC, b"x")
    (failed,) = lab.events("producer.failed", node="producer-1")
    assert failed["attempts"] == 0 and "No route info of this topic" in failed["error"]


async def test_sends_to_a_killed_broker_are_retried_on_the_other_one(lab, autojump_clock):
    _, brokers = await lab.start_cluster(masters=("broker-a", "broker-b"))
    producer = await lab.producer()
    await trio.sleep(1)  # past the first route poll (10 ms after start); the next is at 30 s
    await send_all(producer, 4)
    assert {e["broker"] for e in lab.events("producer.ack")} == {"broker-a", "broker-b"}

    brokers["broker-a"].kill()
    await trio.sleep(0.1)
    killed = lab.mark()
    await send_all(producer, 8)  # within the 30 s the cached route still lists broker-a
    acks = lab.events("producer.ack", killed)
    assert len(acks) == 8 and {e["broker"] for e in acks} == {"broker-b"}
    failed_attempts = lab.events("producer.send", killed, broker="broker-a")
    assert failed_attempts and all(e["result"] != "ok" and e["attempt"] == 1 for e in failed_attempts)
    for attempt in failed_attempts:
        (retry,) = lab.events("producer.send", msg_id=attempt["msg_id"], attempt=2)
        assert (retry["broker"], retry["result"]) == ("broker-b", "ok")
    assert producer.stats.retried == len(failed_attempts) and producer.stats.failed == 0


async def test_a_black_holed_broker_burns_the_whole_send_budget_without_a_retry(lab, autojump_clock):
    await lab.start_cluster(masters=("broker-a", "broker-b"))
    producer = await lab.producer()
    lab.sim.network.add_toxic("producer-0", "broker-a-0", Toxic("blackhole"))
    await send_all(producer, 5)  # 5 of 8 queues in turn reach broker-a at least once

    failures = lab.events("producer.failed")
    assert failures and all(f["attempts"] == 1 and f["error"] == "sendDefaultImpl call timeout" for f in failures)
    for i, failure in enumerate(failures):
        (attempt,) = lab.events("producer.send", msg_id=failure["msg_id"])
        # The first times out on the open channel, which the timeout closes: a later one spends
        # its budget reconnecting into the black hole.
        later = ("RemotingTimeoutException", "RemotingConnectException") if i else ("RemotingTimeoutException",)
        assert attempt["broker"] == "broker-a" and attempt["result"] in later
        assert attempt["latency"] == pytest.approx(3.0, abs=0.01)
    assert producer.stats.failed == len(failures) and producer.stats.ok == 5 - len(failures)


async def test_a_consumer_group_of_two_splits_the_queues_and_consumes_every_acked_message(lab, autojump_clock):
    await lab.start_cluster(masters=("broker-a", "broker-b"))
    c0 = await lab.consumer("consumer-0")
    await lab.wait_until(lambda: len(lab.assignment("consumer-0")) == 8)
    c1 = await lab.consumer("consumer-1")  # the brokers tell consumer-0, which gives half away
    await lab.wait_until(lambda: len(lab.assignment("consumer-0")) == len(lab.assignment("consumer-1")) == 4)
    assert lab.events("consumer.rebalance", node="consumer-0")[-1]["t"] < 1, \
        "NOTIFY_CONSUMER_IDS_CHANGED, not the 20 s rebalance, moved the queues"
    shares = {c: set(lab.assignment(c)) for c in ("consumer-0", "consumer-1")}
    assert not shares["consumer-0"] & shares["consumer-1"]

    acked = await send_all(await lab.producer(), 40)
    assert len(acked) == 40
    await lab.wait_until(lambda: acked <= lab.consumed(), timeout=30)
    for name, share in shares.items():
        assert {f"{e['broker']}:{e['queue']}" for e in lab.events("consumer.consume", node=name)} <= share
    assert c0.consumed + c1.consumed >= 40


async def test_a_consumer_reads_from_the_slave_when_the_master_is_gone(lab, autojump_clock):
    _, brokers = await lab.start_cluster()
    await lab.sim.start_broker("broker-a-1", broker_name="broker-a", broker_id=1, store=MessageStore())
    acked = await send_all(await lab.producer(), 10)
    assert len(acked) == 10
    await trio.sleep(10)  # replication
    brokers["broker-a"].kill()
    await trio.sleep(1)  # the NameServer drops the master as its connection closes

    consumer = await lab.consumer("consumer-0")
    await lab.wait_until(lambda: acked <= lab.consumed(), timeout=30)
    assert len(lab.assignment("consumer-0")) == 4
    assert list(consumer.instance.route_cache.broker_addr_table["broker-a"]) == [1], "only the slave to pull from"


async def test_committed_offsets_let_the_next_member_resume_where_the_last_stopped(lab, autojump_clock):
    await lab.start_cluster()
    producer = await lab.producer()
    await send_all(producer, 20)
    first = await lab.consumer("consumer-0")
    await lab.wait_until(lambda: first.consumed == 20)
    await first.shutdown()  # persists its offsets, then leaves the group

    second = await lab.consumer("consumer-1")
    later = await send_all(producer, 10)
    await lab.wait_until(lambda: second.consumed >= 10)
    await trio.sleep(1)
    assert lab.consumed(node="consumer-1") == later, \
        "consumeFromWhere FIRST applies only to queues without a committed offset"


async def test_namesrv_addresses_from_the_address_server_and_a_changed_list(lab, autojump_clock):
    (a, b), _ = await lab.start_cluster(nameservers=2)
    served = [f"{a}\n".encode()]
    listener, _ = await lab.sim.network.listen("address-server", 8080)

    async def reply(stream):
        await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.0 200 OK\r\n\r\n" + served[0])
        await stream.aclose()
    lab.sim.nursery.start_soon(trio.serve_listeners, reply, [listener])

    node = lab.node("client-0")
    instance = MQClientInstance(node, None, lab.sim.nursery, env={},
                                properties={"rocketmq.namesrv.domain": "127.0.0.1:8080"})
    await instance.start([TOPIC])
    assert lab.events("client.ns_list")[-1]["addrs"] == [a]
    assert lab.events("client.ns_switch")[-1]["to"] == a

    served[0] = f"{b}\n".encode()
    await trio.sleep(11)  # the address server is asked again 10 s after start, then every 2 min
    assert lab.events("client.ns_list")[-1]["addrs"] == [b]
    await instance.update_topic_route_info_from_name_server(TOPIC)
    switch = lab.events("client.ns_switch")[-1]
    assert (switch["from"], switch["to"], switch["reason"]) == (a, b, "address_list_changed")


# --- coasting: an idle queue's held pull, renewed every period with no work --------------------------

async def test_an_idle_queues_pulls_coast_and_its_broker_still_counts_each_empty_pull(lab, autojump_clock):
    _, brokers = await lab.start_cluster()
    broker = brokers["broker-a"]
    await lab.consumer("consumer-0")
    await lab.wait_until(lambda: len(lab.assignment("consumer-0")) == 4)
    await trio.sleep(200)
    assert broker.broker.hold_service.held == broker.broker.hold_service.coasting == 5, \
        "renewed once, each of the five pulls (four of the topic, one of the group's retry topic) coasts from then on"
    # Each queue's pull would have come back empty every 15 s: 20 a minute, whoever counts them.
    reply = await lab.sim.call(broker.address, admin.GET_BROKER_RUNTIME_INFO)
    miss_tps = [float(f) for f in json.loads(reply.body)["table"]["getMissTps"].split()]
    assert 15 / 60 <= miss_tps[1] <= 25 / 60 and 15 / 60 <= miss_tps[2] <= 25 / 60, miss_tps


async def test_a_queue_taken_away_is_held_for_its_old_owner_no_longer(lab, autojump_clock):
    _, brokers = await lab.start_cluster()
    hold_service = brokers["broker-a"].broker.hold_service
    c0 = await lab.consumer("consumer-0")
    await lab.wait_until(lambda: len(lab.assignment("consumer-0")) == 4)
    await trio.sleep(60)  # every pull renewed, and coasting
    assert hold_service.coasting == 5  # the topic's 4 queues and the group's retry queue
    await lab.consumer("consumer-1")
    await lab.wait_until(lambda: len(lab.assignment("consumer-0")) == len(lab.assignment("consumer-1")) == 2)
    await trio.sleep(20)  # the suspend time (15 s): a pull nobody sends again is answered by then
    assert sorted(hold_service.held_by_owner().values()) == [2, 3], "each holds the pulls of its own queues"
    assert len(c0.process_queue_table) == 3, "2 of the topic and the retry queue (the first of the sorted ids')"


async def test_a_consumer_joining_a_running_instance_is_in_its_next_heartbeat(lab, autojump_clock):
    # Producers and consumers of one process share an MQClientInstance, and its heartbeats.
    _, brokers = await lab.start_cluster()
    node = lab.node("app-0", consumeFromWhere="CONSUME_FROM_FIRST_OFFSET")
    instance = lab.instance(node)
    producer = Producer(node, instance, [TOPIC])
    await producer.start()
    await trio.sleep(35)  # a heartbeat round with the producer alone
    consumer = Consumer(node, instance, [TOPIC])
    await consumer.start()
    reply = await lab.sim.call(brokers["broker-a"].address, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                               {"consumerGroup": consumer.consumer_group})
    assert reply.code == ResponseCode.SUCCESS
    assert json.loads(reply.body)["consumerIdList"] == [instance.client_id]


async def test_a_queue_whose_offset_query_went_unanswered_comes_with_a_later_rebalance(lab, autojump_clock):
    await lab.start_cluster()
    producer = await lab.producer()
    old = await send_all(producer, 8)
    assert len(old) == 8
    # The first QUERY_CONSUMER_OFFSET is lost: that queue has no offset to start from this round.
    lab.sim.network.add_request_fault("consumer-0", "*",
                                      RequestFault("drop", RequestCode.QUERY_CONSUMER_OFFSET, count=1))
    node = lab.node("consumer-0")  # CONSUME_FROM_LAST_OFFSET, the default
    consumer = Consumer(node, lab.instance(node), [TOPIC])
    await consumer.start()
    await lab.wait_until(lambda: len(lab.assignment("consumer-0")) == 4)
    assert lab.events("consumer.rebalance")[0]["t"] >= 5, "the rebalance waited out the 5 s offset-query timeout"
    pulled = {str(mq) for mq in consumer.process_queue_table.of_topic(TOPIC)}
    assert len(pulled) == 3, "the queue without an offset is not pulled"
    await lab.wait_until(lambda: len(consumer.process_queue_table.of_topic(TOPIC)) == 4, timeout=30)  # the next rebalance

    # A group's first consumer of a queue whose log starts at 0 begins there (the broker answers 0),
    # whatever consumeFromWhere says: the old messages too, each once.
    new = await send_all(producer, 8)
    await lab.wait_until(lambda: old | new <= lab.consumed(node="consumer-0"), timeout=30)
    await trio.sleep(1)
    consumed = [e["msg_id"] for e in lab.events("consumer.consume", node="consumer-0")]
    assert sorted(consumed) == sorted(old | new)


# --- a consumer leaving while its callbacks are out ------------------------------------------------

async def leave_while_offset_queries_are_out(lab: ClientLab, monkeypatch) -> None:
    """consumer-1 joins consumer-0's group and stops as soon as its first QUERY_CONSUMER_OFFSET is
    out: the replies that land while it stops must not give it a queue, nor consumer-0 fewer."""
    await lab.start_cluster(masters=("broker-a", "broker-b"))
    producer = await lab.producer()
    stayer = await lab.consumer("consumer-0")
    await lab.wait_until(lambda: len(lab.assignment("consumer-0")) == 8)
    leaving: dict = {}  # "since": the mark when it began to stop; then "late" replies, queries "asked"
    original_query = MQClientAPI.query_consumer_offset
    # Every reply a link's latency after its request: the stop, asked for while the first query is
    # out, begins before any reply lands, whatever order trio runs the ready tasks in (with no
    # latency the reply and the stop were ready at one instant, and the scheduler chose).
    lab.sim.network.links.base_latency = 0.001

    async def leave(consumer: Consumer) -> None:
        leaving["since"] = lab.mark()
        await consumer.shutdown()

    def noting_late(outcome):
        if "since" in leaving:
            leaving["late"] = leaving.get("late", 0) + 1
        return outcome

    def query_then_leave(self, addr, group, mq, timeout):
        """consumer-1's offset queries, counted once it stops; its first one out starts the stop."""
        step = original_query(self, addr, group, mq, timeout)
        if self is not leaver.instance.api:
            return step
        if "since" in leaving:
            leaving["asked"] = leaving.get("asked", 0) + 1
        if "asked_to_stop" not in leaving:
            leaving["asked_to_stop"] = True
            lab.sim.nursery.start_soon(leave, leaver)

        async def in_task():
            try:
                return noting_late(await step.in_task())
            except Exception as error:
                raise noting_late(error)
        return Step(lambda resume: step.start(lambda outcome: resume(noting_late(outcome))), in_task)

    monkeypatch.setattr(MQClientAPI, "query_consumer_offset", query_then_leave)
    node = lab.node("consumer-1", consumeFromWhere="CONSUME_FROM_FIRST_OFFSET")
    leaver = Consumer(node, lab.instance(node), [TOPIC])
    await leaver.start()
    await lab.wait_until(lambda: "since" in leaving and not leaver.instance.channels._clients)
    assert leaving.get("late"), "no offset query was answered while consumer-1 stopped: nothing to judge"
    assert not leaver.process_queue_table
    assert not leaving.get("asked"), "a stopping consumer went on asking offsets"
    assert lab.events("consumer.rebalance", leaving["since"], node="consumer-1") == [], \
        "a stopping consumer took queues"

    await lab.wait_until(lambda: len(lab.assignment("consumer-0")) == 8 and
                         len(stayer.process_queue_table.of_topic(TOPIC)) == 8)
    acked = await send_all(producer, 16)
    await lab.wait_until(lambda: acked <= lab.consumed(node="consumer-0"), timeout=30)
    assert not lab.consumed(leaving["since"], node="consumer-1")


async def test_a_consumer_stopping_with_offset_queries_out_takes_no_queue(lab, autojump_clock, monkeypatch):
    await leave_while_offset_queries_are_out(lab, monkeypatch)


async def test_over_real_sockets_a_consumer_stopping_with_offset_queries_out_takes_no_queue(tcp, monkeypatch):
    await leave_while_offset_queries_are_out(ClientLab(tcp), monkeypatch)


# --- the simulator reads the roles without moving them --------------------------------------------

async def test_a_rebalance_rounds_picks_draw_nothing_from_the_nodes_generator(lab, autojump_clock):
    """A consumer's broker picks come from a seed of their own, keyed by its round: asking them
    (as the simulator does ahead of a coasting round) moves neither the node's generator nor them."""
    await lab.start_cluster(masters=("broker-a", "broker-b", "broker-c"))
    consumer = await lab.consumer("consumer-0")
    state = consumer.node.rng.getstate()
    picks = [consumer.consumer_list_broker(TOPIC) for _ in range(8)]
    assert picks[0] is not None and picks == picks[:1] * 8
    assert consumer.node.rng.getstate() == state
    rounds = set()
    for _ in range(30):  # a round of its own draws again
        consumer.rebalances += 1
        rounds.add(consumer.consumer_list_broker(TOPIC))
    assert len(rounds) == 3
    other = Node("consumer-0", lab.sim.network, lab.sim.events, consumer.node.config, random.Random("other"))
    assert other.seed_for("x") != consumer.node.seed_for("x") != consumer.node.seed_for("y")


async def test_a_route_fetch_asks_the_name_server_selector_before_each_request(lab, autojump_clock):
    # Exercise 11's contract (a learner's NamesrvSelector replaces the lab's): before each request
    # to a NameServer the client asks is_sticky(channel_ok), in a flow as in a task, and only a
    # sticky choice is asked on its open channel. A naive selector's bug must show in the lab.
    await lab.start_cluster(nameservers=1)
    instance = lab.instance(lab.node("producer-0"))
    await instance.start([TOPIC])
    selector, asked = instance.api.namesrv, []
    sticky = selector.is_sticky
    selector.is_sticky = lambda channel_ok: asked.append(selector.chosen) or sticky(channel_ok)

    async def fetch():
        return await instance.api.get_topic_route_info_from_name_server(TOPIC, 3.0)

    route = await flow.run(fetch())
    assert route.queue_datas and asked == [selector.chosen]
