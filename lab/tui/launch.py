"""Opening the Textual lab: a live cluster (`nslab`, `nslab up`, `nslab workshop up`), a recorded run
(`nslab replay`) or a lab another process runs (`nslab attach`). Textual is imported here only when a screen opens: headless runs need not pay for it."""

from __future__ import annotations

TUI_SPEED = 4.0  # the UI's default: a 120 s expiry takes 30 s on screen
# `nslab serve`'s tabs at once: each is an `nslab attach` process of ~45 MB, so ~1.1 GB at the cap,
# room for a class on a laptop without letting whoever reaches the page exhaust its memory.
MAX_SESSIONS = 24


def run_tui(config, options, play=None) -> int:
    """The live lab on screen until the user quits; the app's exit code."""
    from .app import LabApp
    from .guest import LiveLab
    from .responsive import Responsive

    if options.speed is None:
        options.speed = TUI_SPEED
    app = LabApp(LiveLab(config, options, play), Responsive())
    app.run()
    return app.return_code or 0


def run_replay(records: list[dict], speed: float, warning: str | None = None) -> int:
    """A recorded event log on screen, in the same views; `warning` says what is wrong with a
    damaged log (lab.tui.replay.open_log)."""
    from .app import LabApp
    from .replay import Replay
    from .responsive import Responsive

    app = LabApp(Replay(records, speed=speed, warning=warning), Responsive())
    app.run()
    return app.return_code or 0


def run_attach(info: dict, control: bool) -> int:
    """A lab another process runs (its info from lab.control.live.pick_lab), on screen until the
    user quits; the lab runs on."""
    from .app import LabApp
    from .attach import AttachedLab
    from .responsive import Responsive

    app = LabApp(AttachedLab(info, control=control), Responsive())
    app.run()
    return app.return_code or 0
