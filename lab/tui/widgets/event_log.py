"""The event log, coloured by kind, chaos actions marked, filterable; it follows the newest record
while you stay at the bottom."""

from __future__ import annotations

from rich.style import Style
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input

from ..model import LOG_SIZE, LabModel, matching
from .lines import fit

STYLES = {prefix: Style.parse(style) for prefix, style in {
    "run": "bold white", "node": "bold white", "ns": "cyan", "broker": "green", "producer": "yellow",
    "consumer": "magenta", "client": "blue", "chaos": "bold white on red"}.items()}
CHECK = {True: Style(bold=True, color="green"), False: Style(bold=True, color="red")}
DIM = Style(dim=True)
SHOWN_FIELDS = 160  # characters of a record's fields on its line


def summary(record: dict) -> str:
    kind = record["kind"]
    if kind == "run.start":
        return f"seed={record.get('seed')} mode={record.get('mode')} scenario={record.get('scenario')}"
    text = " ".join(f"{k}={v}" for k, v in record.items() if k not in ("t", "node", "kind"))
    return text[:SHOWN_FIELDS]


class EventLines(ScrollView, can_focus=True):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.records: list[dict] = []
        self._shown: tuple = ()  # (model, filter text) the records were chosen for
        self._version = 0  # the model's version when they were
        self._base = Style()

    def show(self, model: LabModel, text: str) -> None:
        if self._shown != (model, text):  # a new filter looks through the whole log once
            self._shown, self.records = (model, text), model.events(text)
        elif self._version != model.version:  # then only new records are looked at
            self.records += matching(model.newest(model.version - self._version), text)
            del self.records[:-LOG_SIZE]
        else:
            return
        self._version, self._base = model.version, self.rich_style
        following = self.scroll_offset.y >= self.max_scroll_y
        self.virtual_size = Size(self.size.width, len(self.records))
        if following:  # once the new size is laid out
            self.call_after_refresh(self.scroll_end, animate=False)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width, index = self.size.width, self.scroll_offset.y + y
        if index >= len(self.records):
            return Strip.blank(width, self._base)
        r = self.records[index]
        kind = r["kind"]
        if kind == "check.result":
            style = CHECK[bool(r.get("ok"))]
        else:
            style = STYLES.get(kind.partition(".")[0])
        mark = "⚡" if kind == "chaos.fault" else " "
        return fit([(f"{r['t']:9.3f} {mark}", DIM), (f"{r['node']:<12} ", None), (f"{kind:<18}", style),
                    (" " + summary(r), None)], width, self._base)


class EventLogView(Vertical):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.model: LabModel | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: any node, kind or field (empty: the notable events)", id="event-filter")
        yield EventLines()

    def show(self, model: LabModel) -> None:
        self.model = model
        self.query_one(EventLines).show(model, self.query_one(Input).value.strip())

    def on_input_changed(self) -> None:  # filter as you type, not at the next redraw
        if self.model is not None:
            self.show(self.model)
