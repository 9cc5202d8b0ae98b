"""Pick the sides of a partition: the nodes you tick form one side, the rest the other."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, SelectionList

from ..widgets.key_bar import KeyBar


class PartitionScreen(ModalScreen[list[list[str]] | None]):
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Cancel", id="dialog.cancel"),
        Binding("enter", "cut", "Cut", id="dialog.cut", priority=True),
    ]

    def __init__(self, nodes: list[tuple[str, str]]):
        super().__init__()
        self.nodes = nodes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Partition: tick one side (space); the rest is the other side", classes="dialog-title")
            yield SelectionList(*((label, name) for name, label in self.nodes))
            yield Label("space ticks · enter cuts · esc cancels", classes="dialog-hint")
        yield KeyBar()

    def action_cut(self) -> None:
        side = list(self.query_one(SelectionList).selected)
        rest = [name for name, _ in self.nodes if name not in side]
        if side and rest:
            self.dismiss([side, rest])
        else:
            self.notify("each side needs at least one node", severity="warning")
