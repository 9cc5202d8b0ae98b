"""Every checker is proven: it fails on the untouched starter (or a missing prediction) for a
visible reason, and passes on the reference solution. Plus the CLI a learner types."""

import subprocess
import sys
from pathlib import Path

import pytest

import nameserver.routes
from lab.control import scenarios
from lab.workshop import check as checking
from lab.workshop import generated
from lab.workshop.course import COURSE, get
from lab.workshop.override import WorkshopError, load_function, swapped

NSLAB = str(Path(sys.executable).with_name("nslab"))


def quiet(_line):
    pass


@pytest.mark.parametrize("exercise", COURSE, ids=lambda e: e.name)
def test_checker_passes_on_the_solution(exercise):
    """What CI proves, as a learner types it: `nslab workshop check N --solution`."""
    result = nslab("check", str(exercise.number), "--solution")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"exercise {exercise.number}: PASSED" in result.stdout


@pytest.mark.parametrize("exercise", [e for e in COURSE if e.kind == "build"], ids=lambda e: e.name)
def test_checker_fails_on_the_starter_in_tests_and_in_the_cluster(exercise):
    lines = []
    with generated.shrinking(False):  # failing is what is proven here, not the shortest case
        outcome = checking.check(exercise, file=exercise.starter, say=lines.append)
    assert not outcome.ok
    assert outcome.tests_ok is False, "\n".join(lines)
    # The naive starter must show its bug in the scenario too, not only in a unit test.
    assert outcome.scenario_ok is False, "\n".join(lines)


@pytest.mark.parametrize("exercise", [e for e in COURSE if e.kind == "watch"], ids=lambda e: e.name)
def test_watching_checker_asks_for_a_prediction_first(exercise):
    lines = []
    assert not checking.check(exercise, say=lines.append).ok
    assert "predict first" in lines[0] and "--predict" in lines[1]


def test_a_wrong_prediction_fails_and_tells_the_measured_value():
    lines = []
    outcome = checking.check(get(1), prediction=30, say=lines.append)
    assert not outcome.ok and outcome.scenario_ok
    assert 110 <= outcome.measured <= 130
    assert "not quite" in lines[-2]


def test_at_least_three_stateful_building_exercises_beside_the_warm_ups():
    stateful = [e for e in COURSE if e.stateful]
    assert len(stateful) >= 3 and all(e.kind == "build" and len(e.seeds) >= 3 for e in stateful)
    assert any(e.kind == "build" and not e.stateful for e in COURSE), "the short exercises stay, as warm-ups"


@pytest.mark.parametrize("exercise", [e for e in COURSE if e.kind == "build"], ids=lambda e: e.name)
def test_no_brief_points_to_the_answer(exercise):
    """A building exercise's texts name the interfaces, never the module holding the lab's own answer."""
    module = exercise.target.split(":")[0]
    texts = [exercise.text("brief"), exercise.text("hints"), exercise.starter.read_text(),
             nslab("show", str(exercise.number), "--hints").stdout]
    for text in texts:
        assert module not in text and module.replace(".", "/") not in text, f"{exercise.name} names {module}"


def test_the_swap_is_undone_even_when_the_check_raises(tmp_path):
    original = nameserver.routes.expired_brokers
    with pytest.raises(RuntimeError):
        with swapped("nameserver.routes:expired_brokers", lambda *a: []):
            assert nameserver.routes.expired_brokers is not original
            raise RuntimeError
    assert nameserver.routes.expired_brokers is original


def test_a_broken_learner_file_is_reported_not_crashed(tmp_path):
    bad = tmp_path / "mine.py"
    bad.write_text("def expired_brokers(:\n")
    with pytest.raises(WorkshopError, match="cannot load it: SyntaxError"):
        load_function(bad, "expired_brokers")
    bad.write_text("def something_else(): pass\n")
    with pytest.raises(WorkshopError, match="defines no function expired_brokers"):
        load_function(bad, "expired_brokers")


