"""Which of the workshop's checks catch each known-wrong answer: the unit and property tests, the
scenarios (every scenario of its exercise on every seed), or both. Issue 37's complaint was that
scenarios caught few of the answers the tests rejected; this prints, per answer, the tests that
failed and the seeds whose run was invalid (with the expectations that failed there), then the
catch rates. A figure, not a test: nothing here fails on what it finds.

    .venv/bin/python benchmarks/bench_workshop_catch.py [--exercise N ...] [--every-seed] [--starters]

By default an answer's scenarios stop at its first invalid run, as a check does ("caught or not":
what `make bench` runs); --every-seed runs every scenario on every seed, to count the seeds that
catch each answer (several times the CPU).
"""

from __future__ import annotations

import argparse
import resource
import time
from collections import Counter
from pathlib import Path

from _common import ROOT, title

from lab.workshop import generated
from lab.workshop.check import _check_build, learner_member, replacement, run_scenario
from lab.workshop.course import COURSE, get
from lab.workshop.override import LearnerErrors, WorkshopError, swapped

WRONG = ROOT / "tests" / "workshop" / "wrong"


def cpu_seconds() -> float:
    """This process's and its finished children's (the learners' processes) user + system time."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def judge(exercise, path: Path, first: bool) -> dict:
    """One answer: the tests it fails, and for every scenario and seed whether the run was valid."""
    row = {"tests": (), "runs": 0, "invalid": [], "expectations": Counter(), "load": None}
    quiet = lambda _line: None  # noqa: E731
    try:
        # caught or not is the question, not the shortest case: no shrinking (most of a check's CPU)
        with generated.shrinking(False), learner_member(exercise, path, quiet) as member:
            row["tests"] = _check_build(exercise, path, member, quiet, scenarios_too=False).failed_tests
            errors = LearnerErrors(path)
            with swapped(exercise.target, replacement(exercise, errors.wrap(member), errors)):
                for scenario in exercise.scenario_paths:
                    for seed in exercise.seeds:
                        text, drawn, judges = exercise.seeded(scenario, seed)
                        lines: list[str] = []
                        row["runs"] += 1
                        if not run_scenario(scenario, lines.append, seed=seed, text=text, drawn=drawn,
                                            judges=judges):
                            row["invalid"].append(f"{scenario.stem}#{seed}")
                            for line in lines:
                                if line.strip().startswith("FAIL "):
                                    row["expectations"][line.strip()[5:].split(":", 1)[0]] += 1
                                elif "could not be judged" in line and "FAIL" not in line:
                                    row["expectations"]["(could not be judged)"] += 1
                            if first:
                                break
                    if first and row["invalid"]:
                        break
    except WorkshopError as e:  # refused before anything ran (a load-time refusal, a syntax error)
        row["load"] = str(e).splitlines()[0][-70:]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exercise", type=int, action="append", help="only these exercises")
    parser.add_argument("--every-seed", action="store_true",
                        help="every scenario on every seed, not only up to an answer's first invalid run")
    parser.add_argument("--starters", action="store_true", help="the untouched starters too")
    args = parser.parse_args()
    answers = []
    for exercise in COURSE:
        if exercise.kind != "build" or (args.exercise and exercise.number not in args.exercise):
            continue
        if args.starters:
            answers.append((exercise, exercise.starter, "starter"))
        for path in sorted((WRONG / exercise.name).glob("*.py")):
            if not path.name.startswith("_"):
                answers.append((exercise, path, path.stem))
    first = not args.every_seed
    title(f"Known-wrong answers: which checks catch them ({len(answers)} answers"
          f"{', scenarios stop at the first invalid run' if first else ', every scenario on every seed'})")
    started, cpu0 = time.monotonic(), cpu_seconds()
    totals = Counter()
    for exercise, path, name in answers:
        row = judge(get(exercise.number), path, first)
        by_tests, by_scenarios = bool(row["tests"]), bool(row["invalid"])
        if row["load"]:
            kind = "refused at load"
        else:
            kind = {(True, True): "both", (True, False): "tests only", (False, True): "scenarios only",
                    (False, False): "NEITHER"}[by_tests, by_scenarios]
        totals[kind] += 1
        totals["scenarios"] += by_scenarios
        totals["tests"] += by_tests
        what = row["load"] or (
            f"tests {len(row['tests'])}/{len(exercise.tests)} failed; runs invalid {len(row['invalid'])}/{row['runs']}"
            + (f" ({', '.join(row['invalid'][:4])}{', ...' if len(row['invalid']) > 4 else ''})" if row["invalid"]
               else "")
            + (f"; expectations: {', '.join(f'{k} x{v}' for k, v in row['expectations'].most_common(3))}"
               if row["expectations"] else ""))
        print(f"  {exercise.number:>2} {name:<38} {kind:<15} {what}", flush=True)
    judged = len(answers) - totals["refused at load"]
    print()
    print(f"  answers judged (not refused at load): {judged}")
    for kind in ("both", "tests only", "scenarios only", "NEITHER", "refused at load"):
        print(f"    {kind:<16} {totals[kind]}")
    print(f"  caught by a test: {totals['tests']}/{judged}; caught by a scenario: {totals['scenarios']}/{judged}")
    print(f"  cost: {cpu_seconds() - cpu0:,.0f} s CPU, {time.monotonic() - started:,.0f} s wall")


if __name__ == "__main__":
    main()
