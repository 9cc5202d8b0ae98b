"""Brokers: role, state, whether each NameServer holds it now (and since when a removed one is
gone, and why), the group's write permission and stored messages."""

from __future__ import annotations

from ..membership import membership, perm_cell
from ..model import LabModel
from .line_table import LineTable

STATE_STYLE = {"up": "green", "frozen": "bold cyan", "cut off": "bold yellow"}


def state_cell(state: str, pid: int | None = None) -> tuple[str, str]:
    """The state, and the process id when the node runs as its own process (--processes)."""
    return (f"{state} pid {pid}" if pid and state != "killed" else state), STATE_STYLE.get(state, "bold red")


class BrokersTable(LineTable):
    def show(self, model: LabModel) -> None:
        nameservers = list(model.nameservers)
        rows = []
        for name, broker in model.brokers.items():
            perm, style = perm_cell(model, broker)
            wiped = [ns for ns in nameservers if broker.broker_name in model.nameservers[ns].wiped]
            # Perm and stored before the NameServers: a removal's reason may run past the edge.
            rows.append((name, "master" if broker.broker_id == 0 else "slave",
                         state_cell(model.nodes[name].shown_state, model.nodes[name].pid),
                         (perm + f" wiped@{','.join(wiped)}", "bold red") if wiped else (perm, style),
                         f"{broker.messages:,}",
                         *(membership(model, ns, name) for ns in nameservers)))
        self.show_rows(("broker", "role", "state", "perm", "stored", *nameservers), rows)
