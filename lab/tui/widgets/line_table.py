"""A read-only table drawn with the line API: the screen's timer replaces its rows four times a
second, and only the rows on screen are drawn — DataTable re-renders every cell on any change."""

from __future__ import annotations

from functools import lru_cache

from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .lines import fit

Cell = str | tuple[str, str]  # text, or (text, style)
HEADER = Style(bold=True)
GAP = 2


@lru_cache(maxsize=64)
def style(spec: str) -> Style:
    return Style.parse(spec)


class Span(tuple):
    """A row of cells drawn one after the other across the table, in no column (and widening none):
    a note under the row before it."""


class LineTable(ScrollView):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.columns: tuple[str, ...] = ()
        self.rows: list[tuple[Cell, ...]] = []
        self.widths: list[int] = []
        self._base = Style()

    def show_rows(self, columns: tuple[str, ...], rows: list[tuple[Cell, ...]]) -> None:
        if (columns, rows) == (self.columns, self.rows):
            return
        self.columns, self.rows, self._base = columns, rows, self.rich_style
        self.widths = [max(len(_text(c)) for c in column)
                       for column in zip(columns, *(row for row in rows if not isinstance(row, Span)))]
        self.virtual_size = Size(sum(self.widths) + GAP * len(self.widths), len(rows) + 1)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        if y == 0:
            cells, line_style = self.columns, HEADER
        elif scroll_y + y - 1 < len(self.rows):
            cells, line_style = self.rows[scroll_y + y - 1], None
        else:
            return Strip.blank(width, self._base)
        spans = isinstance(cells, Span)
        pieces = []
        for cell, column_width in zip(cells, [-GAP] * len(cells) if spans else self.widths):
            text, spec = (cell, "") if isinstance(cell, str) else cell
            pieces.append((text.ljust(column_width + GAP), style(spec) if spec else line_style))
        if scroll_x:
            return fit(pieces, width + scroll_x, self._base).crop(scroll_x, scroll_x + width)
        return fit(pieces, width, self._base)


def _text(cell: Cell) -> str:
    return cell if isinstance(cell, str) else cell[0]
