"""Errors said the way a person can act on them, never `Exceptions from Trio nursery (1
sub-exception)`: recordings made before the lab recorded the cause (lab.run.supervisor.describe)
still carry the wrapper, and another record of the same node may know what it wrapped."""

from __future__ import annotations

GROUP_WORDS = ("Exceptions from Trio nursery", "sub-exception")


def wrapped(text: str | None) -> bool:
    """The text only says that errors were grouped, not what they were."""
    return bool(text) and any(words in text for words in GROUP_WORDS)


def readable(text: str | None, better: str | None = None) -> str:
    """`text`, unless it is a group's wrapper and `better` (the leaf, from another record) is known."""
    if wrapped(text) and better and not wrapped(better):
        return better
    return text or better or "unknown error"
