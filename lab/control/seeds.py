"""The seed gate: every scenario's verdict must hold on every seed, not on a lucky one.

`nslab seeds` runs scenarios simulated, once per seed, a process per core, and prints a line per
run that is not valid and a line per scenario. Exit 0 when every run is valid, 1 when one is
invalid, 2 when none is invalid but one could not be judged. `make test` runs it on seeds 1–20;
more seeds go to Spark with `nslab sweep`.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from dataclasses import dataclass

from lab.run.runner import RunOptions
from . import scenarios


@dataclass(frozen=True)
class Outcome:
    scenario: str
    seed: int
    valid: bool | None
    detail: str  # what was not valid, or ""


def parse_seeds(text: str) -> list[int]:
    """`1-20`, `7`, or `1,5,9-12`."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"bad seeds {text!r}: use e.g. 1-20, 7 or 1,5,9-12") from None
        if first < 0 or last < first:
            raise ValueError(f"bad seeds {text!r}: a range goes from a low seed >= 0 to a higher one")
        seeds.extend(range(first, last + 1))
    return seeds


def run_one(job: tuple[str, int]) -> Outcome:
    name, seed = job
    logging.disable(logging.WARNING)  # the NameServers' own log lines; the verdict says what matters
    verdict = scenarios.run(scenarios.prepare(name, seed=seed), RunOptions(sim=True))
    bad = [f"{r.mark.strip()} {r.name}: {r.detail}" for r in verdict.results if r.ok is not True]
    if verdict.error:
        bad.append(f"error: {verdict.error}")
    return Outcome(scenarios.find(name).stem, seed, verdict.valid, "; ".join(bad))


def gate(names: list[str], seeds: list[int], *, jobs: int | None = None, say=print) -> int:
    for name in names:  # every file checked before anything runs
        scenarios.prepare(name)
    work = [(name, seed) for name in names for seed in seeds]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(work)))
    # spawn, not fork: each run starts from a clean interpreter, as `nslab run` would
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        outcomes = pool.map(run_one, work, chunksize=1)
    for name in names:
        mine = [o for o in outcomes if o.scenario == scenarios.find(name).stem]
        for o in mine:
            if o.valid is not True:
                say(f"  {o.scenario} --seed {o.seed}: {'INVALID' if o.valid is False else 'UNKNOWN'}: {o.detail}")
        valid = sum(o.valid is True for o in mine)
        say(f"{mine[0].scenario}: valid on {valid}/{len(mine)} seeds")
    if any(o.valid is False for o in outcomes):
        return 1
    return 0 if all(o.valid is True for o in outcomes) else 2


__all__ = ["Outcome", "gate", "parse_seeds"]
