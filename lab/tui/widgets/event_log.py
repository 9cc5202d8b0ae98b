"""The Events tab: the story lane (every turn of the run, never dropped) over the event log —
coloured by kind, chaos actions marked, repeats collapsed, filterable over everything kept; both
follow the newest line while you stay at the bottom."""

from __future__ import annotations

from rich.style import Style
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input

from .. import log_rows
from ..model import LOG_SIZE, LabModel, matching
from .lines import fit

STYLES = {prefix: Style.parse(style) for prefix, style in {
    "run": "bold white", "node": "bold white", "ns": "cyan", "broker": "green", "producer": "yellow",
    "consumer": "magenta", "client": "blue", "chaos": "bold white on red"}.items()}
CHECK = {True: Style(bold=True, color="green"), False: Style(bold=True, color="red")}
STORY = {tag: Style.parse(style) for tag, style in {
    "chaos": "bold white on red", "remove": "bold red", "join": "green", "cache": "bold yellow",
    "route": "green", "crash": "bold red", "ok": "bold green", "failed": "bold red", "unjudged": "bold yellow",
    "drain": "bold"}.items()}
DIM = Style(dim=True)
COUNT = Style(bold=True, color="yellow")
SHOWN_FIELDS = 160  # characters of a record's fields on its line
CHAOS_MARK = "◆"  # one cell wide, unlike ⚡: rows stay aligned


def summary(record: dict) -> str:
    kind = record["kind"]
    if kind == "run.start":
        return f"seed={record.get('seed')} mode={record.get('mode')} scenario={record.get('scenario')}"
    text = " ".join(f"{k}={v}" for k, v in record.items() if k not in ("t", "node", "kind"))
    return text[:SHOWN_FIELDS]


class FollowingLines(ScrollView, can_focus=True):
    """Lines drawn on demand that keep to the newest while you are at the bottom."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._base = Style()

    def _resized_to(self, count: int) -> None:
        self._base = self.rich_style
        following = self.scroll_offset.y >= self.max_scroll_y
        self.virtual_size = Size(self.size.width, count)
        if following:  # once the new size is laid out
            self.call_after_refresh(self.scroll_end, animate=False)
        self.refresh()


class StoryLane(FollowingLines):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.lines: list = []
        self._shown: tuple = ()

    def show(self, model: LabModel) -> None:
        if self._shown == (model, len(model.story)):
            return
        self._shown, self.lines = (model, len(model.story)), model.story
        self._resized_to(len(self.lines))

    def render_line(self, y: int) -> Strip:
        width, index = self.size.width, self.scroll_offset.y + y
        if index >= len(self.lines):
            return Strip.blank(width, self._base)
        line = self.lines[index]
        return fit([(f"{line.t:8.1f}s ", DIM), (line.text, STORY.get(line.tag))], width, self._base)


class EventLines(FollowingLines):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rows: list[log_rows.Row] = []
        self._shown: tuple = ()  # (model, filter text) the rows were chosen for
        self._version = 0  # the model's version when they were

    def show(self, model: LabModel, text: str) -> None:
        if self._shown != (model, text):  # a new filter looks through everything kept, once
            self._shown, self.rows = (model, text), log_rows.build(model.events(text))
        elif self._version != model.version:  # then only new records are looked at
            for record in matching(model.newest(model.version - self._version), text):
                log_rows.append(self.rows, record)
            if len(self.rows) > LOG_SIZE + LOG_SIZE // 10:  # trimmed now and then, not per record
                self.rows = log_rows.trim(self.rows, LOG_SIZE)
        else:
            return
        self._version = model.version
        self._resized_to(len(self.rows))

    def render_line(self, y: int) -> Strip:
        width, index = self.size.width, self.scroll_offset.y + y
        if index >= len(self.rows):
            return Strip.blank(width, self._base)
        row = self.rows[index]
        r = row.record
        kind = r["kind"]
        if kind == "check.result":
            style = CHECK[bool(r.get("ok"))]
        else:
            style = STYLES.get(kind.partition(".")[0])
        mark = CHAOS_MARK if kind == "chaos.fault" else " "
        pieces = [(f"{r['t']:9.3f} {mark}", DIM), (f"{log_rows.node_text(row):<12} ", None), (f"{kind:<18}", style)]
        if row.count > 1:
            pieces.append((f" ×{row.count} since {row.first_t:.1f}s ", COUNT))
        pieces.append((" " + summary(r), None))
        return fit(pieces, width, self._base)


class EventLogView(Vertical):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.model: LabModel | None = None

    def compose(self) -> ComposeResult:
        yield StoryLane(id="story")
        yield Input(placeholder="filter: any node, kind or field (empty: the notable events)", id="event-filter")
        yield EventLines()

    def show(self, model: LabModel) -> None:
        self.model = model
        self.query_one(StoryLane).show(model)
        self.query_one(EventLines).show(model, self.query_one(Input).value.strip())

    def on_input_changed(self) -> None:  # filter as you type, not at the next redraw
        if self.model is not None:
            self.show(self.model)
