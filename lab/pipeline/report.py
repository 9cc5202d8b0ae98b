"""`nslab report`: the metrics as Parquet tables, PNG plots, an HTML page and a summary, written
through a Store (a folder on the driver, or a Hadoop URI).

REPORT_DIR/
  index.html                the grid points, the plots with what to read in them, every run
  *.png                     plots.draw's figures
  summary.json              what `--json` prints
  tables/NAME.parquet       one Parquet file per table (docs/pipeline.md lists their columns)

Everything is written by the driver: the tables are small once computed, and a REPORT_DIR on the
driver's disk then works whether or not the executors can see it.
"""

from __future__ import annotations

import html
import io
import json
import shlex
from typing import Callable
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from . import metrics, plots, read, timeseries
from .run_metrics import APP_FIGURES

# The summary's columns: (column of the grid table, header).
SUMMARY = [("runs", "runs"), ("availability", "avail"), ("worst_second", "worst 1s"),
           ("retries_per_message", "retries/msg"), ("failed", "failed msgs"), ("lost", "lost"),
           ("duplicates", "dups"), ("detection_p50_s", "detect p50 s"), ("detection_max_s", "detect max s"),
           ("blind_p50_s", "blind p50 s"), ("blind_max_s", "blind max s"), ("divergence_s", "diverged s"),
           ("recovery_s", "recovery s"), ("false_removals", "false rm"), ("excluded_runs", "left out")]
# The Runs table's figures: (runs column, header).
RUN_FIGURES = [("messages", "msgs"), ("availability", "avail"), ("retries_per_message", "retries/msg"),
               ("failed", "failed msgs"), ("lost", "lost"), ("duplicates", "dups"),
               ("detection_max_s", "detect max s"), ("blind_max_s", "blind max s"), ("divergence_s", "diverged s"),
               ("recovery_s", "recovery s"), ("false_removals", "false rm"),
               ("faulted_requests", "faulted reqs")]
# The app's (issue 39), shown only when a run had an app: (column, header).
APP_SUMMARY = [("app_runs", "app runs"), ("app_acked", "app acked"), ("app_failed", "app failed"),
               ("app_lost", "app lost"), ("app_duplicates", "app dups"), ("app_recovery_p50_s", "app recov p50 s"),
               ("app_recovery_max_s", "app recov max s"), ("app_unrecovered", "app unrecov"),
               ("app_died", "app died")]
APP_RUN_FIGURES = [("app_acked", "app acked"), ("app_failed", "app failed"), ("app_lost", "app lost"),
                   ("app_duplicates", "app dups"), ("app_recovery_s", "app recov s"),
                   ("app_unrecovered", "app unrecov"), ("app_died", "app died")]
APP_TABLES = ("apps", "app_recovery")
COLLECTED = ["grid", "runs", "grid_availability", "faults", "detection", "blind", "removals", "send_latency",
             "throughput", "send_latency_over_time", "timeline", "apps", "app_recovery"]


class ReportError(RuntimeError):
    """Nothing to report on; the message says why."""


def build(spark, inputs: list[str], store, progress: Callable[[str], None] = lambda message: None) -> dict:
    """Read every event log on the executors, compute, write REPORT_DIR through `store`; returns
    the summary. `progress` gets a short line before each stage: reading alone takes a while."""
    progress(f"reading and analysing event logs in {', '.join(map(str, inputs))}")
    # A row per log, kept: every table is read from it. Locally a checkpoint, cheaper to fill than a cache.
    logs = metrics.keep(read.load(spark, inputs), partitions=spark.sparkContext.defaultParallelism)
    runs = metrics.run_table(logs)  # counted from here: a scan of the few run columns, not of the logs' rows
    count, records, with_app = runs.agg(F.count("*"), F.sum("events"), F.count("app_sends")).first()
    if not count:
        raise ReportError(f"no event logs ({read.PATTERN}) in {', '.join(map(str, inputs))}")
    progress(f"combining the runs of {count} logs ({records or 0:,} events)")
    tables = metrics.compute(logs, runs)
    tables.update(timeseries.compute(logs, tables["runs"]))
    if not with_app:  # no run had an app: nothing of the app's, not even empty columns
        for name in APP_TABLES:
            del tables[name]
        tables["runs"] = tables["runs"].drop(*APP_FIGURES)
        tables["grid"] = tables["grid"].drop(*metrics.APP_COLUMNS)
    progress(f"writing {len(tables)} tables to {store.child('tables')}")
    rows = {}
    for name, table in tables.items():
        arrow = table.toArrow()
        store.write_bytes(f"tables/{name}.parquet", parquet_bytes(arrow))
        if name in COLLECTED:
            rows[name] = arrow_rows(arrow)
    logs.unpersist()

    runs = rows["runs"]
    for run in runs:
        run["log"] = run["run"].rsplit("/", 1)[-1]
    sound = [r for r in runs if not left_out_because(r)]
    left_out = [{**r, "problem": left_out_because(r)} for r in runs if left_out_because(r)]
    progress("drawing plots")
    drawing = plots.draw({**rows, "runs": sound})
    for plot in drawing.plots:
        store.write_bytes(plot.name, plots.png(plot.figure))

    progress("writing the page")
    summary = {"out": store.uri, "runs": len(runs), "events": sum(r["events"] or 0 for r in runs),
               "grid_points": [_rounded(row) for row in rows["grid"]],
               "left_out": [{"log": r["run"], "problem": r["problem"]} for r in left_out]}
    store.write_text("summary.json", json.dumps(summary, indent=2))
    apps = app_rows(rows.get("apps", []), rows.get("app_recovery", []), {r["run"] for r in sound})
    store.write_text("index.html", page(summary, sound, left_out, drawing, {n: t.columns for n, t in tables.items()},
                                        apps))
    return summary


