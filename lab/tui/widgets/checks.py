"""A scenario's expectations: pending until decided, then held, failed or could not be judged,
with the detail."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ..model import LabModel

MARK = {"pending": ("…", "$text-muted"), "ok": ("✓", "bold $success"), "failed": ("✗", "bold $error"),
        "unjudged": ("?", "bold $warning")}


class ChecksView(Static):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._shown: tuple = ()

    def show(self, model: LabModel) -> None:
        checks = list(model.expectations.values())
        if self._shown == (model, [(c.status, c.detail) for c in checks]):
            return
        self._shown = (model, [(c.status, c.detail) for c in checks])
        if not checks:
            self.update("No scenario is playing: `nslab up --scenario NAME` plays one here, "
                        "its expectations decided as the run goes.")
            return
        count = {status: sum(c.status == status for c in checks) for status in MARK}
        lines = [Content(f"{count['ok']} held, {count['failed']} failed"
                         + (f", {count['unjudged']} could not be judged" if count["unjudged"] else "")
                         + f", {count['pending']} pending")]
        for check in checks:
            mark, style = MARK[check.status]
            at = f" (at {check.t:.1f}s)" if check.t is not None else ""
            lines.append(Content.assemble((f" {mark} ", style), (check.name, "bold"),
                                          f"  {check.detail}{at}" if check.detail else ""))
        self.update(Content("\n").join(lines))
