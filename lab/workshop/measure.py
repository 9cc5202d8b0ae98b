"""What a watching exercise measures, from the run's event records: the number the learner predicts."""

from __future__ import annotations


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


