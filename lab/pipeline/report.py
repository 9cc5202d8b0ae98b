"""`nslab report`: the metrics as Parquet tables, PNG plots, an HTML page and a summary.

REPORT_DIR/
  index.html          the grid points, the plots, every run
  *.png               availability over time, latency distributions, send latency, grid points
  summary.json        what `--json` prints
  tables/NAME/        one Parquet table per metric (docs/pipeline.md lists their columns)
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from . import metrics, plots, read

# The summary's columns: (column of the grid table, header).
SUMMARY = [("runs", "runs"), ("availability", "avail"), ("worst_second", "worst 1s"),
           ("retries_per_message", "retries/msg"), ("failed", "failed"), ("lost", "lost"), ("duplicates", "dups"),
           ("detection_p50_s", "detect p50 s"), ("detection_max_s", "detect max s"),
           ("blind_p50_s", "blind p50 s"), ("blind_max_s", "blind max s"), ("divergence_s", "diverged s"),
           ("recovery_s", "recovery s"), ("false_removals", "false rm")]
RUN_COLUMNS = ["log", "seed", "grid_label", "complete", "events", "messages", "availability", "retries_per_message",
               "failed", "lost", "duplicates", "detection_max_s", "blind_max_s", "divergence_s", "recovery_s",
               "false_removals"]
COLLECTED = ["grid", "runs", "grid_availability", "faults", "detection", "blind", "send_latency"]


class ReportError(RuntimeError):
    """Nothing to report on; the message says why."""


def build(spark, paths: list[Path], out: Path) -> dict:
    """Read every event log on the executors, compute, write REPORT_DIR; returns the summary."""
    events = read.load(spark, paths).cache()
    if events.isEmpty():
        raise ReportError(f"no event logs ({read.PATTERN}) in {', '.join(map(str, paths))}")
    tables = metrics.compute(events)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.write.mode("overwrite").parquet(str(out / "tables" / name))
    rows = {name: [row.asDict(recursive=True) for row in tables[name].collect()] for name in COLLECTED}
    for row in rows["runs"]:
        row["log"] = Path(row["run"]).name
    images = plots.draw(out, rows["grid"], rows)
    summary = {"out": str(out), "runs": len(rows["runs"]), "events": sum(r["events"] or 0 for r in rows["runs"]),
               "grid_points": [_rounded(row) for row in rows["grid"]]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "index.html").write_text(page(summary, rows["runs"], images, {n: t.columns for n, t in tables.items()}))
    events.unpersist()
    return summary


def _rounded(row: dict) -> dict:
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()}


def fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summary_rows(summary: dict) -> tuple[list[str], list[list[str]]]:
    """The summary as text cells: a row per grid point."""
    headers = ["#", "grid point"] + [header for _, header in SUMMARY]
    rows = [[f"#{i}", plots.point_label(plots.point_key(row))] + [fmt(row[column]) for column, _ in SUMMARY]
            for i, row in enumerate(summary["grid_points"], 1)]
    return headers, rows


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    lines = [headers, ["-" * w for w in widths], *rows]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:nth-child(2),th:nth-child(2){text-align:left}
img{max-width:100%;display:block;margin:1em 0}code{background:#f4f4f4}"""


def page(summary: dict, runs: list[dict], images: list[str], columns: dict[str, list[str]]) -> str:
    run_rows = [[fmt(run[c]) for c in RUN_COLUMNS] for run in runs]
    tables = "".join(f"<li><code>tables/{html.escape(name)}</code>: {html.escape(', '.join(cols))}</li>"
                     for name, cols in columns.items())
    figures = "".join(f'<img src="{html.escape(name)}" alt="{html.escape(name)}">' for name in images)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>nslab report</title><style>{STYLE}</style></head><body>
<h1>nslab report</h1>
<p>{summary['runs']} runs, {summary['events']:,} events. Metrics are defined in docs/pipeline.md;
availability plots shade the fault windows.</p>
<h2>Grid points</h2>
{_html_table(*summary_rows(summary))}
<h2>Plots</h2>
{figures}
<h2>Runs</h2>
{_html_table(RUN_COLUMNS, run_rows)}
<h2>Parquet tables</h2>
<ul>{tables}</ul>
</body></html>
"""
