"""Pick one thing from a list: a node to kill, a NameServer to take down, a toxic."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from ..widgets.key_bar import KeyBar


class PickScreen(ModalScreen[str | None]):
    """Dismisses with the chosen option's id (its word), or None on escape."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="dialog.cancel")]

    def __init__(self, title: str, choices: list[tuple[str, str]]):
        super().__init__()
        self.title_text = title
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield OptionList(*(Option(label, id=word) for word, label in self.choices))
            yield Label("enter picks · esc cancels", classes="dialog-hint")
        yield KeyBar()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
