"""The only place nslab reaches into trio's private internals, each use guarded.

Two shortcuts need them: seeded scheduling (a simulated run repeats byte for byte, a test's
verdict replays from its seed) and the virtual clock's timers, which run inside trio's loop while
no task is runnable. A trio release that moves either must fail loudly here — and in
tests/chaos/test_trio_internals.py — rather than quietly make runs differ from seed to seed.
"""

from __future__ import annotations

import random

import trio

_run = trio._core._run

# Seeded from inside a trio task (a cluster's run: lab/run/runner.py), the seed's draws are the run's
# alone: (that task, the nurseries it had open then). Its run is itself and the tasks in nurseries
# it opens from then on, theirs, and so on down.
_run_root: tuple[trio.lowlevel.Task, tuple[trio.Nursery, ...]] | None = None
_others = random.Random()  # shuffles the tasks outside the run: never a draw of the run's


def check() -> None:
    """Raise if this trio lacks what nslab relies on (its tests call this on every upgrade)."""
    missing = [name for name in ("_ALLOW_DETERMINISTIC_SCHEDULING", "_r", "GLOBAL_RUN_CONTEXT") if not hasattr(_run, name)]
    if not missing and not isinstance(_run._r, random.Random):
        missing = ["_r as a random.Random"]
    if missing:
        raise RuntimeError(f"trio {trio.__version__} lacks {', '.join(missing)}: simulated runs would not "
                           "repeat; use the trio version pyproject.toml names")


def deterministic_scheduling(seed: int) -> None:
    """trio shuffles same-moment wakeups with a module RNG; this switch sorts them by task creation
    before a seeded shuffle (what pytest-trio and Hypothesis use for reproducible runs).

    Called from inside a trio task, it also makes the seed's draws that task's run's alone: the
    task and what runs in the nurseries it opens from then on (the cluster's nodes, and what their
    tasks, or callbacks of the virtual clock, start there). Any other task — in a nursery it had
    open already (`nslab run`'s signal watcher, the TUI's control server, and what that server
    starts whenever `nslab chaos` asks, in real time) or trio's own — is outside: in a batch, the
    tasks outside are shuffled apart, by an RNG of their own, and go before or after the run's.
    They neither use a draw of the run's nor come between its tasks, so the run's order is a
    function of the seed and the run alone, whatever shares its trio loop and however a guest
    run's batches fall: a TUI's run, `nslab run` and a headless run give the same bytes."""
    global _run_root
    check()
    _run._ALLOW_DETERMINISTIC_SCHEDULING = True
    _run._r.seed(seed)
    _others.seed(seed)
    _run._r.shuffle = _shuffle  # an instance attribute: the same object pytest-trio and Hypothesis seed
    try:
        root = trio.lowlevel.current_task()
    except RuntimeError:  # outside trio: every task of the trio run to come is the run's
        _run_root = None
        return
    _run_root = (root, tuple(root.child_nurseries))


def _in_run(task: trio.lowlevel.Task, root: trio.lowlevel.Task, before: tuple[trio.Nursery, ...]) -> bool:
    while task is not root:
        nursery = task.parent_nursery
        if nursery is None or any(nursery is n for n in before):  # trio's init task; the root's old nurseries
            return False
        task = nursery.parent_task
    return True


def _shuffle(batch: list) -> None:
    """trio's `_r.shuffle(batch)`, for a batch sorted by task creation: the run's tasks in the order
    the seed's draws give them, exactly as if the batch held nothing else; the others before or after.
    (Few batches hold more than one task — most moments wake one — so the walks up are few.)"""
    run_root = _run_root
    if run_root is not None and len(batch) > 1:
        root, before = run_root
        ours = [_in_run(task, root, before) for task in batch]
        if not all(ours):
            run = [task for task, in_run in zip(batch, ours) if in_run]
            outside = [task for task, in_run in zip(batch, ours) if not in_run]
            random.Random.shuffle(_run._r, run)
            _others.shuffle(outside)
            batch[:] = outside + run if _others.random() < 0.5 else run + outside
            return
    random.Random.shuffle(_run._r, batch)


def current_runner():
    """The running loop's runner, for its run queue and next deadline; None where this trio keeps
    them elsewhere (the virtual clock then runs one timer batch per pass of trio's loop: slower,
    the same results)."""
    runner = getattr(_run.GLOBAL_RUN_CONTEXT, "runner", None)
    if hasattr(runner, "runq") and hasattr(getattr(runner, "deadlines", None), "next_deadline"):
        return runner
    return None
