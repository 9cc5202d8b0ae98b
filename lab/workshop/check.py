"""Judging a learner's work: unit tests, then the exercise's scenario with its expectations.

A building exercise passes when the learner's function passes the unit tests and the scenario,
run with that function swapped into the lab, is valid. A watching exercise passes when the
scenario is valid and the learner's prediction matches what the run measured.
"""

from __future__ import annotations

import logging
import tempfile
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lab.control import scenarios
from lab.events import read_events
from lab.run.runner import RunOptions

from . import DEFAULT_DIR
from .course import Exercise
from .override import WorkshopError, load_function, swapped


def work_file(exercise: Exercise, directory: Path = DEFAULT_DIR) -> Path:
    return directory / f"{exercise.name}.py"


@dataclass
class Outcome:
    ok: bool
    tests_ok: bool | None = None  # None: no tests ran
    scenario_ok: bool | None = None  # None: the scenario did not run
    measured: float | None = None


def learner_function(exercise: Exercise, path: Path) -> Callable:
    return load_function(path, exercise.function)


@contextmanager
def quiet_nameservers():
    """A learner's bug can make every NameServer log a warning per request; the expectations
    already say what went wrong, once."""
    logger = logging.getLogger("nameserver")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def run_scenario(exercise: Exercise, say: Callable[[str], None], events_path: Path | None = None):
    prepared = scenarios.prepare(str(exercise.scenario_path))
    say(f"scenario {prepared.scenario.name} (seed {prepared.seed}, simulated time):")
    with quiet_nameservers():
        verdict = scenarios.run(prepared, RunOptions(sim=True, events_path=events_path),
                                on_result=lambda r: say(f"  {r.mark} {r.name}: {r.detail}"))
    if verdict.error:
        say(f"  the run could not be judged: {verdict.error}")
    return verdict


def check_build(exercise: Exercise, path: Path, say: Callable[[str], None]) -> Outcome:
    function = learner_function(exercise, path)
    say(f"checking {exercise.function}() from {path}")
    say("unit tests:")
    failures = 0
    for test in exercise.tests:
        try:
            test(function)
        except Exception as e:  # an AssertionError, or the learner's code raising: both a failed test
            failures += 1
            detail = str(e) if isinstance(e, AssertionError) else f"{type(e).__name__}: {e}"
            say(f"  FAIL {test.__name__}: {detail}")
        else:
            say(f"  ok   {test.__name__}")
    # The scenario runs even after a failed test: the cluster shows what the bug does.
    with swapped(exercise.target, function):
        verdict = run_scenario(exercise, say)
    return Outcome(failures == 0 and verdict.exit_code == 0, failures == 0, verdict.exit_code == 0)


def check_watch(exercise: Exercise, prediction: float | None, say: Callable[[str], None]) -> Outcome:
    question = exercise.predict
    if prediction is None:
        say(f"predict first: {question.question}")
        say(f"  then: nslab workshop check {exercise.number} --predict NUMBER  (in {question.unit}; "
            f"within {question.tolerance:g} counts)")
        return Outcome(False)
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "events.msgpack"
        verdict = run_scenario(exercise, say, events)
        measured = question.measure(list(read_events(events))) if events.exists() else None
    if measured is None:
        say("the run did not show the moment this exercise measures")
        return Outcome(False, scenario_ok=verdict.exit_code == 0)
    close = abs(measured - prediction) <= question.tolerance
    say(f"{question.question}\n  you predicted {prediction:g} {question.unit}; the run measured "
        f"{measured:.1f} {question.unit}: {'close enough' if close else 'not quite — watch it in the TUI'}")
    return Outcome(close and verdict.exit_code == 0, scenario_ok=verdict.exit_code == 0, measured=measured)


def check(exercise: Exercise, *, file: Path | None = None, solution: bool = False,
          prediction: float | None = None, directory: Path = DEFAULT_DIR,
          say: Callable[[str], None] = print) -> Outcome:
    """Raises WorkshopError for what the learner must fix before anything can be checked."""
    if exercise.kind == "watch":
        if solution:
            prediction = float(exercise.solution.read_text().split()[0])
        outcome = check_watch(exercise, prediction, say)
    else:
        path = exercise.solution if solution else (file or work_file(exercise, directory))
        if not path.exists() and not solution and file is None:
            raise WorkshopError(f"{path}: not there yet — run `nslab workshop start {exercise.number}` first")
        outcome = check_build(exercise, path, say)
    say(f"exercise {exercise.number}: {'PASSED' if outcome.ok else 'NOT YET'}")
    return outcome


def overridden(exercise: Exercise, path: Path | None):
    """The learner's (or the solution's) function swapped in, for watching it in the TUI."""
    if path is None or exercise.kind == "watch":
        return nullcontext()
    return swapped(exercise.target, learner_function(exercise, path))


__all__ = ["DEFAULT_DIR", "Outcome", "WorkshopError", "check", "overridden", "work_file"]
