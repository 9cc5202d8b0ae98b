"""The exercises: what each one runs, what it measures or swaps in, and its unit tests.

A watching exercise asks the learner to predict a number, then measures it from the run's event
log. A building exercise names the lab function the learner's file replaces (`target`) and the
unit tests that function must pass; its scenario then shows the behaviour in the whole cluster.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from lab.control import scenarios

HERE = Path(__file__).resolve().parent
EXERCISES_DIR = HERE / "exercises"
SOLUTIONS_DIR = HERE / "solutions"


@dataclass(frozen=True)
class Prediction:
    question: str  # what to predict, in one line
    unit: str
    tolerance: float
    measure: Callable[[list[dict]], float | None]  # from the run's event records


@dataclass(frozen=True)
class Exercise:
    number: int
    slug: str
    title: str
    scenario: str  # a bundled scenario's name, or a file in the exercise's directory
    predict: Prediction | None = None  # watching exercises
    target: str | None = None  # building exercises: "module:function" the learner's file replaces
    tests: list[Callable[[Callable], None]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.number:02d}-{self.slug}"

    @property
    def kind(self) -> str:
        return "build" if self.target else "watch"

    @property
    def function(self) -> str | None:
        return self.target.split(":")[1] if self.target else None

    @property
    def dir(self) -> Path:
        return EXERCISES_DIR / self.name

    def text(self, part: str) -> str:
        path = self.dir / f"{part}.md"
        return path.read_text() if path.exists() else ""

    @property
    def scenario_path(self) -> Path:
        local = self.dir / self.scenario
        return local if local.exists() else scenarios.find(self.scenario)

    @property
    def starter(self) -> Path | None:
        return self.dir / "starter.py" if self.target else None

    @property
    def solution(self) -> Path:
        return SOLUTIONS_DIR / (f"{self.name}.py" if self.target else f"{self.name}.txt")


# --- measurements over an event log -------------------------------------------------------------

def _address(records: list[dict], node: str) -> str | None:
    return next((r["address"] for r in records if r["kind"] == "node.start" and r["node"] == node), None)


def _fault_time(records: list[dict], verb: str, node: str) -> float | None:
    return next((r["t"] for r in records if r["kind"] == "chaos.fault" and r["verb"] == verb
                 and node in r.get("nodes", [])), None)


def _first_removal(records: list[dict], addr: str, after: float) -> dict | None:
    return next((r for r in records if r["kind"] == "ns.remove" and r["broker_addr"] == addr
                 and r["t"] >= after), None)


def silence_before_removal(records: list[dict]) -> float | None:
    """Seconds between broker-a-0's last heartbeat and the first NameServer dropping it."""
    addr = _address(records, "broker-a-0")
    removal = _first_removal(records, addr, _fault_time(records, "freeze", "broker-a-0") or 0.0)
    if removal is None:
        return None
    beats = [r["t"] for r in records if r["kind"] == "ns.register" and r["node"] == removal["node"]
             and r["broker_addr"] == addr and r["t"] <= removal["t"]]
    return removal["t"] - beats[-1] if beats else None


def freeze_minus_kill(records: list[dict]) -> float | None:
    """How much longer the frozen broker (broker-b-1) stayed listed than the killed one (broker-a-0)."""
    delays = []
    for verb, node in (("freeze", "broker-b-1"), ("kill", "broker-a-0")):
        at = _fault_time(records, verb, node)
        removal = _first_removal(records, _address(records, node), at) if at is not None else None
        if removal is None:
            return None
        delays.append(removal["t"] - at)
    return delays[0] - delays[1]


def failed_sends_while_down(records: list[dict]) -> float | None:
    """Sends of the producers already running that failed while every NameServer was down (from
    ns-down until ns-up); a producer started meanwhile has no route, so all of its fail."""
    down = next((r["t"] for r in records if r["kind"] == "chaos.fault" and r["verb"] == "ns-down"), None)
    up = next((r["t"] for r in records if r["kind"] == "chaos.fault" and r["verb"] == "ns-up"), None)
    if down is None or up is None:
        return None
    running = {r["node"] for r in records if r["kind"] == "node.start" and r["role"] == "producer" and r["t"] < down}
    return sum(1 for r in records if r["kind"] == "producer.failed" and r["node"] in running and down <= r["t"] < up)


