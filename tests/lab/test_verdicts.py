"""Verdicts you can trust: faults at their phase's time, seeds that explore the timings a cluster
has, send timing as sendDefaultImpl's, freeze as a pause, and every bundled scenario's key
expectation failing (or not judged) when its fault is taken away."""

import re
from pathlib import Path

import pytest
import trio

from chaos.scenario import Step
from lab.clients import producer as producer_module
from lab.clients.route_cache import TopicPublishInfo
from lab.config import LabConfig
from lab.control import scenarios
from lab.control.actions import LabControl, vocabulary
from lab.events import read_events
from lab.run.runner import RunOptions, make_clock, run_cluster
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode

from raw_client import Raw


def run(name, tmp_path: Path, *, seed=None, overrides=(), change=None):
    prepared = scenarios.prepare(name, seed=seed, overrides=list(overrides))
    if change is not None:
        change(prepared.scenario)
    path = tmp_path / f"{name}-{prepared.seed}.events"
    verdict = scenarios.run(prepared, RunOptions(sim=True, events_path=path))
    return verdict, list(read_events(path))


def result(verdict, name):
    return next(r for r in verdict.results if r.name == name)


def test_a_fault_at_1m_happens_at_60_000_s_and_checks_tick_on_the_same_clock(tmp_path):
    verdict, records = run("broker-crash", tmp_path, seed=3)
    faults = [(r["t"], r["verb"]) for r in records if r["kind"] == "chaos.fault"]
    assert faults == [(60.0, "kill"), (150.0, "restart")]
    decided = [r["t"] for r in records if r["kind"] == "check.result"]
    assert decided and all(t >= 60.0 for t in decided)


def no_faults(scenario):
    scenario.timeline = []


# Each bundled scenario's key expectation, and how to take its cause away: with no fault it must
# fail or be unjudged, never hold. (oversized-heartbeat-compressed teaches the fix: take the fix away.)
KEY = {
    "all-nameservers-down": ("a new client gets no route while every NameServer is down, and gets one after", None),
    "blackholed-nameserver": ("clients stuck on ns-0 move on", None),
    "broker-crash": ("broker_removed broker=broker-a-0 within=1s", None),
    "broker-graceful-shutdown": ("unregistered from every NameServer at once", None),
    "broker-hang": ("NameServers drop the hung broker only after the expiry", None),
    # The cause is the idle close turned off: with RocketMQ's 120 s it fires before the scan.
    "broker-freeze-scan": ("every NameServer drops the frozen broker by its scan (expired), not by an idle close",
                           ["nameserver.serverChannelMaxIdleTimeSeconds=120"]),
    "large-cluster-broker-crash": ("every NameServer drops the crashed master and its 2,000 topics at once", None),
    "master-down": ("consumers read broker-a's backlog from its slave", None),
    "nameserver-divergence": ("ns-0 expires broker-a-0", None),
    "nameserver-pause": ("on resume, ns-0 drops every broker at once", None),
    "nameserver-restart": ("the restarted NameServer holds every route again within one registration period", None),
    "one-nameserver-down": ("clients of ns-0 move to ns-1", None),
    "oversized-heartbeat": ("the NameServers drop the live broker", None),
    "oversized-heartbeat-compressed": ("the broker stays registered", ["broker.compressedRegister=false"]),
    "partition": ("ns-0 forgets the far side's master", None),
    "registrations-lost": ("ns-1 drops broker-a-0 (its registrations lost)", None),
    "route-replies-delayed": ("clients whose route queries time out on ns-0 move on", None),
    "heartbeat-storm": ("ns-0 drops every broker: their registrations time out and they close their channels", None),
    # The fix kept out: a client whose parser reads both dialects (a Java client's) gets its route.
    "route-dialect": ("a new client gets no route it can parse while the keys are unquoted, and gets one after",
                      ["client.routeParser=fastjson"]),
    "write-perm-wipe": ("after one route poll, producers avoid broker-a", None),
}


def test_every_bundled_scenario_has_a_key_expectation():
    assert set(KEY) == {p.stem for p in scenarios.bundled()}


