"""Brokers: role, state, the last registration result with each NameServer, write permission and
stored messages."""

from __future__ import annotations

from ..model import LabModel
from .line_table import LineTable
from .nameserver_panel import perm_text

STATE_STYLE = {"up": "green", "frozen": "bold cyan", "cut off": "bold yellow"}


def state_cell(state: str, pid: int | None = None) -> tuple[str, str]:
    """The state, and the process id when the node runs as its own process (--processes)."""
    return (f"{state} pid {pid}" if pid and state != "killed" else state), STATE_STYLE.get(state, "bold red")


def registration_cell(model: LabModel, result: tuple[bool, str, float] | None) -> tuple[str, str]:
    if result is None:
        return "-", "dim"
    ok, why, t = result
    why = why.removeprefix("Remoting").removesuffix("Exception")[:12]
    return (f"✓ {model.now - t:.0f}s", "green") if ok else (f"✗ {why} {model.now - t:.0f}s", "red")


class BrokersTable(LineTable):
    def show(self, model: LabModel) -> None:
        nameservers = list(model.nameservers)
        rows = []
        for name, broker in model.brokers.items():
            perm = perm_text(broker.perm if broker.perm is not None else model.configured_perm)
            wiped = [ns for ns in nameservers if broker.broker_name in model.nameservers[ns].wiped]
            rows.append((name, "master" if broker.broker_id == 0 else "slave",
                         state_cell(model.nodes[name].shown_state, model.nodes[name].pid),
                         *(registration_cell(model, broker.registrations.get(ns)) for ns in nameservers),
                         (perm + f" wiped@{','.join(wiped)}", "bold red") if wiped else perm,
                         f"{broker.messages:,}"))
        self.show_rows(("broker", "role", "state", *nameservers, "perm", "stored"), rows)