def left_out_because(run: dict) -> str | None:
    """Why a run counts in no aggregate (as metrics.py decides), or None: it counts."""
    if run.get("problem"):
        return run["problem"]
    if run.get("scenario") is None:
        return "no run.start: not a run of any grid point"
    return None


def parquet_bytes(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def arrow_rows(table: pa.Table) -> list[dict]:
    """The table's rows as dicts, map columns (e.g. `grid`) as dicts in their order, not pairs."""
    maps = [f.name for f in table.schema if pa.types.is_map(f.type)]
    rows = table.to_pylist()
    for row in rows:
        for name in maps:
            if row[name] is not None:
                row[name] = dict(row[name])
    return rows


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
    columns = SUMMARY + (APP_SUMMARY if _with_app(summary["grid_points"], "app_runs") else [])
    headers = ["#", "grid point"] + [header for _, header in columns]
    rows = [[f"#{i}", plots.point_label(plots.point_key(row))] + [fmt(row.get(column)) for column, _ in columns]
            for i, row in enumerate(summary["grid_points"], 1)]
    return headers, rows


def _with_app(rows: list[dict], column: str) -> bool:
    """Whether any row counts an app (the app columns exist only when a run had one)."""
    return any(row.get(column) for row in rows)


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    lines = [headers, ["-" * w for w in widths], *rows]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


# --- commands a reader can paste -------------------------------------------------------------------

def local_path(run: str) -> str:
    """A log's location as `nslab replay` takes it: file: URIs as plain paths, others as they are."""
    if run.startswith("file:"):
        return unquote(urlparse(run).path)
    return run


def replay_command(run: dict) -> str:
    return f"nslab replay {shlex.quote(local_path(run['run']))}"


def rerun_command(run: dict) -> str | None:
    """`nslab run` with the run's scenario, seed and grid point: the same run again (simulated)."""
    if run.get("scenario") in (None, "?") or run.get("seed") is None:
        return None
    sets = "".join(f" --set {shlex.quote(f'{k}={v}')}" for k, v in (run.get("grid") or {}).items())
    return f"nslab run {shlex.quote(run['scenario'])} --seed {run['seed']}{sets}"


# --- the page --------------------------------------------------------------------------------------

class Code(str):
    """A table cell shown as code (a command to paste)."""


def _cell(value: str) -> str:
    text = html.escape(value)
    return f"<td><code>{text}</code></td>" if isinstance(value, Code) else f"<td>{text}</td>"


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """body{font-family:sans-serif;margin:2em;max-width:1300px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top}
td:nth-child(2),th:nth-child(2){text-align:left}td:has(code){text-align:left}
figure{margin:1.5em 0}img{max-width:100%;display:block}figcaption{font-size:14px;color:#333;max-width:900px}
code{background:#f4f4f4;white-space:nowrap}.invalid{color:#b00}"""


def _point_numbers(summary: dict) -> dict[tuple[str, str], str]:
    return {plots.point_key(row): f"#{i}" for i, row in enumerate(summary["grid_points"], 1)}


def _verdict(run: dict) -> str:
    return run.get("verdict") or "not judged"  # an expectation undecided, or none recorded


def run_rows(runs: list[dict], numbers: dict) -> tuple[list[str], list[list[str]]]:
    figures = RUN_FIGURES + (APP_RUN_FIGURES if any(r.get("app_sends") is not None for r in runs) else [])
    headers = ["log", "point", "seed", "verdict", "failed expectation(s)", *[h for _, h in figures],
               "replay", "rerun"]
    rows = [[run["log"], numbers.get(plots.point_key(run), "?"), fmt(run.get("seed")), _verdict(run),
             "; ".join(run.get("failed_checks") or []) or "-", *[fmt(run.get(c)) for c, _ in figures],
             Code(replay_command(run)), Code(rerun_command(run) or "-")]
            for run in runs]
    return headers, rows


def _exit_text(row: dict) -> str:
    if row.get("exit_code") is None and row.get("exit_signal") is None:
        return "-"
    how = f"code {row['exit_code']}" if row.get("exit_code") is not None else f"{row['exit_signal']}"
    if row.get("died"):
        return f"{how}, died on its own"
    return f"{how}, stopped by the lab" if row.get("stopped_by_lab") else how


def app_rows(apps: list[dict], recovery: list[dict], sound: set[str]) -> tuple[list[str], list[list[str]]] | None:
    """A row per run and app (issue 39): what it sent, lost, how it exited, and its recovery after
    each fault end (`-` when it never got back to its pre-fault rate); None without an app."""
    apps = [a for a in apps if a["run"] in sound]
    if not apps:
        return None
    headers = ["log", "app", "sends", "acked", "failed", "lost", "dups", "exit", "recovery after each fault end"]
    rows = []
    for a in sorted(apps, key=lambda a: (a["run"], a["app"])):
        ends = sorted((r for r in recovery if r["run"] == a["run"] and r["app"] == a["app"]),
                      key=lambda r: r["fault_end"])
        recoveries = "; ".join(f"t={r['fault_end']:g}s ({r['ended_by'] or 'fault end'}): "
                               + (f"{r['recovery_s']:.1f} s to {r['baseline']}/s" if r["recovery_s"] is not None
                                  else ("never back to " f"{r['baseline']}/s" if r["baseline"] is not None
                                        else "no pre-fault rate"))
                               for r in ends) or "-"
        rows.append([a["run"].rsplit("/", 1)[-1], a["app"], *[fmt(a.get(c)) for c in
                     ("sends", "acked", "failed", "lost", "duplicates")], _exit_text(a), recoveries])
    return headers, rows


def left_out_rows(runs: list[dict], numbers: dict) -> tuple[list[str], list[list[str]]]:
    headers = ["log", "point", "seed", "why it is left out", "replay"]
    return headers, [[run["log"], numbers.get(plots.point_key(run), "?"), fmt(run.get("seed")), run["problem"],
                      Code(replay_command(run))] for run in runs]


def _not_drawn(drawing: plots.Drawing) -> str:
    notes = []
    if drawing.all_zero:
        notes.append(f"All zero in every run, so not drawn: {'; '.join(drawing.all_zero)}.")
    if drawing.unmeasured:
        notes.append(f"Nothing to measure in any run, so not drawn: {'; '.join(drawing.unmeasured)}.")
    return f"<p>{html.escape(' '.join(notes))}</p>" if notes else ""


def _app_section(apps: tuple | None) -> str:
    if apps is None:
        return ""
    return f"""<h2>The application under test</h2>
<p>Each app (<code>nslab run --app</code>) as its links showed it: sends acknowledged and failed (another code, or no
answer), messages acknowledged and never delivered to any of its consumer groups (lost), deliveries beyond a
message's first (dups), its exit, and how long after each fault end its acknowledged sends got back to its
pre-fault rate (docs/pipeline.md).</p>
{_html_table(*apps)}"""


def page(summary: dict, runs: list[dict], left_out: list[dict], drawing: plots.Drawing,
         columns: dict[str, list[str]], apps: tuple | None = None) -> str:
    """index.html: what was measured, the plots with how to read them, and every run with the
    commands that show it again."""
    numbers = _point_numbers(summary)
    invalid = sum(1 for r in runs if r.get("verdict") == "invalid")
    figures = "".join(f'<figure><img src="{html.escape(p.name)}" alt="{html.escape(p.name)}">'
                      f"<figcaption>{html.escape(p.caption)}</figcaption></figure>" for p in drawing.plots)
    tables = "".join(f"<li><code>tables/{html.escape(name)}.parquet</code>: {html.escape(', '.join(cols))}</li>"
                     for name, cols in columns.items())
    left = (f"<h2>Left out of the aggregates</h2>\n<p>{len(left_out)} log(s) could not be trusted whole; "
            f"no grid point, plot or table over time counts them.</p>\n{_html_table(*left_out_rows(left_out, numbers))}"
            if left_out else "")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>nslab report</title><style>{STYLE}</style></head><body>
<h1>nslab report</h1>
<p>{summary['runs']} runs, {summary['events']:,} events; {invalid} run(s) invalid (an expectation failed: still
data), {len(left_out)} left out of the aggregates. Metrics are defined in docs/pipeline.md. Grid points are
numbered in the order the sweep gave them; every plot uses those numbers.</p>
<h2>Grid points</h2>
{_html_table(*summary_rows(summary))}
<h2>Plots</h2>
{_not_drawn(drawing)}
{figures}
<h2>Runs</h2>
<p>Each run with its verdict and the expectation(s) it failed. <code>nslab replay LOG</code> opens its event log
in the lab's views; the rerun command runs it again, simulated, with the same seed and grid point.</p>
{_html_table(*run_rows(runs, numbers))}
{_app_section(apps)}
{left}
<h2>Parquet tables</h2>
<ul>{tables}</ul>
</body></html>
"""