@pytest.mark.parametrize("name", sorted(KEY))
def test_the_key_expectation_does_not_hold_without_its_cause(name, tmp_path):
    label, overrides = KEY[name]
    verdict, _ = run(name, tmp_path, overrides=overrides or (), change=None if overrides else no_faults)
    key = result(verdict, label)
    assert key.ok is not True, key.detail
    assert verdict.exit_code != 0


def test_a_convergence_bound_that_cannot_be_met_fails(tmp_path):
    # The restart empties ns-0 at 60 s; brokers refill it within a registration period, not 1 s.
    def tight(scenario):
        scenario.expectations[0].params["within"] = "1s"

    verdict, _ = run("nameserver-restart", tmp_path, seed=1, change=tight)
    key = verdict.results[0]
    assert key.ok is False and "still disagree 1s after t=60s" in key.detail


def test_an_expectation_that_saw_nothing_makes_the_verdict_unknown(tmp_path):
    verdict, records = run("broker-crash", tmp_path, seed=1, change=no_faults)
    removed = result(verdict, "broker_removed broker=broker-a-0 within=1s")
    assert removed.ok is None and removed.detail == "could not be judged: no fault on broker-a-0 happened"
    assert verdict.valid is None and verdict.exit_code == 2
    assert any(r["kind"] == "check.result" and r["status"] == "unjudged" for r in records)


def shared_queue_counter(monkeypatch):
    """The producers as they were: one queue counter for all of a producer's topics."""
    shared = {}

    def publish_info(topic, route, rng=None):
        info = TopicPublishInfo(topic, route, rng)
        info.send_which_queue = shared.setdefault(rng, info.send_which_queue)  # one per producer node
        return info
    monkeypatch.setattr(producer_module, "TopicPublishInfo", publish_info)


SPREAD = "retries leave each producer's topics spread over every queue of each broker"


def test_queues_balanced_fails_when_a_producer_shares_one_queue_counter_across_its_topics(tmp_path, monkeypatch):
    verdict, _ = run("broker-crash", tmp_path, seed=1)
    assert result(verdict, SPREAD).ok is True, result(verdict, SPREAD).detail
    shared_queue_counter(monkeypatch)
    verdict, _ = run("broker-crash", tmp_path, seed=1)
    spread = result(verdict, SPREAD)
    # 4 topics in turn over 8 queues: each topic's messages on one queue of each broker's four.
    assert spread.ok is False and "max/min inf > 2" in spread.detail, spread.detail
    per_queue = re.search(r" on broker-\w: ([\d/]+) ", spread.detail).group(1).split("/")
    assert per_queue.count("0") == 3, spread.detail  # mqadmin topicStatus would show 0/84/0/0
    assert verdict.exit_code == 1


def test_queues_balanced_could_not_be_judged_when_nothing_was_sent(tmp_path):
    verdict, _ = run("broker-crash", tmp_path, seed=1, overrides=["cluster.producers=0"])
    spread = result(verdict, SPREAD)
    assert spread.ok is None and spread.detail == (
        "could not be judged: no producer had 4 messages a queue of a topic acknowledged by one broker "
        "between 0s and 240s"), spread.detail


def last_attempt_on_the_killed_master(records):
    kill = next(r["t"] for r in records if r["kind"] == "chaos.fault" and r["verb"] == "kill")
    last = {}
    for r in records:
        if r["kind"] == "producer.send" and r["broker"] == "broker-a" and kill <= r["t"] < kill + 60:
            last[r["node"]] = r["t"] - kill
    return last