def disagreement_seconds(records: list[dict]) -> float | None:
    """How long ns-0 went without broker-a-0 while ns-1 still listed it: from ns-0's removal of it
    to ns-0's next registration of it."""
    addr = _address(records, "broker-a-0")
    cut = next((r["t"] for r in records if r["kind"] == "chaos.fault" and r["verb"] == "partition"), None)
    removal = next((r for r in records if r["kind"] == "ns.remove" and r["node"] == "ns-0"
                    and r["broker_addr"] == addr and cut is not None and r["t"] >= cut), None)
    if removal is None:
        return None
    back = next((r["t"] for r in records if r["kind"] == "ns.register" and r["node"] == "ns-0"
                 and r["broker_addr"] == addr and r["t"] > removal["t"]), None)
    return back - removal["t"] if back is not None else None


# --- unit tests for the building exercises ---------------------------------------------------------
# Each takes the learner's function and raises AssertionError saying what a user would notice.

def _live(**beats):
    from nameserver.routes import BrokerLiveInfo, DataVersion
    return {addr: BrokerLiveInfo(t, DataVersion(), None, "") for addr, t in beats.items()}


def test_expiry_boundary(expired_brokers):
    table = _live(a=0.0)
    assert expired_brokers(table, 120.0, 120.0) == [], "a broker heard exactly 120 s ago is not expired yet"
    assert expired_brokers(table, 120.0, 120.5) == ["a"], "a broker silent for 120.5 s (expiry 120 s) must expire"


def test_expiry_only_the_silent(expired_brokers):
    table = _live(a=0.0, b=100.0, c=10.0)
    assert sorted(expired_brokers(table, 120.0, 125.0)) == ["a"], "only brokers silent past the expiry go"
    assert sorted(expired_brokers(table, 30.0, 125.0)) == ["a", "c"], "the expiry is a parameter, not 120 s"
    assert table.keys() == {"a", "b", "c"}, "expired_brokers only chooses: the caller removes"


def _queues(*brokers, n=4):
    from lab.clients.route_cache import MessageQueue
    return [MessageQueue("T", b, q) for b in brokers for q in range(n)]


def _index(seed=1):
    from lab.clients.selection import ThreadLocalIndex
    return ThreadLocalIndex(random.Random(seed))


def test_queue_choice_avoids_failed(select_one_message_queue):
    queues, index = _queues("broker-a", "broker-b"), _index()
    picks = [select_one_message_queue(queues, index, "broker-a").broker_name for _ in range(50)]
    assert set(picks) == {"broker-b"}, "a retry after broker-a failed must go to another broker"


def test_queue_choice_round_robin(select_one_message_queue):
    queues, index = _queues("broker-a", "broker-b"), _index()
    picks = {select_one_message_queue(queues, index, None) for _ in range(len(queues))}
    assert picks == set(queues), "a first attempt takes the queues in turn: every queue once per round"


def test_queue_choice_no_alternative(select_one_message_queue):
    queues = _queues("broker-a")
    mq = select_one_message_queue(queues, _index(), "broker-a")
    assert mq in queues, "with one broker only, a retry still gets one of its queues"


def test_failover_tries_every_one(failover_order):
    addrs = ["ns-0:9876", "ns-1:9876", "ns-2:9876"]
    for index in (0, 1, 5, 998):
        order = failover_order(addrs, index)
        assert sorted(order) == sorted(addrs), f"one round tries every NameServer once (index {index}: {order})"
        assert order[0] == addrs[(index + 1) % 3], "the round starts after namesrvIndex, as RocketMQ does"


LATENCY_MAX = [50, 100, 550, 1000, 2000, 3000, 15000]
NOT_AVAILABLE = [0, 0, 30000, 60000, 120000, 180000, 600000]


def test_ban_steps(compute_not_available_duration):
    for latency, ban in ((10, 0), (100, 0), (550, 30000), (999, 30000), (3000, 180000), (30000, 600000)):
        got = compute_not_available_duration(LATENCY_MAX, NOT_AVAILABLE, latency)
        assert got == ban, f"a {latency} ms send bans its broker for {ban} ms (got {got})"


