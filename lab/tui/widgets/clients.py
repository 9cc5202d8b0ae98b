"""Clients: the NameServer each uses, its route's age and source, sends, avoided brokers and
consumer lag; sparklines of send attempts per second, ok against failed."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline

from ..model import LabModel
from .brokers import state_cell
from .line_table import LineTable

SOURCE = {"nameserver": ("ns", "green"), "cache": ("CACHE", "bold yellow"), None: ("no route", "bold red")}


class ClientsView(Vertical):
    def compose(self) -> ComposeResult:
        yield LineTable()
        with Horizontal(classes="spark-row"):
            yield Label("ok/s    ", classes="spark-label")
            yield Sparkline([], id="spark-ok")
        with Horizontal(classes="spark-row"):
            yield Label("failed/s", classes="spark-label")
            yield Sparkline([], id="spark-failed")

    def show(self, model: LabModel) -> None:
        rows = []
        for name, client in model.clients.items():
            node = model.nodes[name]
            route = f"{model.now - client.route_t:.0f}s" if client.route_t is not None else "-"
            if client.role == "producer":
                sends = f"{client.ok:,}/{client.failed:,}/{client.retried:,}"
                consumed = lag = ""
            else:
                sends, consumed, lag = "", f"{client.consumed:,}", f"{model.lag(name):,}"
            rows.append((name, state_cell(node.shown_state), client.nameserver or "-", route,
                         SOURCE.get(client.route_source, SOURCE[None]), sends,
                         ", ".join(model.avoided(name)), consumed, lag))
        self.query_one(LineTable).show_rows(
            ("client", "state", "ns", "route", "from", "ok/failed/retried", "avoids", "consumed", "lag"), rows)
        for spark, data in zip(self.query(Sparkline), model.send_rates()):
            if spark.data != data:
                spark.data = data
