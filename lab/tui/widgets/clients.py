"""Clients: the NameServer each uses, its route's age and source, messages sent, avoided brokers
and consumer lag (an application under test: its send attempts acknowledged/failed and messages
consumed); crashed clients below the live ones, with why. Under them, messages per second,
acknowledged and failed, on one scale, and the current rates as numbers — only the numbers when
the sparklines would push a client off the tab (80×24: four clients and one line of rates)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from ..errors import readable
from ..health import bars, rate, rates_text, shared_top
from ..model import SPARK_SECONDS, LabModel
from .brokers import state_cell
from .line_table import LineTable

SOURCE = {"nameserver": ("ns", "green"), "cache": ("CACHE", "bold yellow"), None: ("no route", "bold red")}
COLUMNS = ("client", "state", "ns", "route", "from", "msgs ok/failed", "retries", "avoids", "consumed", "lag")
LABEL = 11  # cells of a sparkline's label
HEALTH_LINES = 3  # the rates and two sparklines (app.tcss: Health)


class Health(Static):
    """Three lines: the rates, then acknowledged and failed messages per second on one scale; with
    the class -compact, the rates alone."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._shown: tuple = ()
        self.model: LabModel | None = None

    def on_resize(self) -> None:  # the sparklines are as wide as the widget: drawn again at once
        if self.model is not None:
            self.show(self.model)

    def show(self, model: LabModel) -> None:
        self.model = model
        width = max(10, (self.size.width or self.app.size.width) - LABEL - 1)
        ok, failed = model.send_rates(min(SPARK_SECONDS, width))
        compact = self.has_class("-compact")
        shown = (ok, failed, width, compact)
        if shown == self._shown:
            return
        self._shown = shown
        rates = Content.assemble(("msgs/s".ljust(LABEL), "bold"), rates_text(rate(ok), rate(failed)))
        if compact:
            self.update(rates)
            return
        top = shared_top(ok, failed)
        self.update(Content("\n").join([
            rates + Content.styled(f"   scale 0–{top}/s, last {len(ok)} s", "$text-muted"),
            Content.assemble(("ok".ljust(LABEL), "$text-muted"), (bars(ok, top), "$success")),
            Content.assemble(("failed".ljust(LABEL), "$text-muted"), (bars(failed, top), "$error")),
        ]))


def client_rows(model: LabModel) -> list[tuple]:
    """Live clients first; a crashed one is listed after them, dimmed, with its real error."""
    live, crashed = [], []
    for name, client in model.clients.items():
        node = model.nodes[name]
        if node.state == "crashed":
            crashed.append((name, ("crashed", "bold red"), "", "", "", "", "", (readable(node.error), "red"), "", ""))
            continue
        route = f"{model.now - client.route_t:.0f}s" if client.route_t is not None else "-"
        if client.role == "producer":
            sends, retries = f"{client.ok:,}/{client.failed:,}", f"{client.retried:,}"
            consumed = lag = ""
        elif client.role == "app":  # an application under test: what its links showed, both ways;
            # its retries and lag are not on the wire (an attempt is a send; its offsets are its own)
            sends = f"{client.ok:,}/{client.failed:,}" if client.ok or client.failed else "-"
            retries = lag = ""
            consumed = f"{client.consumed:,}"
        else:
            sends = retries = ""
            consumed, lag = f"{client.consumed:,}", f"{model.lag(name):,}"
        live.append((name, state_cell(node.shown_state), client.nameserver or "-", route,
                     SOURCE.get(client.route_source, SOURCE[None]), sends, retries,
                     ", ".join(model.avoided(name)), consumed, lag))
    return live + crashed


class ClientsView(Vertical):
    def compose(self) -> ComposeResult:
        yield LineTable()
        yield Health()

    def show(self, model: LabModel) -> None:
        rows = client_rows(model)
        health = self.query_one(Health)
        # The clients first: the sparklines' two lines only when every client (and the header) fits.
        health.set_class(self.size.height - len(rows) - 1 < HEALTH_LINES, "-compact")
        self.query_one(LineTable).show_rows(COLUMNS, rows)
        health.show(model)