def test_register_body_round_trips(encode_compressed_register_body):
    from nameserver.bodies import RegisterBrokerBody, SerializeType
    from nameserver.routes import DataVersion, TopicConfig
    table = {f"T{i}": TopicConfig(f"T{i}", 8, 4, 6, "SINGLE_TAG") for i in range(3)}
    body = encode_compressed_register_body(table, DataVersion(1700000000000, 3), [])
    try:
        decoded = RegisterBrokerBody.decode(body, SerializeType.JSON, compressed=True)
        topics = dict(decoded.topic_config_table)
    except Exception as e:  # what the NameServer would answer: SYSTEM_ERROR, registration refused
        raise AssertionError(f"the NameServer cannot decode the body: {type(e).__name__}: {e}") from None
    assert decoded.data_version == DataVersion(1700000000000, 3), "the NameServer reads the same dataVersion"
    assert topics == table, "the NameServer reads the same topics"


def test_register_body_is_small(encode_compressed_register_body):
    from nameserver.routes import DataVersion, TopicConfig
    table = {f"GrownTopic{i}": TopicConfig(f"GrownTopic{i}", 4, 4, 6, "SINGLE_TAG") for i in range(10_000)}
    size = len(encode_compressed_register_body(table, DataVersion(1, 1), []))
    assert size < 100_000, f"10,000 topics must shrink below 100 KB to cross a 10 KB/s link in 6 s (got {size} bytes)"


COURSE = [
    Exercise(1, "registration-and-expiry", "Registration and expiry: the 30 / 10 / 120 s timers",
             "registration-and-expiry.toml", predict=Prediction(
                 "How many seconds after a frozen broker's last heartbeat does the first NameServer drop it?",
                 "s", 10.0, silence_before_removal)),
    Exercise(2, "kill-versus-freeze", "Kill versus freeze a broker, and time the difference",
             "kill-versus-freeze.toml", predict=Prediction(
                 "How many seconds longer does the frozen broker stay listed than the killed one?",
                 "s", 15.0, freeze_minus_kill)),
    Exercise(3, "every-nameserver-down", "Every NameServer down: running clients survive, new ones get no route",
             "all-nameservers-down", predict=Prediction(
                 "How many sends of the running producers fail while every NameServer is down?", "sends", 0.0, failed_sends_while_down)),
    Exercise(4, "partition-and-divergence", "Partition and divergence: two NameServers, two truths",
             "nameserver-divergence", predict=Prediction(
                 "For how many seconds does ns-0 go without broker-a-0 while ns-1 still lists it?",
                 "s", 15.0, disagreement_seconds)),
    Exercise(5, "expiry-scan", "Implement the expiry scan", "expiry-scan.toml",
             target="nameserver.routes:expired_brokers",
             tests=[test_expiry_boundary, test_expiry_only_the_silent]),
    Exercise(6, "queue-choice", "Implement producer queue choice that avoids a failed broker", "broker-crash",
             target="lab.clients.selection:select_one_message_queue",
             tests=[test_queue_choice_avoids_failed, test_queue_choice_round_robin, test_queue_choice_no_alternative]),
    Exercise(7, "nameserver-failover", "Implement NameServer failover in the client", "one-nameserver-down",
             target="lab.clients.namesrv:failover_order", tests=[test_failover_tries_every_one]),
    Exercise(8, "latency-fault-tolerance", "Implement latency fault tolerance", "latency-fault-tolerance.toml",
             target="lab.clients.selection:compute_not_available_duration", tests=[test_ban_steps]),
    Exercise(9, "shrink-the-heartbeat", "Shrink a 10,000-topic heartbeat", "shrink-the-heartbeat.toml",
             target="nameserver.bodies:encode_compressed_register_body",
             tests=[test_register_body_round_trips, test_register_body_is_small]),
]


def get(number: int) -> Exercise:
    for exercise in COURSE:
        if exercise.number == number:
            return exercise
    raise LookupError(f"no exercise {number}: there are 1 to {len(COURSE)} (`nslab workshop list`)")
