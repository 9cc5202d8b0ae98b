"""Idle queues and quiet route polls cost nothing in a simulated run, and change nothing a user sees.

An idle queue's consumer gets an empty long-poll answer every 15 s and sends the same pull straight
back; every 5 s it resends every offset, changed or not; every 30 s each client asks for every
route it uses, and nearly always gets the one it holds. On a simulated network without faults the
lab skips those round trips (CoastingSuspendedPull.renew in lab/sim/broker.py;
SimConsumer.persist_changed_offsets and the coasting rounds in lab/sim/clients.py), and once renewed
a pull coasts: renewed every period with no timer until something changes (CoastingSuspendedPull.coast). With no link
jitter (whose draws the skipped sends would have made), a run with the skipping and one without
must hold the same records at the same times: only the order of records of one same instant may
differ (and request numbers). All 18 small bundled scenarios passed this when it was written; five
run here, and two where route polls coast long enough for chaos to end some midway.
"""

from __future__ import annotations

import bisect
import collections
import sys

import msgpack
import pytest
import trio

from chaos import network
from lab.sim.broker import CoastingPullRequestHoldService, CoastingSuspendedPull
from lab.sim.clients import CoastingRebalance, CoastingRoutePoll, SimConsumer
from lab.control import scenarios
from lab.run.runner import RunOptions


def _records(path) -> collections.Counter:
    """The log's records, but for request numbers (chaos.request's opaque): a node numbers its
    requests with one counter, and the pulls not sent again draw none."""
    with open(path, "rb") as f:
        return collections.Counter(msgpack.packb({k: v for k, v in r.items() if k != "opaque"})
                                   for r in msgpack.Unpacker(f, raw=False))


def _run(name: str, path, *overrides: str, text: str | None = None) -> collections.Counter:
    verdict = scenarios.run(scenarios.prepare(name, overrides=["network.jitter=0", *overrides], text=text),
                            RunOptions(sim=True, events_path=path))
    assert verdict.valid, [r.to_dict() for r in verdict.results]
    return _records(path)


# Idle queues to skip and coast: a broker out of service leaves its queues idle; without one, more
# topics than the producers' 10 msg/s keep busy, now that they spread over every queue (a queue
# then gets a message every 48 s on average). (With 40 topics, registrations-lost meets a message
# stored while an idle pull's renewal would be on the wire: the skipping run consumes it 0.5 ms
# before the run without skipping.)
IDLE_QUEUES = {"registrations-lost": ["cluster.topics=60"], "route-dialect": ["cluster.topics=60"]}


@pytest.mark.parametrize("name", ["broker-crash", "master-down", "partition", "registrations-lost", "route-dialect"])
def test_skipping_idle_round_trips_leaves_every_record_as_it_was(name, tmp_path, monkeypatch):
    skipped = collections.Counter()
    renewed, vouched, catch_up = CoastingPullRequestHoldService._renewed, SimConsumer._still_vouched, CoastingSuspendedPull.catch_up
    finish, rebalance_finish = CoastingRoutePoll.finish, CoastingRebalance.finish

    def counting_renewed(self, request):
        ok = renewed(self, request)
        skipped["pull round trips"] += ok
        return ok

    def counting_vouched(self, *args):
        ok = vouched(self, *args)
        skipped["offset rounds"] += ok
        return ok

    def counting_finish(self):
        skipped["route fetches"] += not self.done and len(self.topics)
        finish(self)

    def counting_rebalance_finish(self):
        skipped["member-list calls"] += not self.done and len(self.calls)
        rebalance_finish(self)

    def counting_catch_up(self, now):
        before = self.renewed_at
        catch_up(self, now)
        skipped["coasting renewals"] += self.renewed_at != before

    monkeypatch.setattr(CoastingPullRequestHoldService, "_renewed", counting_renewed)
    monkeypatch.setattr(SimConsumer, "_still_vouched", counting_vouched)
    monkeypatch.setattr(CoastingSuspendedPull, "catch_up", counting_catch_up)
    monkeypatch.setattr(CoastingRoutePoll, "finish", counting_finish)
    monkeypatch.setattr(CoastingRebalance, "finish", counting_rebalance_finish)
    quiet = _run(name, tmp_path / "skipping.log", *IDLE_QUEUES.get(name, ()))
    assert skipped["pull round trips"] > 10 and skipped["offset rounds"] > 5, skipped  # it did skip
    assert skipped["coasting renewals"] > 10, skipped  # and pulls coasted, renewed with no timer
    # and route polls coasted, but for clients that parse routes as another language's do
    assert skipped["route fetches"] > 10 or name == "route-dialect", skipped
    assert skipped["member-list calls"] > 10, skipped  # and rebalance rounds

    monkeypatch.setattr(network._SimEnd, "renew_peer_call", lambda self, opaque: None)
    monkeypatch.setattr(network._SimEnd, "coast_queries", lambda self, batch: None)
    monkeypatch.setattr(network._SimEnd, "watch_peer", lambda self, interrupt: None)
    monkeypatch.setattr(network._SimEnd, "delivers_everything", lambda self: False)
    every = _run(name, tmp_path / "every.log", *IDLE_QUEUES.get(name, ()))
    only_skipping = [msgpack.unpackb(r) for r in (quiet - every).elements()][:5]
    only_every = [msgpack.unpackb(r) for r in (every - quiet).elements()][:5]
    assert not only_skipping and not only_every, (only_skipping, only_every)


