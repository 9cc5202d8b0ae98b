"""The workshop: a course of exercises on the lab — run it, watch it, break it, fix it.

course.py lists the exercises; exercises/NN-slug/ holds each one's brief, answers, hints, scenario
and starter; solutions/ holds the reference solutions; check.py judges a learner's work;
override.py swaps a learner's function into the lab. docs/workshop.md is the course guide.
"""

from pathlib import Path

# Here, where both the checker and the parser read it: `nslab` builds the parser at every start
# and must not load the checker (it loads the scenarios) to do so.
DEFAULT_DIR = Path("workshop")  # where `start` copies starters, relative to the learner's directory
