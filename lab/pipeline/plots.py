"""The report's PNG plots, drawn on the driver from the small collected tables (matplotlib, Agg).

Grid points are numbered #1, #2… in the order of the grid table; the HTML says which is which.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or in CI
import matplotlib.pyplot as plt  # noqa: E402

FAULT_COLORS = {"kill": "tab:red", "stop": "tab:orange", "freeze": "tab:purple", "partition": "tab:brown",
                "isolate": "tab:pink", "toxic": "tab:olive", "ns-down": "tab:gray", "wipe-perm": "tab:cyan"}


def point_key(row: dict) -> tuple[str, str]:
    return row["scenario"], row["grid_label"]


def draw(out: Path, grid: list[dict], tables: dict[str, list[dict]]) -> list[str]:
    """Every plot into `out`; returns the file names. `grid` is the grid table's rows, in order."""
    points = {point_key(row): f"#{i}" for i, row in enumerate(grid, 1)}
    point_of_run = {r["run"]: point_key(r) for r in tables["runs"]}
    drawn = [
        _availability(out, points, point_of_run, tables["grid_availability"], tables["faults"]),
        _distributions(out, points, point_of_run, tables["detection"], tables["blind"]),
        _send_latency(out, points, tables["send_latency"]),
        _grid(out, points, grid),
    ]
    return [name for name in drawn if name]


def _save(fig, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=100)
    plt.close(fig)
    return name


def _availability(out, points, point_of_run, rows, faults) -> str | None:
    """Availability per second, mean over a grid point's runs with the worst run shaded below it,
    and the fault windows shaded as Jepsen's plots do."""
    if not rows:
        return None
    series = defaultdict(list)
    for r in rows:
        series[point_key(r)].append(r)
    windows = defaultdict(set)  # seeds shift a fault by milliseconds: whole seconds are enough
    for f in faults:
        windows[point_of_run.get(f["run"])].add((f["verb"], round(f["start"]), round(f["end"])))
    fig, axes = plt.subplots(len(points), 1, figsize=(10, 2.2 * len(points) + 0.6), sharex=True, squeeze=False)
    for ax, (key, name) in zip(axes[:, 0], points.items()):
        data = sorted(series.get(key, []), key=lambda r: r["second"])
        if data:  # each value holds for its whole second, the last one too
            data.append({**data[-1], "second": data[-1]["second"] + 1})
        seconds = [r["second"] for r in data]
        ax.fill_between(seconds, [r["min"] for r in data], [r["mean"] for r in data], step="post",
                        color="tab:blue", alpha=0.25, label="worst run")
        ax.step(seconds, [r["mean"] for r in data], where="post", color="tab:blue", label="mean of runs")
        for verb, start, end in sorted(windows.get(key, ())):
            ax.axvspan(start, max(end, start + 1), color=FAULT_COLORS.get(verb, "tab:gray"), alpha=0.15, label=verb)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), loc="lower left", fontsize=7, ncol=4)
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel("acked / sent")
        ax.set_title(f"{name}  {point_label(key)}", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("second of the run (message's first attempt)")
    return _save(fig, out, "availability.png")


def _distributions(out, points, point_of_run, detection, blind) -> str | None:
    """Detection latency and blind window per grid point, side by side: a box and every value."""
    columns = [("detection_s", detection, "detection: fault → removed (s)"),
               ("blind_s", blind, "blind window: fault → last choice (s)")]
    if not detection and not blind:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), squeeze=False)
    for ax, (column, rows, title) in zip(axes[0], columns):
        values = defaultdict(list)
        for r in rows:
            if r[column] is not None:
                values[point_of_run.get(r["run"])].append(r[column])
        data = [values.get(key, []) for key in points]
        ax.boxplot([d or [float("nan")] for d in data], tick_labels=list(points.values()))
        for i, d in enumerate(data, 1):
            ax.plot([i] * len(d), d, ".", color="tab:blue", alpha=0.4)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("grid point")
    return _save(fig, out, "latency.png")


def _send_latency(out, points, rows) -> str | None:
    """Send attempt latency: share of attempts per latency bucket, log scale."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(10, 3.5))
    by_point = defaultdict(list)
    for r in rows:
        by_point[point_key(r)].append(r)
    for key, name in points.items():
        data = sorted(by_point.get(key, []), key=lambda r: r["log10_s"])
        total = sum(r["sends"] for r in data) or 1
        centres = [10 ** (r["log10_s"] + 0.05) for r in data]  # of each tenth-of-a-decade bucket
        ax.plot(centres, [r["sends"] / total for r in data], marker=".", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("send attempt latency (s)")
    ax.set_ylabel("share of attempts")
    ax.legend(fontsize=8)
    return _save(fig, out, "send_latency.png")


GRID_BARS = [("availability", "availability (mean of runs)"), ("retries_per_message", "retries per message"),
             ("failed", "failed sends"), ("lost", "acked, never consumed"),
             ("detection_p50_s", "detection p50 (s)"), ("blind_p50_s", "blind window p50 (s)"),
             ("divergence_s", "NameServer divergence per run (s)"), ("recovery_s", "recovery after all down (s)")]


def _grid(out, points, grid) -> str:
    """Grid points side by side, one bar each, for the summary's main figures."""
    fig, axes = plt.subplots(2, 4, figsize=(12, 5))
    names = list(points.values())
    for ax, (column, title) in zip(axes.flat, GRID_BARS):
        ax.bar(names, [row[column] or 0 for row in grid], color="tab:blue")
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
    return _save(fig, out, "grid.png")


def point_label(key: tuple[str, str]) -> str:
    scenario, grid_label = key
    return f"{scenario}: {grid_label}" if grid_label else scenario
