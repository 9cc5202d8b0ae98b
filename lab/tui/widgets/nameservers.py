"""Every NameServer's panel, side by side while each gets MIN_WIDTH columns; tabs when they don't fit."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Tab, Tabs

from ..model import LabModel
from .nameserver_panel import NameServerPanel

MIN_WIDTH = 40


class NameServers(Vertical):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.names: list[str] = []
        self.model: LabModel | None = None  # the last shown

    def compose(self) -> ComposeResult:
        yield Tabs()
        yield Horizontal(id="ns-panels")

    def show(self, model: LabModel) -> None:
        self.model = model
        if list(model.nameservers) != self.names:
            self._build(list(model.nameservers))  # shown once mounted and laid out: see _arrange
            return
        self._show_panels()

    def _show_panels(self) -> None:
        for panel in self.query(NameServerPanel):
            if panel.display:
                panel.show(self.model)

    def _build(self, names: list[str]) -> None:
        self.names = names
        tabs, panels = self.query_one(Tabs), self.query_one("#ns-panels")
        tabs.clear()
        panels.remove_children()
        for name in names:
            tabs.add_tab(Tab(name, id=f"tab-{name}"))
        panels.mount_all(NameServerPanel(name, id=f"panel-{name}") for name in names)
        self._arrange()

    def on_resize(self) -> None:
        self._arrange()

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        event.stop()
        self._arrange()

    def _arrange(self) -> None:
        narrow = bool(self.names) and self.size.width < MIN_WIDTH * len(self.names)
        self.set_class(narrow, "-narrow")
        active = self.query_one(Tabs).active
        for panel in self.query(NameServerPanel):
            panel.display = not narrow or f"tab-{panel.nameserver}" == active
        if self.model is not None:  # a panel new, resized or brought forward: draw it now, not at the next tick
            self.call_after_refresh(self._show_panels)