def test_every_exercise_has_a_brief_with_questions_and_hidden_answers():
    for exercise in COURSE:
        assert "## Questions" in exercise.text("brief"), exercise.name
        assert exercise.text("answers").strip(), exercise.name
        assert exercise.solution.exists(), exercise.name
        if exercise.kind == "build":
            assert exercise.text("hints").strip() and exercise.starter.exists(), exercise.name


def nslab(*args, cwd=None):
    # A guard against a hang, not a time limit: a solution's check runs up to 30 scenarios, and a
    # loaded machine may take many minutes of wall time for them.
    return subprocess.run([NSLAB, "workshop", *args], capture_output=True, text=True, cwd=cwd, timeout=1800)


def test_cli_list_show_start_check(tmp_path):
    listing = nslab("list").stdout.splitlines()
    assert len(listing) == len(COURSE) >= 8
    assert [line.split()[0] for line in listing] == [str(e.number) for e in COURSE]

    shown = nslab("show", "5").stdout
    assert "expired_brokers" in shown and "(answers: --answers)" in shown
    assert get(5).text("answers").strip() not in shown
    assert get(5).text("answers").strip() in nslab("show", "5", "--answers").stdout

    started = nslab("start", "5", cwd=tmp_path)
    mine = tmp_path / "workshop" / "05-expiry-scan.py"
    assert started.returncode == 0 and mine.read_text() == get(5).starter.read_text()
    mine.write_text(mine.read_text() + "\n# the learner's own edit\n")
    assert nslab("start", "5", cwd=tmp_path).returncode == 0 and "already there" in nslab("start", "5", cwd=tmp_path).stdout
    assert mine.read_text().endswith("# the learner's own edit\n"), "start keeps the learner's work"
    # `check 5` judges the file `start` wrote (the untouched starter: not yet); a solution passing
    # through the CLI is test_checker_passes_on_the_solution's (judged once, not twice).
    checked = nslab("check", "5", cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f"checking expired_brokers (function) from {Path('workshop') / '05-expiry-scan.py'}" in checked.stdout
    assert "exercise 5: NOT YET" in checked.stdout


def test_cli_check_without_starting_says_what_to_do(tmp_path):
    result = nslab("check", "6", cwd=tmp_path)
    assert result.returncode == 2 and "nslab workshop start 6" in result.stderr


@pytest.mark.parametrize("exercise", [e for e in COURSE if e.stateful], ids=lambda e: e.name)
def test_a_stateful_solution_is_swapped_in_where_the_lab_builds_its_own(exercise):
    import importlib
    module_name, attr = exercise.target.split(":")
    module = importlib.import_module(module_name)
    lab_own = getattr(module, attr)
    with checking.overridden(exercise, exercise.solution):
        swapped_in = getattr(module, attr)
        assert swapped_in is not lab_own
    assert getattr(module, attr) is lab_own, "the lab's own comes back"


@pytest.mark.parametrize("exercise", [e for e in COURSE if e.kind == "build"], ids=lambda e: e.name)
def test_a_seeded_scenario_draws_its_faults_from_the_seed(exercise):
    """Maelstrom's nemesis: every scenario of a building exercise is a template whose fault moves,
    over the exercise's seeds (at least 10), between nodes, kinds and times; every field of the
    template is filled, and the same seed draws the same fault."""
    assert len(exercise.seeds) >= 10
    for path in exercise.scenario_paths:
        nemesis = exercise.nemesis_of(path)
        assert "${" in path.read_text() and nemesis is not None, f"{path.name}: fixed faults, drawn from no seed"
        draws = [nemesis(seed) for seed in exercise.seeds]
        assert draws == [nemesis(seed) for seed in exercise.seeds], "a seed draws one fault"
        assert len({d["summary"] for d in draws}) == len(draws), f"{path.name}: every seed a different fault"
        for key in draws[0]:
            if key != "summary" and not key.endswith(("_at", "_start", "_end", "end", "at")):
                continue
            assert len({d[key] for d in draws}) > 1, f"{path.name}: {key} is the same on every seed"
        for seed in exercise.seeds:
            text, drawn, _ = exercise.seeded(path, seed)
            assert "${" not in text and drawn == nemesis(seed)["summary"]
            scenarios.prepare(str(path), seed=seed, text=text)  # a valid scenario
