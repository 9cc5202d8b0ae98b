"""Errors said the way a person can act on them: the leaf of an exception group, never
`Exceptions from Trio nursery (1 sub-exception)` — trio wraps whatever a nursery raised."""

from __future__ import annotations

GROUP_WORDS = ("Exceptions from Trio nursery", "sub-exception")


def leaf(error: BaseException) -> str:
    """`Type: message` of the errors inside any exception groups (several joined by `; `)."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(leaf(e) for e in error.exceptions))
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def wrapped(text: str | None) -> bool:
    """The text only says that errors were grouped, not what they were."""
    return bool(text) and any(words in text for words in GROUP_WORDS)


def readable(text: str | None, better: str | None = None) -> str:
    """`text`, unless it is a group's wrapper and `better` (the leaf, from another record) is known."""
    if wrapped(text) and better and not wrapped(better):
        return better
    return text or better or "unknown error"
