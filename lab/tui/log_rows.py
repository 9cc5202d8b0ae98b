"""The event log's rows: consecutive repeats of a routine kind collapse into one row
(`producer.failed ×120`); important records never collapse and survive any trimming."""

from __future__ import annotations

from dataclasses import dataclass, field

from .story import important


@dataclass
class Row:
    record: dict  # the latest of the run of repeats
    count: int = 1
    first_t: float = 0.0
    nodes: set[str] = field(default_factory=set)
    keep: bool = False  # important: never trimmed


OUTCOME = ("ok", "result", "error", "reason", "status")  # fields that make two records of a kind differ


def same(a: dict, b: dict) -> bool:
    """A repeat: the same kind with the same outcome, from whichever node (two producers failing
    in turn are one story)."""
    return a["kind"] == b["kind"] and all(a.get(f) == b.get(f) for f in OUTCOME)


def append(rows: list[Row], record: dict) -> None:
    keep = important(record)
    last = rows[-1] if rows else None
    if last is not None and not keep and not last.keep and same(last.record, record):
        last.record, last.count = record, last.count + 1
        last.nodes.add(record["node"])
        return
    rows.append(Row(record, 1, record["t"], {record["node"]}, keep))


def build(records) -> list[Row]:
    rows: list[Row] = []
    for record in records:
        append(rows, record)
    return rows


def trim(rows: list[Row], cap: int) -> list[Row]:
    """At most `cap` routine rows (the newest), and every important one."""
    routine = sum(1 for r in rows if not r.keep)
    if routine <= cap:
        return rows
    drop = routine - cap
    kept = []
    for row in rows:
        if drop and not row.keep:
            drop -= 1
            continue
        kept.append(row)
    return kept


def node_text(row: Row) -> str:
    return row.record["node"] if len(row.nodes) == 1 else f"{len(row.nodes)} nodes"
