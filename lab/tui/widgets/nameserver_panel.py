"""One NameServer's five tables, drawn row by row on demand (Textual's line API): only the rows on
screen are rendered, so a thousand topics cost nothing until you scroll to them."""

from __future__ import annotations

from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..membership import perm_text
from ..model import TABLES, LabModel
from .lines import Piece, fit

BAR = 10  # cells of the heartbeat-age bar
WIDE = 50  # columns from which brokerLiveTable rows show the address and the node's name
TITLE = Style(bold=True, color="cyan")
DIM = Style(dim=True)
ABSENT = Style(dim=True, italic=True)
DIVERGED = Style(bgcolor="#5f1f1f")
MARK = Style(bold=True, color="yellow", bgcolor="#5f1f1f")
GREEN, YELLOW, RED = Style(color="green"), Style(color="yellow"), Style(color="red")


PERM = {"rw": DIM, "r-": Style(bold=True, color="yellow"), "-w": Style(bold=True, color="yellow"),
        "--": Style(bold=True, color="red")}
GONE = Style(dim=True, strike=True)


def legend(wide: bool, expiry: float, room: int) -> str:
    """brokerLiveTable's columns, said on its title line: the longest wording that fits in `room`."""
    forms = [f"{'addr · node' if wide else 'node'} · heartbeat age of {expiry:.0f} s",
             f"{'addr · node' if wide else 'node'} · age of {expiry:.0f} s", f"age of {expiry:.0f} s"]
    return next((form for form in forms if len(form) <= room), forms[-1])


def marked(pieces: list[Piece], width: int, tail: str) -> tuple[list[Piece], Piece | None]:
    """A diverged row: `≠` in its indent, and how long at the right only where the row leaves room
    — the mark never covers the data it flags."""
    text, style = pieces[0]
    out = [("≠", MARK), (text[1:] if text.startswith(" ") else " " + text, style), *pieces[1:]]
    used = sum(len(t) for t, _ in out)
    return out, ((tail, MARK) if used + len(tail) <= width else None)


