"""What each chaos verb offers to pick, in the dialogs and the command palette: targets from the
model, presets for toxics and topic growth. The result is always `nslab chaos` words."""

from __future__ import annotations

from lab.control.actions import vocabulary
from .model import LabModel

HELP = {spec.name: spec.help for spec in vocabulary().specs.values()}
VERBS = tuple(HELP)

TOXICS = {  # label -> the toxic's words after the node
    "latency 500ms": ["latency", "latency=500ms"],
    "latency 5s (past the 3 s send timeout)": ["latency", "latency=5s"],
    "loss 30%": ["loss", "probability=0.3"],
    "bandwidth 10 KiB/s": ["bandwidth", "rate=10k"],
    "blackhole (bytes vanish, connections stay)": ["blackhole"],
    "reset (connections torn down)": ["reset"],
    # On one kind of request (chaos/request_faults.py): the rest of the link flows.
    "drop REGISTER_BROKER (registrations lost, routes flow)": ["drop", "code=REGISTER_BROKER"],
    "route replies 5s late (past the 3 s timeout)": ["reply", "code=GET_ROUTEINFO_BY_TOPIC", "delay=5s"],
    "slow REGISTER_BROKER 8s (route reads wait for the table)": ["slow", "code=REGISTER_BROKER", "delay=8s"],
    "SEND_MESSAGE answered SYSTEM_BUSY": ["answer", "code=SEND_MESSAGE", "answer=SYSTEM_BUSY",
                                          "remark=[TIMEOUT_CLEAN_QUEUE]broker busy"],
    "duplicate SEND_MESSAGE": ["duplicate", "code=SEND_MESSAGE"],
    "REGISTER_BROKER handled, replies lost": ["drop-reply", "code=REGISTER_BROKER"],
    "PULL_MESSAGE 2s late": ["delay", "code=PULL_MESSAGE", "delay=2s"],
    "routes in legacy unquoted keys (strict JSON clients fail)": ["dialect", "code=GET_ROUTEINFO_BY_TOPIC",
                                                                  "keys=unquoted"],
}
GROW = {f"{n:,} topics": [f"count={n}"] for n in (1_000, 10_000, 30_000)}
SECOND = {"toxic": ("Which toxic?", TOXICS), "grow-topics": ("How many topics?", GROW)}
NO_TARGET = ("heal",)
ROLE_ORDER = {"broker": 0, "nameserver": 1, "producer": 2, "consumer": 3}  # brokers first: the usual target
GROUPS = ("partition",)


def targets(verb: str, model: LabModel) -> list[tuple[str, str]]:
    """(word, label) for each thing the verb can act on now."""
    nodes = sorted(model.nodes.values(), key=lambda v: ROLE_ORDER.get(v.role, 4))
    up = [v for v in nodes if v.state == "up"]
    if verb in ("kill", "stop", "isolate", "toxic"):
        picked = up
    elif verb == "freeze":
        picked = [v for v in up if not v.frozen]
    elif verb == "unfreeze":
        picked = [v for v in up if v.frozen]
    elif verb == "restart":
        picked = [v for v in nodes if v.state != "up"] + [v for v in nodes if v.state == "up"]  # the down first
    elif verb == "grow-topics":
        picked = [v for v in up if v.role == "broker"]
    elif verb in ("ns-down", "ns-up"):
        wanted = verb == "ns-down"
        nameservers = [v for v in nodes if v.role == "nameserver" and (v.state == "up") == wanted]
        if not nameservers:
            return []  # every NameServer is already down (up): nothing to offer
        every = "every NameServer" if verb == "ns-down" else "every NameServer that is down"
        return [("all", every)] + [(v.name, f"{v.name}  {v.shown_state}") for v in nameservers]
    elif verb in ("wipe-perm", "add-perm"):
        groups = sorted({b.broker_name for b in model.brokers.values() if b.broker_name})
        return [(g, f"{g}  (on every NameServer)") for g in groups]
    elif verb == "new-client":
        return [("producer", "a new producer"), ("consumer", "a new consumer")]
    else:
        return []
    return [(v.name, f"{v.name}  {v.role}, {v.shown_state}") for v in picked]


def palette_commands(model: LabModel) -> list[tuple[str, list[str] | None, str]]:
    """(title, words or None for a dialog, help) for every chaos action the palette offers."""
    commands = []
    for verb in VERBS:
        if verb in NO_TARGET:
            commands.append((verb, [verb], HELP[verb]))
        elif verb in GROUPS or verb in SECOND:
            commands.append((f"{verb}…", None, HELP[verb]))
        else:
            commands += [(f"{verb} {word}", [verb, word], HELP[verb]) for word, _ in targets(verb, model)]
    return commands
