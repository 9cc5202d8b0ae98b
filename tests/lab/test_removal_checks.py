"""broker_removed says which NameServers removed the broker and by what (issue 38, items 4 and 5):
`every NameServer` only when every one did, and a scenario that teaches the scan fails when
something else drops the broker."""

from pathlib import Path

from chaos.scenario import ExpectSpec
from lab.control import scenarios
from lab.control.expectations import BrokerRemoved, ClusterView
from lab.run.runner import RunOptions

ADDRS = {"ns-0": "127.0.0.1:9876", "ns-1": "127.0.0.1:9877", "broker-a-0": "127.0.0.1:10911"}
BROKER = ADDRS["broker-a-0"]


def view_where(holders: list[str]) -> ClusterView:
    view = ClusterView()
    for node, addr in ADDRS.items():
        role = "nameserver" if node.startswith("ns-") else "broker"
        view.observe({"t": 0, "kind": "node.start", "node": node, "role": role, "address": addr})
    for ns in ("ns-0", "ns-1"):
        view.observe({"t": 1, "kind": "ns.tables", "node": ns, "brokerLiveTable": {BROKER: {}} if ns in holders else {}})
    return view


def removed(view: ClusterView, reason=None) -> BrokerRemoved:
    return BrokerRemoved(ExpectSpec("broker_removed", {"name": "removed"}, 0), view, brokers=["broker-a-0"],
                         within=5.0, **({"reason": reason} if reason else {}))


def removal(t: float, ns: str, reason: str, detail: str = "") -> dict:
    return {"t": t, "kind": "ns.remove", "node": ns, "broker_addr": BROKER, "reason": reason, "detail": detail}


def test_a_removal_by_one_nameserver_of_two_says_which_one_and_why_not_every():
    view = view_where(["ns-0"])
    check = removed(view)
    check.observe({"t": 10.0, "kind": "chaos.fault", "node": "lab", "verb": "kill", "nodes": ["broker-a-0"]})
    check.observe(removal(10.0, "ns-0", "channel_closed"))
    assert check.result.ok is True
    assert check.result.detail == "ns-1 never held it; ns-0 removed broker-a-0 within 0.0s"


def test_a_removal_required_by_the_scan_fails_on_an_idle_close():
    check = removed(view_where(["ns-0", "ns-1"]), reason="expired")
    check.observe({"t": 60.0, "kind": "chaos.fault", "node": "lab", "verb": "freeze", "nodes": ["broker-a-0"]})
    check.observe(removal(61.0, "ns-0", "expired"))
    check.observe(removal(62.0, "ns-1", "channel_closed", "idle for 120 s"))
    assert check.result.ok is False
    assert check.result.detail == "ns-1 removed broker-a-0 at t=62s by channel_closed: idle for 120 s, not expired"


def run(tmp_path: Path, overrides=()):
    prepared = scenarios.prepare("broker-freeze-scan", seed=3, overrides=list(overrides))
    verdict = scenarios.run(prepared, RunOptions(sim=True, events_path=tmp_path / "run.events"))
    return next(r for r in verdict.results if r.name.startswith("every NameServer drops the frozen broker"))


def test_broker_freeze_scan_shows_the_scan_and_fails_when_the_idle_close_is_back(tmp_path):
    key = run(tmp_path)
    assert key.ok is True and key.detail.startswith("ns-0, ns-1 removed broker-a-0 (expired) within"), key.detail
    # RocketMQ's default idle close (120 s, from the same last heartbeat) fires before the scan
    key = run(tmp_path, ["nameserver.serverChannelMaxIdleTimeSeconds=120"])
    assert key.ok is False and "by channel_closed: idle for 120 s, not expired" in key.detail, key.detail
