"""Judging a learner's work: unit tests, then the exercise's scenarios with its expectations.

A building exercise passes when the learner's code passes the unit tests and every scenario, run
with that code swapped into the lab, is valid on every seed. A watching exercise passes when the
scenario is valid and the learner's prediction is within the stated tolerance of what the run
measured. Feedback is one message per cause: a failed test says its one rule; the learner's own
traceback is shown once per place it raised; a scenario's results are printed for the first seed,
and a later seed only adds what failed there.
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
from . import remote
from .override import ContractError, LearnerErrors, WorkshopError, describe, swapped


def work_file(exercise: Exercise, directory: Path = DEFAULT_DIR) -> Path:
    return directory / f"{exercise.name}.py"


@dataclass
class Outcome:
    ok: bool
    tests_ok: bool | None = None  # None: no tests ran
    scenario_ok: bool | None = None  # None: the scenario did not run
    measured: float | None = None
    failed_tests: tuple[str, ...] = ()
    raised: bool = False  # the learner's code raised at least once


@contextmanager
def learner_member(exercise: Exercise, path: Path, say: Callable[[str], None] = print):
    """The learner's function or class, running in a process of its own (remote.py); what it
    printed is shown afterwards as theirs, never as the checker's."""
    member, child = remote.load(path, exercise.function, exercise.target)
    try:
        yield member
    finally:
        for line in child.printed():
            say(f"  your code printed: {line}")
        child.close()


def replacement(exercise: Exercise, member: Callable, errors: LearnerErrors | None = None) -> Callable:
    """What is swapped into the lab for the learner's member (an adapter, for a stateful class)."""
    return exercise.adapt(member, errors) if exercise.adapt else member


@contextmanager
def quiet_nameservers():
    """A learner's bug can make every NameServer log a warning (or a traceback) per request; the
    check shows the learner's traceback once, and the expectations say what went wrong."""
    logger = logging.getLogger("nameserver")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def run_scenario(path: Path, say: Callable[[str], None], *, seed: int | None = None,
                 events_path: Path | None = None, only_failures: bool = False, text: str | None = None,
                 drawn: str | None = None, judges: tuple[Callable[[], tuple[str, bool | None, str]], ...] = ()):
    """One run; `text`: the scenario's text with its seeded fault filled in (`drawn` says what it
    is); `judges`: more verdicts on the run, each (name, ok | None for nothing to judge, detail)."""
    prepared = scenarios.prepare(str(path), seed=seed, text=text)
    lines: list[str] = []
    with quiet_nameservers():
        verdict = scenarios.run(prepared, RunOptions(sim=True, events_path=events_path),
                                on_result=lambda r: lines.append(f"  {r.mark} {r.name}: {r.detail}")
                                if not (only_failures and r.ok) else None)
    ok = verdict.exit_code == 0
    for judge in judges:  # an expectation that saw nothing to judge fails, never passes
        name, held, detail = judge()
        ok = ok and held is True
        if not (only_failures and held is True):
            lines.append(f"  {'ok  ' if held else 'FAIL'} {name}: {detail}"
                         + ("" if held is not None else " (could not be judged: that fails the check)"))
    where = f"seed {prepared.seed}" + (f": {drawn}" if drawn else "")
    if only_failures and ok:
        say(f"scenario {prepared.scenario.name}, {where}: valid")
        return ok
    say(f"scenario {prepared.scenario.name} ({where}, simulated time):")
    for line in lines:
        say(line)
    if verdict.error:
        say(f"  the run could not be judged: {verdict.error}")
    return ok


def _frames(error: BaseException):
    import traceback
    return traceback.extract_tb(error.__traceback__)


def _at_the_call(error: BaseException) -> bool:
    """A TypeError raised by the call into the learner's code (remote.py or an adapter), not by a
    test's own use of what came back."""
    frames = _frames(error)
    return bool(frames) and Path(frames[-1].filename).name in ("remote.py", "override.py") or \
        "argument" in str(error)


def _test_frame(error: BaseException) -> str:
    frames = [f for f in _frames(error) if Path(f.filename).parent.name == "workshop"]
    return f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""


class _Reporter:
    """Prints the learner's tracebacks as they first appear, each cause once."""

    def __init__(self, errors: LearnerErrors, say: Callable[[str], None]):
        self.errors, self.say, self.shown = errors, say, 0

    def flush(self) -> None:
        blocks = self.errors.report()
        for block in blocks[self.shown:]:
            for line in block.splitlines():
                self.say("    " + line)
        self.shown = len(blocks)


def check_build(exercise: Exercise, path: Path, say: Callable[[str], None], *, scenarios_too: bool = True,
                only: frozenset[str] | None = None) -> Outcome:
    with learner_member(exercise, path, say) as member:
        return _check_build(exercise, path, member, say, scenarios_too, only)


