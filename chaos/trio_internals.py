"""The only place nslab reaches into trio's private internals, each use guarded.

Two shortcuts need them: seeded scheduling (a simulated run repeats byte for byte, a test's
verdict replays from its seed) and the virtual clock's timers, which run inside trio's loop while
no task is runnable. A trio release that moves either must fail loudly here — and in
tests/chaos/test_trio_internals.py — rather than quietly make runs differ from seed to seed.
"""

from __future__ import annotations

import trio

_run = trio._core._run


def check() -> None:
    """Raise if this trio lacks what nslab relies on (its tests call this on every upgrade)."""
    missing = [name for name in ("_ALLOW_DETERMINISTIC_SCHEDULING", "_r", "GLOBAL_RUN_CONTEXT") if not hasattr(_run, name)]
    if missing:
        raise RuntimeError(f"trio {trio.__version__} lacks {', '.join(missing)}: simulated runs would not "
                           "repeat; use the trio version pyproject.toml names")


def deterministic_scheduling(seed: int) -> None:
    """trio shuffles same-moment wakeups with a module RNG; this switch sorts them by task creation
    before a seeded shuffle (what pytest-trio and Hypothesis use for reproducible runs)."""
    check()
    _run._ALLOW_DETERMINISTIC_SCHEDULING = True
    _run._r.seed(seed)


def current_runner():
    """The running loop's runner, for its run queue and next deadline; None where this trio keeps
    them elsewhere (the virtual clock then runs one timer batch per pass of trio's loop: slower,
    the same results)."""
    runner = getattr(_run.GLOBAL_RUN_CONTEXT, "runner", None)
    if hasattr(runner, "runq") and hasattr(getattr(runner, "deadlines", None), "next_deadline"):
        return runner
    return None
