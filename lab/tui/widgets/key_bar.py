"""The footer: the keys that act now, as many as the width holds (keys.py chooses). A screen's own
keys come first: in help, `q` closes help, so the footer says so rather than `q quit`."""

from __future__ import annotations

from textual.content import Content
from textual.dom import NoScreen
from textual.widget import Widget

from ..keys import footer_keys


class KeyBar(Widget):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.content = Content("")

    def render(self) -> Content:
        return self.content

    def on_mount(self) -> None:
        self.show()

    def on_resize(self) -> None:
        self.show()

    def enabled(self) -> set[str]:
        try:
            bindings = self.screen.active_bindings
        except NoScreen:  # removed while the app closes
            return set()
        return {b.binding.id or b.binding.action for b in bindings.values() if b.enabled}

    def show(self) -> None:
        if not self.is_attached or not self.is_mounted:  # the app is closing
            return
        keys, gap = footer_keys(self.enabled(), self.size.width or self.app.size.width)
        pieces = [(" ", "")]
        for key in keys:
            pieces += [(key.key, "bold $accent"), (f" {key.label}", ""), (" " * gap, "")]
        content = Content.assemble(*pieces)
        if content.plain != self.content.plain:
            self.content = content
            self.refresh()
