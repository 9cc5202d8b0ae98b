"""The Checks tab as a lesson: where the run is and the verdict on one pinned line, then each
expectation pending / held / failed with its detail, the fault timeline with a cursor at the
current time, what the scenario teaches and its steps. At 80×24 the tab has six rows: the verdict
stays in sight and the expectations come first; the rest scrolls (focused on showing: PageDown,
End, the arrows)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static, TabbedContent

from ..lesson import Lesson, clock, ended, phase_at, ruler, verdict
from ..model import LabModel

MARK = {"pending": ("…", "$text-muted"), "ok": ("✓", "bold $success"), "failed": ("✗", "bold $error"),
        "unjudged": ("?", "bold $warning")}
VERDICT = {"ok": "bold $success", "failed": "bold $error", "unknown": "bold $warning", "pending": "bold"}
NO_SCENARIO = ("No scenario is playing: `nslab up --scenario NAME` plays one here, "
               "its expectations decided as the run goes.")


def lesson_lines(model: LabModel, lesson: Lesson | None, width: int) -> list[Content]:
    """The tab's lines, the one to pin first: now, the phase or the end, and the verdict."""
    checks = list(model.expectations.values())
    if lesson is None and not checks:
        return [Content(NO_SCENARIO)]
    now = model.now
    is_ended = ended(lesson, now, model.drained or model.ended)
    names = [c.name for c in checks]
    if lesson is not None:  # expectations the scenario names that no model entry has yet
        names += [n for n in lesson.expectations if n not in model.expectations]
    statuses = [model.expectations[n].status if n in model.expectations else "pending" for n in names]
    text, tag = verdict(statuses, is_ended)
    head = [("verdict ", "$text-muted"), (text, VERDICT[tag])]
    if lesson is not None:
        # run.end: the scenario is over and every check decided ("ended": the timeline is, while
        # consumers drain and the last checks decide).
        state = (("scenario finished", "bold $warning") if model.ended
                 else ("ended", "bold $warning") if is_ended
                 else (f"phase: {phase_at(lesson, now)}", "bold"))
        head[:0] = [("now ", "$text-muted"), (clock(now), "bold"), " · ", state, " · "]
    lines = [Content.assemble(*head)]
    count = {status: statuses.count(status) for status in MARK}
    lines.append(Content(f"{count['ok']} held, {count['failed']} failed"
                         + (f", {count['unjudged']} could not be judged" if count["unjudged"] else "")
                         + f", {count['pending']} pending"))
    for name, status in zip(names, statuses):
        mark, style = MARK[status]
        check = model.expectations.get(name)
        detail = check.detail if check is not None else ""
        at = f" (at {check.t:.1f}s)" if check is not None and check.t is not None else ""
        lines.append(Content.assemble((f" {mark} ", style), (name, "bold"), f"  {detail}{at}" if detail else ""))
    if lesson is not None:
        bar = ruler(lesson, now, max(10, width - 15 - len(clock(lesson.duration))))
        if bar:
            lines.append(Content.assemble(("timeline 0s ", "$text-muted"), (bar, "$accent"),
                                          (f" {clock(lesson.duration)}", "$text-muted")))
        lines.append(Content.assemble(("Lesson ", "bold $accent"), (lesson.name, "bold"),
                                      ": " if lesson.teaches else "", lesson.teaches))
        for at, what in lesson.steps:
            done = at <= now
            lines.append(Content.assemble(("  ✓ " if done else "    ", "$success"), (f"{clock(at):>6} ", "$text-muted"),
                                          (what, "bold" if done else "")))
    return lines


class ChecksView(Vertical):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._shown: tuple = ()
        self.lesson: Lesson | None = None
        self.model: LabModel | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="checks-head")
        with VerticalScroll(id="checks-body"):
            yield Static()

    def on_mount(self) -> None:
        self.watch(self.query_ancestor(TabbedContent), "active", self._brought_forward, init=False)

    def _brought_forward(self, active: str) -> None:
        # The tab came forward (4, or a scenario starting): PageDown, End and the arrows scroll it,
        # rather than whatever had the keys before (the NameServers' tabs, a panel). Once shown.
        if active == self.parent.id:
            self.call_after_refresh(self.query_one("#checks-body").focus)

    def on_resize(self) -> None:  # the timeline is as wide as the widget: drawn again at once
        if self.model is not None:
            self.show(self.model)

    def show(self, model: LabModel) -> None:
        self.model = model
        body = self.query_one("#checks-body")
        if self.app.focused is None and self.screen is self.app.screen:  # 4 again: the keys come back
            body.focus()
        width = (body.size.width or self.app.size.width) - 1  # the scrollbar's column
        lines = lesson_lines(model, self.lesson, width)
        key = tuple(line.plain for line in lines)
        if self._shown == key:
            return
        self._shown = key
        head, *rest = lines
        self.query_one("#checks-head", Static).update(head)
        body.query_one(Static).update(Content("\n").join(rest))
