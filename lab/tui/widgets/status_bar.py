"""The header: run time, speed, running / paused / ended, mode, scenario, NAMESRV_ADDR and seed —
on a second line when one is too narrow, NAMESRV_ADDR never cut."""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from ..header import header_lines
from ..source import Source


class StatusBar(Widget):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.content = Content("")

    def render(self) -> Content:
        return self.content

    def show(self, source: Source, note: str = "", ended: bool = False) -> None:
        model = source.model
        run = model.run
        t = f"{model.now:.1f}s"
        if source.mode == "replay":
            t += f" of {source.end:.1f}s"
            state, mode = "playing" if not source.paused else "paused", f"replay of {run.get('mode', '?')}"
        else:
            state, mode = "running" if not source.paused else "paused", source.mode
        if model.ended or ended:
            state = "ended"
        state = source.state or state
        scenario = f" │ scenario {run['scenario']}" if run.get("scenario") else ""
        status = [(" nslab ", "bold reverse"), (" ", ""), (t, "bold"), (f"  speed {source.speed:g}  ", ""),
                  (note or state, "bold $warning" if source.paused or note or state == "ended" else "bold $success"),
                  (f" │ {mode}{scenario}", "")]
        lines = header_lines(status, model.namesrv_addr() or "…", str(run.get("seed", "?")),
                             self.size.width or self.app.size.width)  # not laid out yet: the screen's
        content = Content("\n").join(Content.assemble(*line) for line in lines)
        if content.plain != self.content.plain:  # a repaint; a new layout only when the lines do
            self.content = content
            if self.styles.height is None or self.styles.height.value != len(lines):
                self.styles.height = len(lines)
            self.refresh()