def test_once_a_request_fault_was_set_every_offset_is_resent(tmp_path, monkeypatch):
    # A request fault drops or rewrites single commands: an offset sent before may not have arrived.
    rounds = collections.Counter()
    persist = SimConsumer.persist_changed_offsets

    async def counting(self):
        vouched = self._persisted_by is not None and self._still_vouched(*self._persisted_by)
        channel = next(iter(self.instance.channels._clients.values()))
        rounds[("after a fault" if channel.stream.net.links.requests.ever else "before", vouched)] += 1
        await persist(self)

    monkeypatch.setattr(SimConsumer, "persist_changed_offsets", counting)
    _run("registrations-lost", tmp_path / "faulted.log")
    assert rounds[("before", True)] > 0 and rounds[("after a fault", False)] > 10, rounds
    assert rounds[("after a fault", True)] == 0, rounds


def told_on_anothers_stack() -> bool:
    """Whether a broker's member-list change or the network's word on a link or a close is on the
    stack: what ends a coasting rebalance round elsewhere."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name in ("_members_changed", "_tell_watchers", "_notify"):
            return True
        frame = frame.f_back
    return False


# A member leaving and coming back changes the member list each broker gives: a coasting rebalance
# round must stop where the first answer would have told the change.
CONSUMER_LEAVES = """
[scenario]
teaches = "A consumer that dies leaves its group at every broker, and the others take its queues."
duration = "2m"

[cluster]
topics = 1500
consumers = 3

[[timeline]]
at = "41s"
fault = "kill"
node = "consumer-1"

[[timeline]]
at = "75s"
fault = "restart"
node = "consumer-1"
"""


@pytest.mark.parametrize("name, overrides, text, ended_midway", [
    ("one-nameserver-down", ["cluster.topics=1500"], None,
     {("route poll", "answer"), ("rebalance", "request"), ("rebalance", "answer")}),
    ("large-cluster-broker-crash", [], None, {("route poll", "request")}),
    # Which leg of the call under way the member's departure meets follows the traffic's timing;
    # one-nameserver-down has a rebalance coast end at each.
    ("consumer-leaves", [], CONSUMER_LEAVES, {("rebalance", "request")}),
])
def test_rounds_coast_and_what_ends_a_coast_midway_leaves_every_record_as_it_was(
        name, overrides, text, ended_midway, tmp_path, monkeypatch):
    # 1,500 topics: a round takes 3 s, and a NameServer's death, a broker's crash or a member's
    # departure lands in some. What was under way then goes back on the wire: a request on its
    # way, or its answer.
    ends = collections.Counter()
    for coast, kind in ((CoastingRoutePoll, "route poll"), (CoastingRebalance, "rebalance")):
        def counting_finish(self, finish=coast.finish, kind=kind):
            ends[kind, "finished"] += not self.done
            finish(self)

        def counting_interrupt(self, interrupt=coast.interrupt, kind=kind):
            if not self.done and kind == "rebalance" and told_on_anothers_stack():
                ends[kind, "run where another node told it"] += 1
            if not self.done:
                now = trio.current_time()
                under_way = bisect.bisect_right(self.replies, now)
                if under_way < len(self.replies):
                    ends[kind, "request" if self.arrivals[under_way] > now else "answer"] += 1
            interrupt(self)

        monkeypatch.setattr(coast, "finish", counting_finish)
        monkeypatch.setattr(coast, "interrupt", counting_interrupt)
    coasting = _run(name, tmp_path / "coasting.log", *overrides, text=text)
    assert ends["route poll", "finished"] > 5 and all(ends[end] for end in ended_midway), ends
    # A broker's member list changing, a link change, a close: the coast's end is scheduled on the
    # client's own timeline, never run on the stack of the broker, the network or chaos that told it.
    assert ends["rebalance", "run where another node told it"] == 0, ends

    monkeypatch.setattr(network._SimEnd, "coast_queries", lambda self, batch: None)
    monkeypatch.setattr(network._SimEnd, "watch_peer", lambda self, interrupt: None)
    every = _run(name, tmp_path / "every.log", *overrides, text=text)
    only_coasting = [msgpack.unpackb(r) for r in (coasting - every).elements()][:5]
    only_every = [msgpack.unpackb(r) for r in (every - coasting).elements()][:5]
    assert not only_coasting and not only_every, (only_coasting, only_every)
