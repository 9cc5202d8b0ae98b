"""The Checks tab as a lesson: what the scenario teaches, its fault timeline with a cursor at the
current time and the phase under way, each expectation pending / held / failed with its detail,
and the verdict."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ..lesson import Lesson, clock, ended, phase_at, ruler, verdict
from ..model import LabModel

MARK = {"pending": ("…", "$text-muted"), "ok": ("✓", "bold $success"), "failed": ("✗", "bold $error"),
        "unjudged": ("?", "bold $warning")}
VERDICT = {"ok": "bold $success", "failed": "bold $error", "unknown": "bold $warning", "pending": "bold"}
NO_SCENARIO = ("No scenario is playing: `nslab up --scenario NAME` plays one here, "
               "its expectations decided as the run goes.")


def lesson_lines(model: LabModel, lesson: Lesson | None, width: int) -> list[Content]:
    checks = list(model.expectations.values())
    if lesson is None and not checks:
        return [Content(NO_SCENARIO)]
    lines: list[Content] = []
    now = model.now
    is_ended = ended(lesson, now, model.drained or model.ended)
    if lesson is not None:
        lines.append(Content.assemble(("Lesson ", "bold $accent"), (lesson.name, "bold"),
                                      ": " if lesson.teaches else "", lesson.teaches))
        bar = ruler(lesson, now, max(10, width - 15 - len(clock(lesson.duration))))
        if bar:
            lines.append(Content.assemble(("timeline 0s ", "$text-muted"), (bar, "$accent"),
                                          (f" {clock(lesson.duration)}", "$text-muted")))
        # run.end: the scenario is over and every check decided ("ended": the timeline is, while
        # consumers drain and the last checks decide).
        state = (("scenario finished", "bold $warning") if model.ended
                 else ("ended", "bold $warning") if is_ended
                 else (f"phase: {phase_at(lesson, now)}", "bold"))
        lines.append(Content.assemble(("now ", "$text-muted"), (clock(now), "bold"), " · ", state))
        for at, what in lesson.steps:
            done = at <= now
            lines.append(Content.assemble(("  ✓ " if done else "    ", "$success"), (f"{clock(at):>6} ", "$text-muted"),
                                          (what, "bold" if done else "")))
    names = [c.name for c in checks]
    if lesson is not None:  # expectations the scenario names that no model entry has yet
        names += [n for n in lesson.expectations if n not in model.expectations]
    statuses = [model.expectations[n].status if n in model.expectations else "pending" for n in names]
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
    text, tag = verdict(statuses, is_ended)
    lines.append(Content.assemble(("verdict ", "$text-muted"), (text, VERDICT[tag])))
    return lines


class ChecksView(Static):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._shown: tuple = ()
        self.lesson: Lesson | None = None
        self.model: LabModel | None = None

    def on_resize(self) -> None:  # the timeline is as wide as the widget: drawn again at once
        if self.model is not None:
            self.show(self.model)

    def show(self, model: LabModel) -> None:
        self.model = model
        width = self.size.width or self.app.size.width
        lines = lesson_lines(model, self.lesson, width)
        key = tuple(line.plain for line in lines)
        if self._shown == key:
            return
        self._shown = key
        self.update(Content("\n").join(lines))
