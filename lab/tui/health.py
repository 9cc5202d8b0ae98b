"""Health at a glance: messages per second, acknowledged and failed, drawn on one absolute scale
(so a cluster where every send fails never looks like a healthy one), and the current rates as
numbers."""

from __future__ import annotations

LEVELS = "▁▂▃▄▅▆▇█"
RATE_SECONDS = 5  # whole seconds the current rate is the mean of


def shared_top(*series: list[int]) -> int:
    """The scale's top: the busiest second of any series (at least 1)."""
    return max([1, *(max(s, default=0) for s in series)])


def bars(values: list[int], top: int) -> str:
    """One cell per value on the scale 0..top: blank for none, the lowest bar for any at all."""
    cells = []
    for v in values:
        if v <= 0:
            cells.append(" ")
        else:
            cells.append(LEVELS[min(len(LEVELS) - 1, max(0, -(-v * len(LEVELS) // top) - 1))])
    return "".join(cells)


def rate(values: list[int], seconds: int = RATE_SECONDS) -> float:
    recent = values[-seconds:]
    return sum(recent) / len(recent) if recent else 0.0


def rates_text(ok: float, failed: float) -> str:
    """`ok 10/s · failed 10/s (50 %)`: the share in brackets is of messages that failed, beside them."""
    total = ok + failed
    return f"ok {ok:.0f}/s · failed {failed:.0f}/s ({100 * failed / total:.0f} %)" if total \
        else f"ok {ok:.0f}/s · failed {failed:.0f}/s · no sends"
