"""How the generated checks (Hypothesis) of exercises 10, 11 and 12 run.

A learner is shown the smallest failing case Hypothesis can shrink to: that case is the message.
Shrinking a wrong answer's failure is most of what its check costs, and the known-wrong tests only
need to see it fail for its stated reason, so they turn shrinking off (`shrinking(False)`) and are
told the first failing case found, said to be unshrunk.
"""

from __future__ import annotations

from contextlib import contextmanager

from hypothesis import HealthCheck, Phase, Verbosity, settings

SHRINK = True


def checks(max_examples: int) -> settings:
    """Deterministic (the same cases for everyone, every time), never timed, never remembered
    between runs; shrunk unless shrinking is off."""
    phases = tuple(Phase) if SHRINK else tuple(p for p in Phase if p is not Phase.shrink)
    return settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
                    verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck), phases=phases)


def the_case(noun: str = "sequence") -> str:
    """How the failing case is introduced in the message."""
    least = "shortest" if noun == "sequence" else "smallest"
    return f"the {least} {noun} that shows it" if SHRINK else f"a {noun} that shows it (not shrunk)"


@contextmanager
def shrinking(on: bool):
    global SHRINK
    saved, SHRINK = SHRINK, on
    try:
        yield
    finally:
        SHRINK = saved
