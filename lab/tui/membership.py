"""The Brokers tab's answers: whether each NameServer holds each broker now (not when it last
registered), since when a removed one is gone and why, and whether a broker group can take writes."""

from __future__ import annotations

from .model import BrokerView, LabModel

LINGER = 60.0  # s of run time a removal stays on screen with its reason, then reads `not here`
PERM_STYLE = {"rw": "green", "r-": "bold yellow", "-w": "bold yellow", "--": "bold red"}


def perm_text(perm: int) -> str:
    return ("r" if perm & 4 else "-") + ("w" if perm & 2 else "-")


def membership(model: LabModel, nameserver: str, broker: str) -> tuple[str, str]:
    """(text, style): `held`, `removed 12 s ago (expired)`, `not here`, or the NameServer is down.
    A failed registration to it is added in full: the reason a broker is about to be dropped."""
    if model.nodes[nameserver].state != "up":
        return f"ns {model.nodes[nameserver].state}", "dim"
    addr = model.nodes[broker].address
    held = addr is not None and addr in model.nameservers[nameserver].tables["brokerLiveTable"]
    removal = model.removal(nameserver, addr)
    if held:
        text, style = "held", "green"
    elif removal is not None and model.now - removal[0] < LINGER:
        text, style = f"removed {model.now - removal[0]:.0f} s ago ({removal[1]})", "bold red"
    else:
        text, style = "not here", "dim"
    registration = model.brokers[broker].registrations.get(nameserver)
    if registration is not None and not registration[0] and model.nodes[broker].state == "up":
        text += f" · ✗ {registration[1]}"
        style = style if not held else "yellow"
    return text, style


def has_live_master(model: LabModel, broker_name: str) -> bool:
    return any(view.broker_name == broker_name and view.broker_id == 0 and model.nodes[node].state == "up"
               and not model.nodes[node].frozen for node, view in model.brokers.items())


def routed_frozen_master(model: LabModel, broker_name: str) -> bool:
    """The group's master is frozen and some live NameServer still lists its address: clients are
    still sent to it."""
    for node, view in model.brokers.items():
        if view.broker_name == broker_name and view.broker_id == 0 and model.nodes[node].state == "up":
            addr = model.nodes[node].address
            return any(addr in model.nameservers[ns].tables["brokerAddrTable"].get(broker_name, {})
                       .get("brokerAddrs", {}).values() for ns in model.live_nameservers())
    return False


def perm_cell(model: LabModel, broker: BrokerView) -> tuple[str, str]:
    """A group with no live master takes no writes, whatever its configured permission says. A
    frozen master a NameServer still lists is not write-less to the clients yet: their sends go to
    it and time out."""
    perm = perm_text(broker.perm if broker.perm is not None else model.configured_perm)
    if not has_live_master(model, broker.broker_name):
        if routed_frozen_master(model, broker.broker_name):
            return "master frozen (routed)", PERM_STYLE["-w"]
        return "-- write-less (no master)", PERM_STYLE["--"]
    return perm, PERM_STYLE.get(perm, "")
