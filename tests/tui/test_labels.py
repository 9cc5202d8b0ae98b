"""Labels that tell the truth (issue 38, item 4): what a row, a title, a story line or a cell says
matches what the tables and the faults say, and keeps saying it as time passes."""

from tui_support import (BROKERS, EXPIRED_AT, NAMESERVERS, build_log, replay_of, run_app, screen_text, tables,
                         wait_until)

from lab.tui.health import rates_text
from lab.tui.membership import perm_cell
from lab.tui.model import LabModel
from lab.tui.screens.help import HELP


def model_at(t: float, extra: list[dict] = ()) -> LabModel:
    model = LabModel()
    for record in sorted([r for r in build_log() if r["t"] <= t] + list(extra), key=lambda r: r["t"]):
        model.feed(record)
    return model


def fault(t: float, verb: str, nodes=(), **fields) -> dict:
    return {"t": t, "node": "lab", "kind": "chaos.fault", "source": "tui", "verb": verb, "nodes": list(nodes),
            **fields}


def register(t: float, ns: str, addr: str, broker_name: str) -> dict:
    return {"t": t, "node": ns, "kind": "ns.register", "broker_addr": addr, "broker_name": broker_name,
            "broker_id": 0, "cluster": "DefaultCluster", "first": True}


def test_a_registration_names_the_broker_node_and_says_when_it_comes_back_after_a_removal():
    model = model_at(EXPIRED_AT)
    # a broker registers before its node.start names its address: the record's name says who it is
    model.feed(register(EXPIRED_AT + 1, "ns-0", "127.0.0.1:44099", "broker-c"))
    model.feed(register(EXPIRED_AT + 20, "ns-2", BROKERS["broker-a-0"], "broker-a"))
    joins = [line.text for line in model.story if line.tag == "join"]
    assert joins[-2] == "ns-0 registered broker-c-0 (first time)"
    assert joins[-1] == "ns-2 registered broker-a-0 (again, 20 s after its removal)"


def test_only_clients_cut_from_a_node_they_use_read_cut_off():
    everyone_else = ["ns-0", "ns-2", "broker-a-0", "broker-b-0", "producer-0", "consumer-0"]
    model = model_at(30.0, [fault(30.0, "partition", groups=[["ns-1"], everyone_else])])
    assert model.nodes["producer-0"].shown_state == "up", "it uses ns-0 and both brokers, all on its side"
    assert model.nodes["consumer-0"].shown_state == "up"
    assert model.nodes["ns-1"].shown_state == "cut off"
    model.feed({"t": 31.0, "node": "consumer-0", "kind": "client.ns_switch", "from": NAMESERVERS["ns-0"],
                "to": NAMESERVERS["ns-1"], "reason": "failed", "skipped": []})
    assert model.nodes["consumer-0"].shown_state == "cut off", "its NameServer is on the other side"
    model.feed(fault(32.0, "isolate", ["producer-0"]))
    assert model.nodes["producer-0"].shown_state == "cut off"


def test_a_frozen_master_still_routed_is_not_called_write_less_until_the_nameservers_drop_it():
    model = model_at(30.0, [fault(30.0, "freeze", ["broker-a-0"])])
    assert perm_cell(model, model.brokers["broker-a-0"])[0] == "master frozen (routed)"
    for ns in NAMESERVERS:
        model.feed({"t": 150.0, "node": ns, "kind": "ns.tables", **tables(["broker-b-0"])})
    assert perm_cell(model, model.brokers["broker-a-0"])[0] == "-- write-less (no master)"


def test_the_share_in_the_rates_is_said_to_be_of_failed_messages():
    assert rates_text(6, 0.4) == "ok 6/s · failed 0/s (6 %)"


def test_a_gone_row_names_its_broker_and_its_age_keeps_counting():
    # every NameServer drops broker-a-0 at once: its rows are gone, not differing
    dropped = [r for ns in ("ns-0", "ns-1") for r in (
        {"t": EXPIRED_AT, "node": ns, "kind": "ns.remove", "broker_addr": BROKERS["broker-a-0"], "reason": "expired",
         "broker_name": "broker-a", "broker_id": 0, "cluster": "DefaultCluster"},
        {"t": EXPIRED_AT, "node": ns, "kind": "ns.tables", **tables(["broker-b-0"])})]
    app = replay_of(sorted(build_log() + dropped, key=lambda r: r["t"]), at=EXPIRED_AT + 1)

    def shows(age: int):
        return lambda: f"{BROKERS['broker-a-0']:<16} broker-a-0  — gone {age} s ago" in screen_text(app)

    async def body(pilot):
        await wait_until(pilot, shows(1), "the gone row shows")
        model = app.source.model
        for t in range(2, 6):  # live mode's model moves on record by record, its tables untouched
            model.feed({"t": EXPIRED_AT + t, "node": "lab", "kind": "lab.tick"})
            await pilot.pause(0.1)
        await wait_until(pilot, shows(5), "the gone row's age moves on", timeout=5.0)

    run_app(app, body, size=(200, 55))


def test_a_frozen_nameserver_panel_says_frozen():
    app = replay_of(sorted(build_log() + [fault(100.0, "freeze", ["ns-1"])], key=lambda r: r["t"]), at=101.0)

    async def body(pilot):
        panel = app.query_one("#panel-ns-1")
        await wait_until(pilot, lambda: panel.border_title, "the panel has its title")
        assert panel.border_title.strip() == f"ns-1 {NAMESERVERS['ns-1']} frozen"
        assert app.query_one("#panel-ns-0").border_title.strip() == f"ns-0 {NAMESERVERS['ns-0']}"

    run_app(app, body, size=(200, 55))


def test_the_help_says_which_of_idle_close_and_scan_removes_a_silent_broker_and_what_not_here_means():
    words = " ".join(HELP.split())
    assert "With RocketMQ's defaults the idle close comes first: it fires at 120 s, the scan only at its " \
           "next pass after that (120–130 s)" in words
    assert "scenario `broker-freeze-scan`" in words
    assert "(**not here**: never had it, or removed over a minute ago)" in words