def test_seeds_spread_each_producers_last_attempt_on_a_killed_master_over_the_poll_interval(tmp_path):
    # The producer keeps broker-a-0 in its cached route until its next route poll (every 30 s): with
    # every node's timers at a seeded phase, when that poll comes differs from seed to seed.
    gaps = []
    for seed in range(1, 21):
        _, records = run("broker-crash", tmp_path, seed=seed)
        gaps += last_attempt_on_the_killed_master(records).values()
    # A producer whose poll comes within a send or two of the kill may have picked only broker-b's
    # queues meanwhile (each topic's own round robin): it has no last attempt there.
    assert len(gaps) >= 36 and all(0 <= g <= 30.1 for g in gaps)
    filled = {int(g // 5) for g in gaps}
    assert filled >= {0, 1, 2, 3, 4, 5}, f"every 5 s of the 30 s poll interval: {sorted(gaps)}"


def test_periodic_work_runs_at_a_fixed_rate(tmp_path):
    _, records = run("nameserver-restart", tmp_path, seed=5)
    rounds = [r for r in records if r["kind"] == "client.route_poll" and r["node"] == "producer-0"]
    polls = [r["began"] for r in rounds]
    gaps = [b - a for a, b in zip(polls, polls[1:])]
    # A round begins on the schedule's tick: nothing but the clock's rounding varies.
    assert len(gaps) >= 4 and all(abs(gap - 30.0) < 0.002 for gap in gaps), gaps
    assert abs(polls[-1] - polls[0] - 30.0 * len(gaps)) < 0.002, "no drift over the run"
    # every round fetches every topic the producer uses; its replies come a moment later
    topics = len(records[0]["topics"])
    assert all(r["topics"] == topics and 0 < r["t"] - r["began"] < 1 for r in rounds if r["unchanged"] == topics)


def test_no_send_attempt_begins_once_the_timeout_is_spent(tmp_path):
    # sendDefaultImpl: an attempt that timed out spends the whole 3 s; no retry follows it.
    for seed in (1, 2, 3):
        _, records = run("broker-hang", tmp_path, seed=seed)
        first, timed_out = {}, 0
        for r in records:
            if r["kind"] != "producer.send":
                continue
            begun = r["t"] - r["latency"]
            first.setdefault(r["msg_id"], begun)
            assert begun - first[r["msg_id"]] < 3.0, r
            timed_out += r["result"] == "RemotingTimeoutException"
        assert timed_out, "sends to the hung broker time out"


def records_of(records, node, start, end):
    return [r for r in records if r["node"] == node and start < r["t"] < end]


def test_a_frozen_broker_does_nothing_and_runs_its_overdue_registrations_on_resume(tmp_path):
    _, records = run("broker-hang", tmp_path, seed=1)
    assert records_of(records, "broker-a-0", 60.0, 240.0) == [], "a frozen broker records nothing"
    overdue = [r for r in records_of(records, "broker-a-0", 240.0, 240.5)
               if r["kind"] == "broker.register" and r["trigger"] == "period"]
    assert len(overdue) >= 2 * 5, "six registration periods fell in the freeze: they run at once, to each NameServer"


def test_a_nameserver_paused_past_the_expiry_drops_every_broker_before_it_reads_their_heartbeats(tmp_path):
    _, records = run("nameserver-pause", tmp_path, seed=1)
    assert records_of(records, "ns-0", 60.0, 260.0) == [], "a paused NameServer scans and closes nothing"
    resumed = [r for r in records if r["node"] == "ns-0" and r["kind"] in ("ns.remove", "ns.register")
               and r["t"] >= 260.0]
    first = resumed[:4]
    assert {r["kind"] for r in first} == {"ns.remove"} and {r["reason"] for r in first} == {"expired"}
    assert len({r["broker_addr"] for r in first}) == 4


def test_a_new_producer_starts_with_every_nameserver_down_and_its_sends_fail_for_want_of_a_route(tmp_path):
    _, records = run("all-nameservers-down", tmp_path, seed=1)
    start = next(r for r in records if r["kind"] == "client.start" and r["node"] == "producer-2")
    assert start["ok"] is True and start["t"] == pytest.approx(90.0, abs=0.1)
    failed = [r for r in records if r["kind"] == "producer.failed" and r["node"] == "producer-2"]
    assert failed and all("No route info of this topic" in r["error"] for r in failed)
    assert not any(r["kind"] == "node.stop" and r.get("state") == "crashed" for r in records)


def test_a_spread_fault_moves_with_the_seed_within_its_window(tmp_path):
    times = set()
    for seed in (1, 2, 3):
        prepared = scenarios.prepare("broker-crash", seed=seed)
        prepared.scenario.timeline[0].at, prepared.scenario.timeline[0].spread = 60.0, 20.0
        prepared.scenario.place(seed)
        times.add(prepared.scenario.timeline[0].at)
        again = scenarios.prepare("broker-crash", seed=seed).scenario
        again.timeline[0].spread = 20.0
        again.place(seed)
        assert again.timeline[0].at == prepared.scenario.timeline[0].at, "the same seed, the same moment"
    assert len(times) == 3 and all(60.0 <= t <= 80.0 for t in times)


def test_over_real_sockets_a_paused_nameserver_accepts_answers_nothing_then_scans_first(tmp_path):
    # In-process NameServer on loopback: a real client dialling it while it is frozen gets its
    # connection (the kernel's handshake) and no answer; on resume the overdue scan drops every
    # broker, and the held request is answered.
    path = tmp_path / "sockets.events"
    options = RunOptions(sim=False, speed=40, seed=3, events_path=path)
    seen = {}

    async def driver(cluster, events, nursery):
        control, words = LabControl(cluster, nursery), vocabulary().parse_words
        live = cluster.nameservers["ns-0"].routes.broker_live_table
        with trio.fail_after(60):  # every broker registered before the freeze, on a busy machine too
            while len(live) < 4:
                await trio.sleep(0.5)
        await trio.sleep(5)
        await control.apply(words(["freeze", "ns-0"]), source="test")
        seen["frozen"] = events.now()
        with trio.fail_after(5):
            raw = await Raw.dial(cluster.supervisor.nodes["ns-0"].address)
        topic = next(iter(cluster.topology.topics))
        await raw.send(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        with trio.move_on_after(130) as waited:
            await raw.frame()
        seen["answered_while_frozen"] = not waited.cancelled_caught
        seen["resumed"] = events.now()
        await control.apply(words(["unfreeze", "ns-0"]), source="test")
        with trio.fail_after(10):
            seen["code"] = (await raw.frame()).code
        await trio.sleep(1)
        await raw.stream.aclose()

    trio.run(lambda: run_cluster(LabConfig(), options, driver=driver), clock=make_clock(options))
    assert seen["answered_while_frozen"] is False
    assert seen["code"] in (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST)
    records = list(read_events(path))
    assert records_of(records, "ns-0", seen["frozen"] + 0.01, seen["resumed"]) == []
    expired = {r["broker_addr"] for r in records if r["node"] == "ns-0" and r["kind"] == "ns.remove"
               and r["reason"] == "expired" and r["t"] >= seen["resumed"]}
    assert len(expired) == 4, "every broker, silent for 130 s, expires at once on resume"


@pytest.mark.parametrize("verb,node,wanted,again", [("stop", "broker-a-0", "stopped", "restart"),
                                                     ("kill", "broker-a-0", "killed", "restart"),
                                                     ("ns-down", "ns-0", "killed", "ns-up")])
def test_a_frozen_node_can_be_stopped_or_killed_and_comes_back_running(verb, node, wanted, again, tmp_path):
    vocab = vocabulary()

    def freeze_then(scenario):
        scenario.timeline = [Step(60.0, vocab.parse_words(["freeze", node]), 0),
                             Step(70.0, vocab.parse_words([verb, node]), 1),
                             Step(80.0, vocab.parse_words([again, node]), 2)]

    _, records = run("nameserver-restart", tmp_path, seed=2, change=freeze_then)
    (stopped,) = [r for r in records if r["kind"] == "node.stop" and r["node"] == node and 70 <= r["t"] < 80]
    assert stopped["state"] == wanted and stopped["t"] < 71, "a stopped process gets SIGCONT first"
    assert [r for r in records_of(records, node, 81.0, 200.0) if r["kind"] in ("broker.register", "ns.register")], \
        "started again, it is not frozen"
