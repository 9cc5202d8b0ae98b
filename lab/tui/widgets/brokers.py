"""Brokers: role, state, whether each NameServer holds it now (and since when a removed one is
gone, and why), the group's write permission and stored messages.

When the whole table is wider than the tab (80 columns), every NameServer's column still shows:
they come right after the state, each cell says only what happened (`removed 12 s ago`), and the
why goes on a line of its own under the broker; role and stored come last, where the edge may
cut them."""

from __future__ import annotations

import textwrap

from ..membership import membership, perm_cell
from ..model import LabModel
from .line_table import GAP, Cell, LineTable, Span

STATE_STYLE = {"up": "green", "frozen": "bold cyan", "cut off": "bold yellow"}
NOTE = "  ↳ "


def state_cell(state: str, pid: int | None = None) -> tuple[str, str]:
    """The state, and the process id when the node runs as its own process (--processes)."""
    return (f"{state} pid {pid}" if pid and state != "killed" else state), STATE_STYLE.get(state, "bold red")


def split_reason(text: str) -> tuple[str, str]:
    """`removed 12 s ago (expired) · ✗ timeout` -> (`removed 12 s ago`, `expired · ✗ timeout`)."""
    cut = min((i for i in (text.find(" ("), text.find(" · ")) if i >= 0), default=len(text))
    rest = text[cut:].strip()
    if rest.startswith("("):  # the parenthesis that closes this one: a reason may hold its own
        depth = 0
        for i, char in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                rest = rest[1:i] + rest[i + 1:]
                break
    return text[:cut], rest.strip().removeprefix("· ")


def width_of(columns: tuple[str, ...], rows: list[tuple[Cell, ...]]) -> int:
    return sum(max(len(c if isinstance(c, str) else c[0]) for c in column) + GAP
               for column in zip(columns, *rows))


class BrokersTable(LineTable):
    def show(self, model: LabModel) -> None:
        nameservers = list(model.nameservers)
        columns = ("broker", "role", "state", "perm", "stored", *nameservers)
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
        room = (self.size.width or self.app.size.width) - 1  # the vertical scrollbar's column
        if width_of(columns, rows) > room:
            columns, rows = narrow(columns, rows, len(nameservers), room)
        self.show_rows(columns, rows)


def narrow(columns: tuple[str, ...], rows: list[tuple], count: int, room: int) -> tuple[tuple[str, ...], list[tuple]]:
    """The table for a narrow tab: broker, state, perm (`-- write-less`), then each NameServer's
    short cell, then role and stored; each broker's reasons under it, one NameServer's after another."""
    order = [0, 2, 3, *range(5, 5 + count), 1, 4]
    out = []
    for row in rows:
        perm_text, perm_style = row[3]
        cells = list(row)
        cells[3] = (split_reason(perm_text)[0], perm_style)  # `(no master)`: the help says what write-less is
        why: dict[str, list[str]] = {}  # reason -> the NameServers giving it
        for i, column in enumerate(columns[5:], start=5):
            text, style = row[i]
            short, reason = split_reason(text)
            cells[i] = (short, style)
            if reason:
                why.setdefault(reason, []).append(column)
        out.append(tuple(cells[i] for i in order))
        if why:
            note = " · ".join(f"{', '.join(names)}: {reason}" for reason, names in why.items())
            lines = textwrap.wrap(note, max(20, room - len(NOTE)))
            out += [Span([(NOTE if i == 0 else " " * len(NOTE), ""), (line, "red")]) for i, line in enumerate(lines)]
    return tuple(columns[i] for i in order), out
