"""The header: run time, speed, running or paused, mode, seed and NAMESRV_ADDR."""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from ..source import Source


class StatusBar(Widget):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.content = Content("")

    def render(self) -> Content:
        return self.content

    def show(self, source: Source, note: str = "") -> None:
        model = source.model
        run = model.run
        t = f"{model.now:.1f}s"
        if source.mode == "replay":
            t += f" of {source.end:.1f}s"
            state, mode = "playing" if not source.paused else "paused", f"replay of {run.get('mode', '?')}"
        else:
            state, mode = "running" if not source.paused else "paused", source.mode
        if model.ended:
            state = "ended"
        scenario = f" │ scenario {run['scenario']}" if run.get("scenario") else ""
        content = Content.assemble(
            (" nslab ", "bold reverse"), " ", (t, "bold"), f"  speed {source.speed:g}  ",
            (note or state, "bold $warning" if source.paused or note else "bold $success"),
            f" │ {mode}{scenario} │ NAMESRV_ADDR={model.namesrv_addr() or '…'} │ seed {run.get('seed', '?')}",
        )
        if content.plain != self.content.plain:  # a repaint, never a new layout: it is one line
            self.content = content
            self.refresh()