def _check_build(exercise: Exercise, path: Path, member, say: Callable[[str], None], scenarios_too: bool,
                 only: frozenset[str] | None = None) -> Outcome:
    errors = LearnerErrors(path)
    member = errors.wrap(member)
    reporter = _Reporter(errors, say)
    kind = "class" if exercise.stateful else "function"
    say(f"checking {exercise.function} ({kind}) from {path}")
    say("unit tests:")
    failed = []
    for test in exercise.tests:
        if only is not None and test.__name__ not in only:
            continue
        blocked = [t.__name__ for t in getattr(test, "needs", ()) if t.__name__ in failed]
        if blocked:  # the same cause again under this rule's name: said once, by the rule it broke
            failed.append(test.__name__)
            say(f"  skip {test.__name__}: fix {', '.join(blocked) if len(blocked) <= 2 else 'the tests above'} first")
            continue
        raised_before = errors.total
        try:
            said = test(member)
        except AssertionError as e:
            failed.append(test.__name__)
            say(f"  FAIL {test.__name__}: {e}")
        except Exception as e:
            failed.append(test.__name__)
            if errors.total > raised_before:  # the learner's code raised: their traceback follows
                say(f"  FAIL {test.__name__}: your code raised {describe(e)}")
            elif isinstance(e, (TypeError, ContractError)) and _at_the_call(e):
                # the call itself failed: a signature that is not the brief's
                say(f"  FAIL {test.__name__}: the test could not call your code as the brief says: {describe(e)}")
            else:  # the test's own code raised, over what the learner's returned: not blamed on them
                where = _test_frame(e)
                say(f"  FAIL {test.__name__}: the check itself raised {describe(e)}{where} — in the test, not in "
                    f"your code: what your code returned may have a shape the test did not expect; if it is "
                    f"what the brief asks for, the checker is wrong (please report it)")
        else:
            say(f"  ok   {test.__name__}" + (f": {said}" if isinstance(said, str) else ""))  # a measured cost
        reporter.flush()
    # The scenarios run even after a failed test: the cluster shows what the bug does. Each seed in
    # turn; the first invalid run ends the check (its results are the message).
    scenario_ok = None if not scenarios_too else True
    first = next((t for t in failed), None)
    if scenarios_too and first is not None:  # one cause, one message: the scenarios' failures follow
        say(f"the scenarios run with what {first} found: a failure below most likely follows from it "
            f"(fix that first)")
    with swapped(exercise.target, replacement(exercise, member, errors)):
        for path_ in exercise.scenario_paths if scenarios_too else ():
            for i, seed in enumerate(exercise.seeds):
                text, drawn, judges = exercise.seeded(path_, seed)
                ok = run_scenario(path_, say, seed=seed, only_failures=i > 0, text=text, drawn=drawn, judges=judges)
                reporter.flush()
                if not ok:
                    scenario_ok = False
                    break
            if not scenario_ok:
                break
    tests_ok = not failed
    return Outcome(tests_ok and scenario_ok is True and only is None, tests_ok, scenario_ok, failed_tests=tuple(failed),
                   raised=bool(errors.seen))


def check_watch(exercise: Exercise, prediction: float | None, say: Callable[[str], None]) -> Outcome:
    question = exercise.predict
    if prediction is None:
        say(f"predict first: {question.question}")
        say(f"  then: nslab workshop check {exercise.number} --predict NUMBER  (in {question.unit}; "
            f"within ±{question.tolerance:g} {question.unit} of the measured value counts)")
        return Outcome(False)
    with tempfile.TemporaryDirectory() as tmp:
        events = Path(tmp) / "events.msgpack"
        valid = run_scenario(exercise.scenario_path, say, events_path=events)
        measured = question.measure(list(read_events(events))) if events.exists() else None
    if measured is None:
        say("the run did not show the moment this exercise measures")
        return Outcome(False, scenario_ok=valid)
    close = abs(measured - prediction) <= question.tolerance
    say(f"{question.question}\n  you predicted {prediction:g} {question.unit}; the run measured "
        f"{measured:.1f} {question.unit} (within ±{question.tolerance:g} counts): "
        f"{'close enough' if close else 'not quite — watch it in the TUI'}")
    return Outcome(close and valid, scenario_ok=valid, measured=measured)


def check(exercise: Exercise, *, file: Path | None = None, solution: bool = False,
          prediction: float | None = None, directory: Path = DEFAULT_DIR,
          say: Callable[[str], None] = print, scenarios_too: bool = True,
          only: frozenset[str] | None = None) -> Outcome:
    """Raises WorkshopError for what the learner must fix before anything can be checked.
    scenarios_too=False: a building exercise's unit tests only (never a pass); `only`: these unit
    tests only, by name (what a known-wrong answer's test needs to see; never a pass either)."""
    if exercise.kind == "watch":
        if solution:
            prediction = float(exercise.solution.read_text().split()[0])
        outcome = check_watch(exercise, prediction, say)
    else:
        path = exercise.solution if solution else (file or work_file(exercise, directory))
        if not path.exists() and not solution and file is None:
            raise WorkshopError(f"{path}: not there yet — run `nslab workshop start {exercise.number}` first")
        outcome = check_build(exercise, path, say, scenarios_too=scenarios_too, only=only)
    say(f"exercise {exercise.number}: {'PASSED' if outcome.ok else 'NOT YET'}")
    return outcome


def overridden(exercise: Exercise, path: Path | None):
    """The learner's (or the solution's) code swapped in, for watching it in the TUI."""
    if path is None or exercise.kind == "watch":
        return nullcontext()
    return _overridden(exercise, path)


@contextmanager
def _overridden(exercise: Exercise, path: Path):
    with learner_member(exercise, path) as member, swapped(exercise.target, replacement(exercise, member)):
        yield


__all__ = ["DEFAULT_DIR", "Outcome", "WorkshopError", "check", "overridden", "work_file"]
