"""`nslab workshop`: list | show N [--answers] [--hints] | start N | check N | up N."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import DEFAULT_DIR

# The course, the checker and the override (they load the scenarios) are imported by the commands:
# `nslab` builds this parser at every start.
if TYPE_CHECKING:
    from .course import Exercise


def add_commands(sub) -> None:
    ws = sub.add_parser("workshop", help="a course of exercises on the lab: run it, watch it, break it, fix it",
                        description="A course of exercises with checkers (docs/workshop.md).")
    cmds = ws.add_subparsers(dest="workshop_command", metavar="COMMAND", required=True)
    cmds.add_parser("list", help="the exercises, a line each").set_defaults(run=run_list)

    show = cmds.add_parser("show", help="an exercise's brief")
    show.add_argument("number", type=int)
    show.add_argument("--answers", action="store_true", help="also the answers to the brief's questions")
    show.add_argument("--hints", action="store_true", help="also the hints (building exercises)")
    show.set_defaults(run=_guarded(run_show))

    start = cmds.add_parser("start", help="copy a building exercise's starter into your working directory")
    start.add_argument("number", type=int)
    start.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="default: ./%(default)s")
    start.add_argument("--force", action="store_true", help="overwrite your copy")
    start.set_defaults(run=_guarded(run_start))

    chk = cmds.add_parser("check", help="check your work: unit tests and the exercise's scenario")
    _whose_work(chk).add_argument("--predict", type=float, metavar="NUMBER",
                                  help="watching exercises: your prediction")
    chk.set_defaults(run=_guarded(run_check))

    up = cmds.add_parser("up", help="play the exercise's scenario in the TUI (with your function swapped in)")
    _whose_work(up)
    up.add_argument("--sim", action="store_true", help="simulated network and virtual time")
    up.add_argument("--speed", type=float, help="time runs this many times faster (default 4)")
    up.set_defaults(run=_guarded(run_up))


def _whose_work(parser: argparse.ArgumentParser):
    """N, and whose function: yours (DIR/NN-name.py or --file) or the reference --solution."""
    parser.add_argument("number", type=int)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="default: ./%(default)s")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--file", type=Path, help="your file (default: DIR/NN-name.py)")
    which.add_argument("--solution", action="store_true", help="the reference solution instead")
    return which


def _guarded(command):
    """The exercise looked up once; a learner's mistake (a bad number, no file yet, a file that does
    not load) is a message and exit 2, never a traceback."""
    def run(args: argparse.Namespace) -> int:
        from .course import get
        from .override import WorkshopError

        try:
            return command(get(args.number), args)
        except (LookupError, WorkshopError) as e:
            print(f"nslab workshop: {e}", file=sys.stderr)
            return 2
    return run


def run_list(args: argparse.Namespace) -> int:
    from .course import COURSE

    for ex in COURSE:
        print(f"{ex.number:>2}  {ex.kind:<5}  {ex.title}  [{ex.scenario_path.stem}]")
    return 0


def run_show(ex: Exercise, args: argparse.Namespace) -> int:
    from . import check as checking

    print(f"# Exercise {ex.number} ({ex.kind}): {ex.title}\n")
    print(ex.text("brief").rstrip())
    print(f"\nScenario: {ex.scenario_path}")
    if ex.kind == "build":
        # The interfaces, never the module that holds the lab's own answer.
        print(f"You write: {ex.function}{'' if ex.stateful else '()'}, swapped in where the lab's own would run; "
              f"its types: lab/workshop/interfaces.py")
        print(f"Start: nslab workshop start {ex.number}   then edit {checking.work_file(ex)}")
    print(f"Watch: nslab workshop up {ex.number}" + ("" if ex.kind == "watch" else "  [--solution]"))
    print(f"Check: nslab workshop check {ex.number}" + (" --predict NUMBER" if ex.kind == "watch" else ""))
    for flag, part in ((args.hints, "hints"), (args.answers, "answers")):
        if flag and ex.text(part):
            print(f"\n## {part.capitalize()}\n\n{ex.text(part).rstrip()}")
    if not args.answers and ex.text("answers"):
        print("\n(answers: --answers)")
    return 0


def run_start(ex: Exercise, args: argparse.Namespace) -> int:
    from . import check as checking

    if ex.kind == "watch":
        print(f"exercise {ex.number} is a watching exercise: nothing to edit — "
              f"`nslab workshop up {ex.number}`, then `nslab workshop check {ex.number} --predict NUMBER`")
        return 0
    target = checking.work_file(ex, args.dir)
    if target.exists() and not args.force:
        print(f"{target} is already there (your work): edit it, or --force to start over")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ex.starter, target)
    print(f"wrote {target}: implement {ex.function}(), then `nslab workshop check {ex.number}`")
    return 0


def run_check(ex: Exercise, args: argparse.Namespace) -> int:
    from . import check as checking
    from .override import WorkshopError

    if args.predict is not None and ex.kind != "watch":
        raise WorkshopError(f"exercise {ex.number} is a building exercise: no --predict")
    outcome = checking.check(ex, file=args.file, solution=args.solution, prediction=args.predict,
                             directory=args.dir)
    return 0 if outcome.ok else 1


def run_up(ex: Exercise, args: argparse.Namespace) -> int:
    from lab.control import scenarios
    from lab.tui import launch
    from lab.run.runner import RunOptions

    from . import check as checking

    path = ex.solution if args.solution else args.file or checking.work_file(ex, args.dir)
    if not path.exists():
        path = None  # the lab's own implementation
    with checking.overridden(ex, path):
        text, drawn, _ = ex.seeded(ex.scenario_path, 1)  # a template's fault: seed 1's
        if drawn:
            print(f"the fault (seed 1): {drawn}")
        play = scenarios.Play(scenarios.prepare(str(ex.scenario_path), text=text))
        options = RunOptions(sim=args.sim, speed=args.speed, seed=play.prepared.seed)
        return launch.run_tui(play.prepared.config, options, play)
