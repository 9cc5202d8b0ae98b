"""The header's words, on one line when they fit and on two when not: NAMESRV_ADDR is there to be
copied into a client, so it is never cut."""

from __future__ import annotations

Piece = tuple[str, str]  # text, style


def header_lines(status: list[Piece], addr: str, seed: str, width: int) -> list[list[Piece]]:
    tail = [(f" │ NAMESRV_ADDR={addr} │ seed {seed}", "")]
    one = status + tail
    if sum(len(text) for text, _ in one) <= width:
        return [one]
    return [status, [(f" NAMESRV_ADDR={addr} │ seed {seed}", "")]]
