"""An exception raised in a callback (a reply's, a timer's, a held request's answer) reaches the node
it belongs to: the node stops as crashed with the real cause, and the rest of the lab runs on.

Before, reply callbacks swallowed what they raised: a consumer's pull chain, a producer's sends or a
slave's replication stopped for good with no record at all.
"""

from __future__ import annotations

import pytest

from lab.broker.held_replies import HeldReply
from lab.clients.consumer import Consumer
from lab.clients.producer import Producer
from lab.config import LabConfig
from lab.broker.ha import HAClient
from lab.run.runner import RunOptions, run


class Bug(RuntimeError):
    pass


def raising_after(calls: int, original, on_node=lambda self: True):
    """`original`, until it has run `calls` times on the chosen node; then it raises Bug there."""
    count = 0

    def wrapper(self, *args, **kwargs):
        nonlocal count
        if on_node(self):
            count += 1
            if count > calls:
                raise Bug(f"planted bug in {original.__qualname__}")
        return original(self, *args, **kwargs)

    return wrapper


CASES = {  # class, method, the one node it raises on (None: every broker — the only way to reach them)
    "consumer pull callback": (Consumer, "_on_pulled", "consumer-0", lambda c: c.node.name == "consumer-0"),
    # sendDefaultImpl's flow, resumed by each send's reply callback, records each attempt there
    "producer send flow": (Producer, "_attempt", "producer-0", lambda p: p.node.name == "producer-0"),
    # HAClient's flow, resumed by each transfer's reply callback, applies each reply there
    "slave replication flow": (HAClient, "_apply", "broker-a-1", lambda h: h.node.name == "broker-a-1"),
    "broker held request answer": (HeldReply, "answer", None, lambda r: True),
}


MODES = {  # a simulated run, and real loopback sockets at 20x (a 60 s run in 3 s)
    "sim": {"sim": True},
    "sockets": {"speed": 20.0},
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES)
def test_a_callback_that_raises_crashes_its_node_with_the_cause_and_the_lab_runs_on(case, mode, monkeypatch):
    cls, name, node, on_node = CASES[case]
    monkeypatch.setattr(cls, name, raising_after(20, getattr(cls, name), on_node))
    records = []
    run(LabConfig(), RunOptions(seed=3, duration=60, **MODES[mode]), subscribers=[records.append])

    crashed = [r for r in records if r["kind"] == "node.stop" and r["state"] == "crashed"]
    assert crashed, f"{case}: no node recorded as crashed"
    assert crashed[0]["error"] == f"Bug: planted bug in {cls.__qualname__}.{name}"  # the cause, not a group
    assert records[-1]["kind"] == "run.end"
    if node is None:
        return
    assert [r["node"] for r in crashed] == [node]
    # The rest of the lab ran on: messages were still acknowledged and consumed after the crash.
    later = [r["kind"] for r in records if r["t"] > crashed[0]["t"] + 5 and r["node"] != node]
    assert "producer.ack" in later and "consumer.consume" in later


def test_a_coasting_route_poll_ended_on_another_stack_crashes_its_client_when_it_fails(monkeypatch, tmp_path):
    """A route poll simulated in aggregate is ended where something changes — on the NameServer's
    stack (a route changed), a chaos action's (a link changed), the network's — and puts its call
    under way back on the client's books there and then. What that raises is the client's: the
    client stops as crashed with the cause, and the run goes on. (The ending is planted here, on a
    network timer halfway through the first round that coasts.)"""
    import msgpack

    from lab.control import scenarios
    from lab.sim.clients import CoastingRoutePoll, SimMQClientAPI

    start, planted = CoastingRoutePoll.start, []

    def start_and_plant_an_end(self):
        coasting = start(self)
        if coasting and not planted and len(self.topics) > 2:
            planted.append(self.instance.node.name)
            self.stream.call_at(self.replies[1], self.interrupt)  # the network's stack, not the client's
        return coasting

    monkeypatch.setattr(CoastingRoutePoll, "start", start_and_plant_an_end)
    monkeypatch.setattr(SimMQClientAPI, "put_back", raising_after(0, SimMQClientAPI.put_back))
    scenarios.run(scenarios.prepare("broker-crash", seed=1, overrides=["network.jitter=0"]),
                  RunOptions(sim=True, events_path=tmp_path / "events"))
    with open(tmp_path / "events", "rb") as f:
        records = list(msgpack.Unpacker(f, raw=False))

    assert planted, "no route poll coasted: nothing to judge"
    crashed = [r for r in records if r["kind"] == "node.stop" and r["state"] == "crashed"]
    assert [(r["node"], r["error"]) for r in crashed] == [(planted[0], "Bug: planted bug in SimMQClientAPI.put_back")]
    assert records[-1]["kind"] == "run.end"
