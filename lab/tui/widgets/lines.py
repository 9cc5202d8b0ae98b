"""The one helper the line-API widgets share: a row of (text, style) pieces made into exactly one
Strip of the widget's width, on the widget's background — a redraw four times a second makes
every intermediate Strip count."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

Piece = tuple[str, Style | None]


def fit(pieces: list[Piece], width: int, base: Style, tail: Piece | None = None) -> Strip:
    """Pieces cut or padded to `width` (less the tail, which stays whole at the right). Text is
    one cell per character: names, addresses and numbers are ASCII in RocketMQ."""
    room = max(0, width - (len(tail[0]) if tail else 0))
    segments, used = [], 0
    for text, style in pieces:
        if used >= room:
            break
        text = text[:room - used]
        segments.append(Segment(text, base + style if style else base))
        used += len(text)
    if used < room:
        segments.append(Segment(" " * (room - used), base))
    if tail:
        segments.append(Segment(tail[0], base + tail[1] if tail[1] else base))
    return Strip(segments, width)
