"""A scenario's expectations: pending until decided, then held or failed, with the detail."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ..model import LabModel

MARK = {None: ("…", "$text-muted"), True: ("✓", "bold $success"), False: ("✗", "bold $error")}


class ChecksView(Static):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._shown: tuple = ()

    def show(self, model: LabModel) -> None:
        checks = list(model.expectations.values())
        if self._shown == (model, [(c.ok, c.detail) for c in checks]):
            return
        self._shown = (model, [(c.ok, c.detail) for c in checks])
        if not checks:
            self.update("No scenario is playing: `nslab up --scenario NAME` plays one here, "
                        "its expectations decided as the run goes.")
            return
        held = sum(c.ok is True for c in checks)
        failed = sum(c.ok is False for c in checks)
        lines = [Content(f"{held} held, {failed} failed, {len(checks) - held - failed} pending")]
        for check in checks:
            mark, style = MARK[check.ok]
            at = f" (at {check.t:.1f}s)" if check.t is not None else ""
            lines.append(Content.assemble((f" {mark} ", style), (check.name, "bold"),
                                          f"  {check.detail}{at}" if check.detail else ""))
        self.update(Content("\n").join(lines))