class NameServerPanel(ScrollView, can_focus=True):
    def __init__(self, nameserver: str, **kwargs):
        super().__init__(**kwargs)
        self.nameserver = nameserver
        self.model: LabModel | None = None
        self.rows: list[tuple[str, str | None]] = []  # (table, row key); key None: the table's title
        self._built: tuple = ()
        self._drawn: dict[int, tuple] = {}  # row index -> what its line showed when last drawn
        self._live = False  # this NameServer is up: it takes part in the divergence monitor
        self._base = Style()  # the widget's own style, under every line
        self._traces: dict[tuple[str, str], float] = {}

    def show(self, model: LabModel) -> None:
        view = model.nodes[self.nameserver]
        self._live, self._base = view.state == "up", self.rich_style
        self._traces = model.traces(self.nameserver)  # rows just gone, read by _rows and render_line
        built = (model, model.tables_version, self.size.width, self._live, self._base, tuple(self._traces))
        if self._built != built:
            self._built, self._drawn = built, {}
            self.model, self.rows = model, self._rows(model)
            self.virtual_size = Size(self.size.width, len(self.rows))
            self.refresh()
        else:  # only ages moved: redraw the lines whose shown age did
            top = self.scroll_offset.y
            for index in range(top, min(top + self.size.height, len(self.rows))):
                shown = self._shown(index)
                if self._drawn.get(index) != shown:
                    self._drawn[index] = shown
                    self.refresh_line(index)  # a row of the table: ScrollView subtracts the scroll
        differ = len(model.diverged) if self._live else 0
        pid = f"pid {view.pid} " if view.pid and self._live else ""
        # a frozen NameServer is up but answers nothing: its title says so, as a killed one's does
        state = "frozen" if view.frozen and self._live else "" if self._live else view.state
        title = f"{self.nameserver} {view.address or ''} {pid}{state}"
        subtitle = f"{differ} rows differ" if differ else ""
        if (title, subtitle) != (self.border_title, self.border_subtitle):  # setting them redraws it all
            self.border_title, self.border_subtitle = title, subtitle
        self.set_class(not self._live, "-down")

    def _shown(self, index: int) -> tuple:
        """What moves with time on a row: its heartbeat age, how long it has diverged or been gone."""
        table, key = self.rows[index]
        model = self.model
        age = model.heartbeat_age(self.nameserver, key) if table == "brokerLiveTable" and key else None
        since = model.diverged.get((table, key)) if self._live else None
        gone = self._traces.get((table, key))
        return (None if age is None else round(age),
                None if since is None else int(model.now - since),
                None if gone is None else round(model.now - gone))

    def _rows(self, model: LabModel) -> list[tuple[str, str | None]]:
        tables = model.nameservers[self.nameserver].tables
        traces = self._traces
        rows: list[tuple[str, str | None]] = []
        for table in TABLES:
            keys = set(tables[table])
            if self._live:  # rows another NameServer holds and this one lacks
                keys.update(k for t, k in model.diverged if t == table)
            keys.update(k for t, k in traces if t == table)  # rows just gone: a dimmed trace
            rows.append((table, None))
            rows.extend((table, key) for key in sorted(keys))
        return rows

    def render_line(self, y: int) -> Strip:
        width, index = self.size.width, self.scroll_offset.y + y
        if self.model is None or index >= len(self.rows):
            return Strip.blank(width, self._base)
        table, key = self.rows[index]
        tables = self.model.nameservers[self.nameserver].tables
        if key is None:
            title = [(f"{table} ({len(tables[table])})", TITLE)]
            if table == "brokerLiveTable":  # its columns need saying: one line, no room lost
                room = width - len(title[0][0]) - 2
                title.append(("  " + legend(width >= WIDE, self.model.expiry, room), DIM))
            return fit(title, width, self._base)
        value = tables[table].get(key)
        if value is None:
            gone = self._traces.get((table, key))
            # a broker's row names its node, as a live row does
            name = self.model.node_at(key) if table == "brokerLiveTable" else key
            shown = key if name == key else f"{key:<16} {name}"  # in the live rows' columns
            pieces = [(f"  {shown}  — gone {self.model.now - gone:.0f} s ago", GONE)] if gone is not None \
                and (table, key) not in self.model.diverged else [(f"  {shown}  — not here", ABSENT)]
        else:
            pieces = getattr(self, f"_{table}")(key, value)
        since = self.model.diverged.get((table, key)) if self._live else None
        if since is None:
            return fit(pieces, width, self._base)
        pieces, tail = marked(pieces, width, f" ≠{self.model.now - since:.0f}s ")
        return fit(pieces, width, self._base + DIVERGED, tail)

    # --- one formatter per table, named after it ---------------------------------------------------

    def _brokerLiveTable(self, addr: str, value: dict) -> list[Piece]:
        model = self.model
        name = model.node_at(addr)
        # The table is keyed by address; a narrow panel shows the node's name instead.
        key = [(f"  {addr:<16} ", None), (f"{name}  ", DIM)] if self.size.width >= WIDE \
            else [(f"  {name:<11} ", None)]
        age = model.heartbeat_age(self.nameserver, addr)
        if age is None:
            return key + [("?".ljust(BAR), DIM)]
        filled = round(min(1.0, age / model.expiry) * BAR)
        colour = GREEN if age < 0.3 * model.expiry else YELLOW if age < 0.75 * model.expiry else RED
        return key + [("█" * filled, colour), ("░" * (BAR - filled), DIM), (f"{age:4.0f}s", None)]

    def _brokerAddrTable(self, name: str, value: dict) -> list[Piece]:
        addrs = " ".join(f"{i}={a}" for i, a in sorted(value.get("brokerAddrs", {}).items()))
        return [(f"  {name:<10} ", None), (addrs, DIM)]

    def _clusterAddrTable(self, cluster: str, names: list) -> list[Piece]:
        return [(f"  {cluster:<15} {', '.join(sorted(names))}", None)]

    def _topicQueueTable(self, topic: str, queues: dict) -> list[Piece]:
        pieces: list[Piece] = [(f"  {topic:<20} ", None)]
        for b, q in sorted(queues.items()):
            perm = perm_text(q[2])
            pieces += [(f"{b} {q[0]}/{q[1]} ", DIM), (perm, PERM.get(perm, DIM)), ("  ", None)]
        return pieces

    def _filterServerTable(self, addr: str, servers: list) -> list[Piece]:
        return [(f"  {addr:<16} {', '.join(servers)}", None)]
