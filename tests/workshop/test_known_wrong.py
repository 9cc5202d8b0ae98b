"""Every exercise's checker is proven against known-wrong answers: each fails, and for the right
reason. A file in wrong/NN-slug/ states what must show in its docstring:

    expect-fail: NAME      a unit test or an expectation of that name FAILs
    expect-not: NAME       that one does not (a wrong answer gets one reason, not a misleading one)
    expect-text: TEXT      the check's output says TEXT (the learner's own traceback, ...)
    expect-not-text: TEXT  it does not

Watching exercises: the misconceptions their questions exist to correct fail as predictions.
"""

from pathlib import Path

import pytest

from lab.workshop import check as checking
from lab.workshop import generated
from lab.workshop.course import COURSE, get
from lab.workshop.override import WorkshopError

WRONG = Path(__file__).parent / "wrong"
CASES = sorted(p for p in WRONG.glob("*/*.py") if not p.name.startswith("_"))


def expectations(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text().split('"""')[1].splitlines():
        key, sep, value = line.partition(": ")
        if sep and key in ("expect-fail", "expect-not", "expect-text", "expect-not-text"):
            found.setdefault(key, []).append(value.strip())
    return found


def exercise_of(path: Path):
    return get(int(path.parent.name[:2]))


def with_what_they_need(exercise, names: list[str]) -> frozenset[str]:
    """The named unit tests and every test they build on (`needs`): a test whose foundation did not
    run would not be judged as the learner's check judges it."""
    by_name = {t.__name__: t for t in exercise.tests}
    todo, found = [by_name[n] for n in names if n in by_name], set()
    while todo:
        test = todo.pop()
        if test.__name__ not in found:
            found.add(test.__name__)
            todo += getattr(test, "needs", ())
    return frozenset(found)


def failed_in(lines: list[str]) -> list[str]:
    return [line.split(":", 1)[0].strip()[len("FAIL "):] for line in lines if line.strip().startswith("FAIL ")]


def seen_in_the_tests(lines: list[str], expected: dict[str, list[str]]) -> bool:
    """The unit tests' output already shows all an answer must: the scenarios (up to 30 runs of a
    wrong answer they do not catch) would add nothing to judge. Not when something must be absent:
    that is judged over the whole check."""
    output = "\n".join(lines)
    return not expected.get("expect-not-text") and \
        all(name in failed_in(lines) for name in expected.get("expect-fail", [])) and \
        all(text in output for text in expected.get("expect-text", []))


def test_every_building_exercise_has_known_wrong_answers():
    have = {p.parent.name for p in CASES}
    for exercise in COURSE:
        if exercise.kind == "build":
            assert exercise.name in have, f"no known-wrong answers for {exercise.name}"


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_known_wrong_answer_fails_for_its_reason(path, monkeypatch):
    monkeypatch.syspath_prepend(str(path.parent))  # a wrong answer may build on wrong/NN/_reference.py
    expected = expectations(path)
    assert expected, f"{path} states no expectation"
    lines: list[str] = []
    exercise = exercise_of(path)
    # A wrong answer whose reasons are all unit tests is judged by those tests alone (and the ones
    # they build on): the scenarios and the other tests cost seconds a wrong answer, and
    # test_workshop runs everything on every starter and solution; bench_workshop_catch.py says
    # which scenarios catch each wrong answer.
    tests_only = all(name.startswith("test_") for name in expected.get("expect-fail", [])) and \
        not expected.get("expect-text") and not expected.get("expect-not-text")
    only = with_what_they_need(exercise, expected.get("expect-fail", []) + expected.get("expect-not", [])) \
        if tests_only else None
    try:
        # Unshrunk: a failing case shows the reason as well as the shortest one does, and shrinking
        # was most of a wrong answer's check (test_a_learner_is_shown_the_shortest_case keeps it).
        with generated.shrinking(False):
            outcome = checking.check(exercise, file=path, say=lines.append, scenarios_too=False, only=only)
            if not tests_only and not seen_in_the_tests(lines, expected):
                # what must be said comes from the scenarios (or must be absent from them too)
                lines = []
                outcome = checking.check(exercise, file=path, say=lines.append)
    except WorkshopError as e:  # cannot be checked (exit 2): a failure too, with its message
        lines.append(str(e))
    else:
        assert not outcome.ok, "\n".join(lines)
    output = "\n".join(lines)
    assert not any(line.strip() == f"exercise {exercise.number}: PASSED" for line in lines), output
    failed = failed_in(lines)
    for name in expected.get("expect-fail", []):
        assert name in failed, f"{name} should fail:\n{output}"
    for name in expected.get("expect-not", []):
        assert name not in failed, f"{name} should not fail (a misleading reason):\n{output}"
    for text in expected.get("expect-text", []):
        assert text in output, f"{text!r} should be said:\n{output}"
    for text in expected.get("expect-not-text", []):
        assert text not in output, f"{text!r} should not be said:\n{output}"


@pytest.mark.parametrize("number, prediction", [
    (1, 130),  # expiry + a whole scan: the scan-only idea question 3 corrects
    (1, 30),   # the registration period
    (2, 120),  # the whole expiry, as if the clock started at the freeze
    (3, 30),   # as if running producers needed a NameServer
    (4, 120),  # the expiry alone, forgetting the heal's next registration
])
def test_a_misconception_fails_as_a_prediction(number, prediction):
    lines: list[str] = []
    outcome = checking.check(get(number), prediction=prediction, say=lines.append)
    assert not outcome.ok and outcome.scenario_ok, "\n".join(lines)
    assert "not quite" in "\n".join(lines)


def test_a_learner_is_shown_the_shortest_case():
    """The known-wrong tests skip shrinking; a learner's check does not: the failing life of a
    selector that compares lists as sets is shrunk to the few steps that show it."""
    path = WRONG / "11-nameserver-selector" / "compares-as-sets.py"
    exercise = exercise_of(path)
    shown = {}
    for shrink in (True, False):
        lines: list[str] = []
        with generated.shrinking(shrink):
            checking.check(exercise, file=path, say=lines.append, scenarios_too=False,
                           only=with_what_they_need(exercise, ["test_follows_4_9_8_on_generated_sequences"]))
        output = "\n".join(lines)
        heading = "the shortest sequence that shows it:" if shrink else "a sequence that shows it (not shrunk):"
        assert heading in output, output
        after = output.split(heading, 1)[1].splitlines()[1:]
        shown[shrink] = [line.strip() for line in after[:next((i for i, line in enumerate(after)
                                                               if not line.startswith("      ")), len(after))]]
    assert len(shown[True]) <= 4, "\n".join(shown[True])
    assert len(shown[True]) < len(shown[False]), f"shrunk {shown[True]}, first found {shown[False]}"
