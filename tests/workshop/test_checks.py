"""The checks the workshop leans on say "could not be judged" when what they judge was never there,
and decide as soon as their window closes (the TUI shows it then, not at the end of the run)."""

from chaos.scenario import ExpectSpec
from lab.control.expectations import BrokerKept, ClusterView, ConsumedFrom, NoStaleBroker

ADDR = "127.0.0.1:10911"


def view_with(held: bool) -> ClusterView:
    view = ClusterView()
    for t, node, role, address in ((0, "ns-0", "nameserver", "127.0.0.1:9876"), (0, "broker-a-0", "broker", ADDR)):
        view.observe({"t": t, "kind": "node.start", "node": node, "role": role, "address": address})
    view.observe({"t": 1, "kind": "ns.tables", "node": "ns-0", "brokerLiveTable": {ADDR: {}} if held else {}})
    return view


def kept(view: ClusterView) -> BrokerKept:
    return BrokerKept(ExpectSpec("broker_kept", {"name": "kept"}, 0), view, node="broker-a-0", start=60.0,
                      end=120.0, nameservers=None)


def test_broker_kept_is_not_judged_when_the_broker_was_never_there():
    check = kept(view_with(held=False))
    check.observe({"t": 60.0, "kind": "ns.register", "node": "ns-0", "broker_addr": "elsewhere"})
    check.tick(121.0)
    assert check.result.ok is None and "did not hold broker-a-0 when the phase began" in check.result.detail


def test_broker_kept_fails_on_a_removal_of_what_it_held_and_passes_when_the_window_closes():
    check = kept(view_with(held=True))
    check.observe({"t": 60.0, "kind": "ns.register", "node": "ns-0", "broker_addr": ADDR})
    check.tick(100.0)
    assert check.result is None, "undecided while its window is open"
    check.tick(121.0)
    assert check.result.ok is True and check.result.decided_at == 121.0, "decided as its window closes"

    check = kept(view_with(held=True))
    check.observe({"t": 60.0, "kind": "ns.register", "node": "ns-0", "broker_addr": ADDR})
    check.observe({"t": 90.0, "kind": "ns.remove", "node": "ns-0", "broker_addr": ADDR, "reason": "expired"})
    assert check.result.ok is False and "ns-0 removed broker-a-0 at t=90s (expired)" in check.result.detail


def test_consumed_from_decides_when_its_window_closes():
    check = ConsumedFrom(ExpectSpec("consumed_from", {}, 0), view_with(held=True), node="broker-a-0", start=10.0,
                         end=20.0, minimum=1)
    check.observe({"t": 15.0, "kind": "consumer.consume", "node": "consumer-0", "broker_addr": ADDR})
    check.tick(21.0)
    assert check.result.ok is True and check.result.decided_at == 21.0


def test_no_stale_broker_says_the_silence_to_a_tenth():
    view = view_with(held=True)
    view.observe({"t": 0.0, "kind": "ns.register", "node": "ns-0", "broker_addr": ADDR})
    check = NoStaleBroker(ExpectSpec("no_stale_broker", {}, 0), view, limit=132.0)
    check.tick(132.4)
    assert check.result.ok is False and "unheard for 132.4s > 132s" in check.result.detail


def test_the_checks_tab_says_when_the_scenario_finished():
    from lab.tui.lesson import Lesson
    from lab.tui.model import LabModel
    from lab.tui.widgets.checks import lesson_lines

    model = LabModel()
    lesson = Lesson("expiry-scan", "teaches", 240.0, [(60.0, "freeze broker-a-0")], [("p", 60.0, 145.0)], ["kept"])
    for record in ({"t": 0.0, "node": "lab", "kind": "run.start", "scenario": "expiry-scan", "nodes": {}},
                   {"t": 146.0, "node": "lab", "kind": "check.result", "name": "kept", "ok": True, "status": "ok",
                    "detail": "ns-0 kept broker-a-0"}):
        model.feed(record)
    model.now = 150.0
    text = "\n".join(line.plain for line in lesson_lines(model, lesson, 120))
    assert "✓ kept" in text and "(at 146.0s)" in text, "a check decided when its window closed shows then"
    assert "scenario finished" not in text
    model.feed({"t": 250.0, "node": "lab", "kind": "run.drain", "seconds": 10.0})
    model.feed({"t": 260.0, "node": "lab", "kind": "run.end"})
    model.now = 260.0
    text = "\n".join(line.plain for line in lesson_lines(model, lesson, 120))
    assert "scenario finished" in text and "VALID" in text
