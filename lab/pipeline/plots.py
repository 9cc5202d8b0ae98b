"""The report's figures, drawn on the driver from the small collected tables (matplotlib, Agg).

draw() returns matplotlib Figures, not files: report.py renders them (png()) into its Store, and a
test can read their axes. Grid points are numbered #1, #2… in the order of the grid table; the HTML
says which is which. Every axis says its unit, and none uses an offset (`+9.99e1`): a reader should
never have to add a number in the corner to the tick labels.
"""

from __future__ import annotations

import io
import math
import random
from collections import defaultdict
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or in CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import ScalarFormatter  # noqa: E402

FAULT_COLORS = {"kill": "tab:red", "stop": "tab:orange", "freeze": "tab:purple", "partition": "tab:brown",
                "isolate": "tab:pink", "toxic": "tab:olive", "ns-down": "tab:gray", "wipe-perm": "tab:cyan"}
TIME_AXIS = "time since the run started (s)"

# The grid comparison: (runs column, panel title, y axis label). One value per run; the bar is their
# mean with a bootstrap confidence interval, the dots the runs themselves.
GRID_BARS = [("availability", "availability", "share of messages acked"),
             ("retries_per_message", "retries per message", "retries / message"),
             ("failed", "failed messages per run", "messages"),
             ("lost", "lost messages per run (acked, never consumed)", "messages"),
             ("duplicates", "duplicated messages per run", "messages"),
             ("detection_p50_s", "detection latency, p50 per run", "fault → removed (s)"),
             ("blind_p50_s", "blind window, p50 per run", "fault → last choice (s)"),
             ("divergence_s", "NameServer divergence per run", "diverged (s)"),
             ("recovery_s", "recovery after every NameServer was down", "back up → route (s)"),
             ("false_removals", "false removals per run", "removals")]
# The app's (issue 39), panels only when a run had an app: a run without one has none of them.
APP_BARS = [("app_failed", "the app's failed sends per run", "sends"),
            ("app_lost", "the app's lost messages per run (acked, never delivered)", "messages"),
            ("app_duplicates", "the app's duplicate deliveries per run", "deliveries"),
            ("app_recovery_s", "the app's recovery after a fault, slowest per run", "fault end → pre-fault rate (s)")]
BOOTSTRAP_RESAMPLES = 2000
BESIDE = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0}  # legends off the data


@dataclass
class Plot:
    name: str  # its file name in REPORT_DIR
    figure: Figure
    caption: str  # what to read in it, for the HTML


@dataclass
class Drawing:
    plots: list[Plot] = field(default_factory=list)
    all_zero: list[str] = field(default_factory=list)  # GRID_BARS titles: 0 in every run, not drawn
    unmeasured: list[str] = field(default_factory=list)  # null in every run: nothing to measure


def point_key(row: dict) -> tuple[str, str]:
    return row["scenario"], row["grid_label"]


def point_label(key: tuple[str, str]) -> str:
    scenario, grid_label = key
    return f"{scenario}: {grid_label}" if grid_label else scenario


def png(figure: Figure) -> bytes:
    """The figure as PNG bytes (a Store takes bytes, wherever it writes); the figure is closed."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def bootstrap_ci(values: list[float], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = 0) -> tuple[float, float]:
    """A percentile bootstrap interval for the mean of `values` (each run's value): the same
    numbers every time, so two reports of the same logs agree."""
    if not values:
        raise ValueError("no values")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return means[int(tail * resamples)], means[min(resamples - 1, math.ceil((1 - tail) * resamples) - 1)]


def draw(tables: dict[str, list[dict]]) -> Drawing:
    """Every figure. `tables["grid"]` is the grid table's rows in order; `tables["runs"]` holds only
    the runs the aggregates use (none whose log has a problem)."""
    points = {point_key(row): f"#{i}" for i, row in enumerate(tables["grid"], 1)}
    point_of_run = {r["run"]: point_key(r) for r in tables["runs"]}
    windows = _windows_by_point(tables["faults"], point_of_run)
    drawing = Drawing()
    shown = _classify(tables["runs"], drawing)
    candidates = [
        ("availability.png", _availability(points, tables["grid_availability"], windows),
         "Of the messages whose first attempt started in each second, the share acknowledged (retries "
         "included): the mean over a grid point's runs, the worst run shaded below it; fault windows shaded."),
        ("throughput.png", _throughput(points, tables["throughput"], windows),
         "Acknowledged and failed messages per second, each the mean over a grid point's runs (a failed "
         "message gave up after its retries); fault windows shaded."
         + ("" if any(r["failed_per_s"] for r in tables["throughput"]) else " No message failed in any run: "
            "no failed line.")),
        ("send_latency_over_time.png", _latency_over_time(points, tables["send_latency_over_time"], windows),
         "Send attempt latency p50 and p99 per second an attempt started in, over all runs of a grid point, on a "
         "log axis: a timeout shows as a p99 at the producer's sendMsgTimeout."),
        ("send_latency.png", _send_latency_ccdf(points, tables["send_latency"]),
         "Send attempt latency as a CCDF on log-log axes: the share of attempts slower than x. The curve's "
         "tail is the attempts that waited for a timeout; a median hides them."),
        ("latency.png", _distributions(points, point_of_run, tables["detection"], tables["blind"]),
         "Detection latency (fault → each NameServer that held the broker removes it) and the client blind "
         "window (fault → each producer's last choice of that broker): a box per grid point and every value."),
        ("timeline.png", _timelines(points, tables),
         "One run per grid point (its lowest seed), node by node: whether each NameServer held the faulted "
         "broker, and which broker group each producer's send attempts chose; triangles mark removals, stars "
         "the producers' last choice of the faulted broker; fault windows shaded."),
        ("grid.png", _grid(points, tables["runs"], shown),
         "The grid points side by side: each bar is the mean over the point's runs with a bootstrap 95 % "
         f"confidence interval ({BOOTSTRAP_RESAMPLES} resamples of its runs), each dot one run."),
    ]
    for name, figure, caption in candidates:
        if figure is not None:
            _readable(figure)
            drawing.plots.append(Plot(name, figure, caption))
    return drawing


def _classify(runs: list[dict], drawing: Drawing) -> list[tuple[str, str, str]]:
    """The GRID_BARS worth a panel; the rest named in `drawing` (a flat ±0.04 panel teaches nothing)."""
    shown = []
    with_app = any(r.get("app_sends") is not None for r in runs)
    for column, title, unit in GRID_BARS + (APP_BARS if with_app else []):
        values = [r.get(column) for r in runs if r.get(column) is not None]
        if not values:
            drawing.unmeasured.append(title)
        elif all(v == 0 for v in values):
            drawing.all_zero.append(title)
        else:
            shown.append((column, title, unit))
    return shown


def _readable(figure: Figure) -> None:
    """Plain tick labels on every linear axis: no offset, no scientific notation."""
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, ScalarFormatter):
                formatter.set_useOffset(False)
                formatter.set_scientific(False)
    figure.tight_layout()


def _windows_by_point(faults: list[dict], point_of_run: dict) -> dict:
    """Fault windows per grid point. Seeds shift a fault by milliseconds: whole seconds are enough."""
    windows = defaultdict(set)
    for f in faults:
        key = point_of_run.get(f["run"])
        if key is not None:
            windows[key].add((f["verb"], round(f["start"]), round(f["end"])))
    return windows


def _shade(ax, windows) -> None:
    for verb, start, end in sorted(windows or ()):
        ax.axvspan(start, max(end, start + 0.5), color=FAULT_COLORS.get(verb, "tab:gray"), alpha=0.15,
                   label=f"{verb} (fault window)")


def _legend(ax, **options) -> None:
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    if unique:
        ax.legend(unique.values(), unique.keys(), fontsize=7, **options)


def _title(ax, name: str, key: tuple[str, str]) -> None:
    ax.set_title(f"{name}  {point_label(key)}", fontsize=9, loc="left")


def _stacked(panels: int, height: float = 2.2):
    """A panel per grid point, one above the other, sharing the time axis."""
    fig, axes = plt.subplots(panels, 1, figsize=(11, height * panels + 0.6), sharex=True, squeeze=False)
    return fig, list(axes[:, 0])


def _by_point(rows: list[dict], order: str) -> dict:
    grouped = defaultdict(list)
    for r in rows:
        grouped[point_key(r)].append(r)
    return {key: sorted(rs, key=lambda r: r[order]) for key, rs in grouped.items()}


def _held_to_end(rows: list[dict]) -> list[dict]:
    """Per-second values hold for their whole second, the last one too (for a step plot)."""
    return rows + [{**rows[-1], "second": rows[-1]["second"] + 1}] if rows else rows


# --- over time -------------------------------------------------------------------------------------

def _per_second(points, rows, windows, ylabel: str, xlabel: str, draw) -> Figure:
    """A panel per grid point over the run's seconds, fault windows shaded; draw(ax, data, seconds)
    plots the point's rows, each value held for its whole second."""
    series = _by_point(rows, "second")
    fig, axes = _stacked(len(points))
    for ax, (key, name) in zip(axes, points.items()):
        data = _held_to_end(series.get(key, []))
        draw(ax, data, [r["second"] for r in data])
        _shade(ax, windows.get(key))
        _legend(ax, **BESIDE)
        ax.set_ylabel(ylabel)
        _title(ax, name, key)
    axes[-1].set_xlabel(xlabel)
    return fig


def _availability(points, rows, windows) -> Figure | None:
    if not rows:
        return None

    def draw(ax, data, seconds):
        ax.fill_between(seconds, [r["min"] for r in data], [r["mean"] for r in data], step="post",
                        color="tab:blue", alpha=0.25, label="worst run")
        ax.step(seconds, [r["mean"] for r in data], where="post", color="tab:blue", label="mean of runs")
        ax.set_ylim(-0.05, 1.05)
    return _per_second(points, rows, windows, "share of messages acked",
                       TIME_AXIS + ", by each message's first attempt", draw)


def _throughput(points, rows, windows) -> Figure | None:
    if not rows:
        return None
    any_failed = any(r["failed_per_s"] for r in rows)

    def draw(ax, data, seconds):
        ax.step(seconds, [r["acked_per_s"] for r in data], where="post", color="tab:blue", label="acked")
        if any_failed:  # a line flat at 0 in every panel says less than the caption's "no failures"
            ax.step(seconds, [r["failed_per_s"] for r in data], where="post", color="tab:red", label="failed")
        ax.set_ylim(bottom=0)
    return _per_second(points, rows, windows, "messages/s", TIME_AXIS, draw)


def _latency_over_time(points, rows, windows) -> Figure | None:
    """None when no attempt has a latency above 0 (logs that record none): a log axis needs one."""
    if not any(r["p99_s"] for r in rows):
        return None

    def draw(ax, data, seconds):
        ax.step(seconds, [r["p99_s"] for r in data], where="post", color="tab:red", label="p99")
        ax.step(seconds, [r["p50_s"] for r in data], where="post", color="tab:blue", label="p50")
        if any(r["p99_s"] for r in data):
            ax.set_yscale("log")
    return _per_second(points, rows, windows, "send attempt latency (s)",
                       TIME_AXIS + ", by each attempt's start", draw)


# --- distributions ---------------------------------------------------------------------------------

def _send_latency_ccdf(points, rows) -> Figure | None:
    """From send_latency's tenth-of-a-decade buckets: the share of attempts at or above each
    bucket's bounds. Buckets are sparse (nothing between 5 ms and a 3 s timeout): the curve drops
    at a bucket's upper bound and stays flat across the empty ones."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(10, 4))
    by_point = _by_point(rows, "log10_s")
    for key, name in points.items():
        data = by_point.get(key, [])
        total = sum(r["sends"] for r in data)
        if not total:
            continue
        remaining, xs, ys = total, [], []
        for r in data:
            xs += [10 ** r["log10_s"], 10 ** (r["log10_s"] + 0.1)]
            ys += [remaining / total, (remaining - r["sends"]) / total]
            remaining -= r["sends"]
        ys[-1] = ys[-2]  # nothing is slower than the top bucket: end there, not at 0 (off a log axis)
        ax.step(xs, ys, where="post", label=f"{name}  {point_label(key)}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("send attempt latency x (s)")
    ax.set_ylabel("share of attempts slower than x")
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax, loc="lower left")
    return fig


def _distributions(points, point_of_run, detection, blind) -> Figure | None:
    """Detection latency and blind window per grid point, side by side: a box and every value.
    A panel with nothing but zeros or nothing at all is left out (the HTML names it)."""
    panels = []
    metrics = [("detection_s", detection, "detection: fault → removed", "detection latency (s)"),
               ("blind_s", blind, "blind window: fault → last choice", "blind window (s)")]
    for column, rows, title, unit in metrics:
        values = defaultdict(list)
        for r in rows:
            if r[column] is not None and r["run"] in point_of_run:
                values[point_of_run[r["run"]]].append(r[column])
        if any(v for vs in values.values() for v in vs):
            panels.append((title, unit, [values.get(key, []) for key in points]))
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
    for ax, (title, unit, data) in zip(axes[0], panels):
        ax.boxplot([d or [float("nan")] for d in data], tick_labels=list(points.values()))
        for i, d in enumerate(data, 1):
            ax.plot([i] * len(d), d, ".", color="tab:blue", alpha=0.4)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("grid point")
        ax.set_ylabel(unit)
    return fig


# --- one run, node by node -------------------------------------------------------------------------

NS_STATES = {"held": ("holds the faulted broker", "tab:green"), "not held": ("does not hold it", "tab:red"),
             "up": ("up", "tab:green"), "down": ("NameServer down", "0.6")}


def _timelines(points, tables) -> Figure | None:
    by_run = defaultdict(list)
    for r in tables["timeline"]:
        by_run[r["run"]].append(r)
    runs = {point_key(rows[0]): (run, rows) for run, rows in by_run.items()}
    chosen = [(key, name, *runs[key]) for key, name in points.items() if key in runs]
    if not chosen:
        return None
    end_of = {r["run"]: r.get("end_t") for r in tables["runs"]}
    layouts = [_lanes(rows) for _, _, _, rows in chosen]
    heights = [max(2, len(lanes)) for lanes in layouts]
    fig, axes = plt.subplots(len(chosen), 1, figsize=(11, 0.35 * sum(heights) + 1.4 * len(chosen)),
                             squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax, (key, name, run, rows), lanes in zip(axes[:, 0], chosen, layouts):
        end = end_of.get(run) or max(r["t"] for r in rows)
        _timeline(ax, run, rows, lanes, end, tables)
        ax.set_title(f"{name}  {point_label(key)}  (seed {rows[0]['seed']})", fontsize=9, loc="left")
        ax.set_xlabel(TIME_AXIS)
    return fig


def _lanes(rows: list[dict]) -> list[tuple[str, str | None]]:
    """Top to bottom: a lane per NameServer, then per producer and broker group it chose."""
    nameservers = sorted({r["node"] for r in rows if r["node_role"] == "nameserver"})
    chosen = sorted({(r["node"], r["broker"]) for r in rows if r["kind"] == "producer.send" and r["broker"]})
    return [(ns, None) for ns in nameservers] + chosen


def _victim(run: str, rows: list[dict], faults: list[dict]) -> dict | None:
    """The broker node the run's first fault on a broker struck: its node, address and group."""
    brokers = {r["node"]: r for r in rows if r["kind"] == "broker.start"}
    for f in sorted((f for f in faults if f["run"] == run), key=lambda f: (f["start"], f["fault_seq"])):
        if f["target"] in brokers:
            b = brokers[f["target"]]
            return {"node": f["target"], "address": b["address"], "group": b["broker_name"]}
    return None


def _ns_states(rows: list[dict], ns: str, victim: dict | None, end: float) -> list[tuple[float, float, str]]:
    """The NameServer's hold on the victim as (start, end, state) spans: a register of its address
    holds it, a remove drops it, a (re)start begins with empty tables."""
    changes = []
    for r in rows:
        if r["node"] != ns:
            continue
        if r["kind"] == "node.stop":
            changes.append((r["t"], "down"))
        elif r["kind"] == "node.start":
            changes.append((r["t"], "not held" if victim else "up"))
        elif victim and r["kind"] in ("ns.register", "ns.remove") and r["broker_addr"] == victim["address"]:
            changes.append((r["t"], "held" if r["kind"] == "ns.register" else "not held"))
    spans = []
    for (t, state), nxt in zip(changes, [c[0] for c in changes[1:]] + [end]):
        if spans and spans[-1][2] == state:
            spans[-1] = (spans[-1][0], nxt, state)
        elif nxt > t:
            spans.append((t, nxt, state))
    return spans


def _timeline(ax, run, rows, lanes, end, tables) -> None:
    y = {lane: i for i, lane in enumerate(lanes)}
    victim = _victim(run, rows, tables["faults"])
    for lane in lanes:
        node, group = lane
        if group is None:
            for start, stop, state in _ns_states(rows, node, victim, end):
                label, color = NS_STATES[state]
                ax.broken_barh([(start, stop - start)], (y[lane] - 0.3, 0.6), color=color, alpha=0.5, label=label)
    groups = sorted({g for _, g in lanes if g})
    colors = {g: f"C{i % 10}" for i, g in enumerate(groups)}
    for lane in lanes:
        node, group = lane
        if group is None:
            continue
        sends = [r for r in rows if r["kind"] == "producer.send" and r["node"] == node and r["broker"] == group]
        ok = [r["t"] - (r["latency"] or 0) for r in sends if r["result"] == "ok"]
        failed = [r["t"] - (r["latency"] or 0) for r in sends if r["result"] != "ok"]
        ax.scatter(ok, [y[lane]] * len(ok), marker="|", s=40, color=colors[group], linewidths=0.6,
                   label=f"attempt on {group}, ok")
        ax.scatter(failed, [y[lane]] * len(failed), marker="x", s=18, color="black", linewidths=0.8,
                   label="failed attempt")
    if victim:
        for r in tables["removals"]:
            if r["run"] == run and r["address"] == victim["address"] and (r["ns"], None) in y:
                unregistered = r["reason"] == "unregistered"  # the broker said goodbye: nothing detected
                ax.scatter([r["t"]], [y[(r["ns"], None)] - 0.42], marker="v", s=50, zorder=5, edgecolors="black",
                           color="white" if unregistered else "black",
                           label="unregistered by the broker" if unregistered else "removed by the NameServer")
        for r in tables["blind"]:
            lane = (r["producer"], r["broker_name"])
            if r["run"] == run and r["target"] == victim["node"] and r["last_chosen_t"] is not None and lane in y:
                ax.scatter([r["last_chosen_t"]], [y[lane]], marker="*", s=140, zorder=5,
                           color="white" if r["censored"] else "tab:red", edgecolors="tab:red",
                           label="still choosing it at the window's end" if r["censored"]
                           else "producer's last choice of it")
    for f in tables["faults"]:
        if f["run"] == run:
            ax.axvspan(f["start"], max(f["end"], f["start"] + 0.5), color=FAULT_COLORS.get(f["verb"], "tab:gray"),
                       alpha=0.12, label=f"{f['verb']} {f['target']} (fault window)")
    ax.set_yticks(range(len(lanes)), [f"{n} → {g}" if g else n for n, g in lanes], fontsize=8)
    ax.set_ylim(len(lanes) - 0.4, -0.6)  # first lane on top
    ax.set_xlim(0, end * 1.02)  # room for a marker at the run's very end
    ax.set_ylabel("node" + (f" (faulted: {victim['node']})" if victim else ""), fontsize=8)
    _legend(ax, **BESIDE)


# --- grid points side by side ----------------------------------------------------------------------

def _grid(points, runs, shown) -> Figure | None:
    if not shown:
        return None
    cols = min(4, len(shown))
    rows_n = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(3.2 * cols, 2.9 * rows_n), squeeze=False)
    names = list(points.values())
    for ax, (column, title, unit) in zip(axes.flat, shown):
        for i, key in enumerate(points):
            values = [r[column] for r in runs if point_key(r) == key and r.get(column) is not None]
            if not values:
                continue
            mean = sum(values) / len(values)
            low, high = bootstrap_ci(values)
            ax.bar(i, mean, color="tab:blue", alpha=0.6)
            ax.errorbar(i, mean, yerr=[[mean - low], [high - mean]], color="black", capsize=4, linewidth=1)
            jitter = [0.25 * ((j * 0.618) % 1 - 0.5) for j in range(len(values))]  # spread, the same every time
            ax.plot([i + d for d in jitter], values, ".", color="tab:orange", markersize=4, alpha=0.8)
        ax.set_xticks(range(len(names)), names, fontsize=8)
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("grid point", fontsize=8)
        ax.set_ylabel(unit, fontsize=8)
    for ax in list(axes.flat)[len(shown):]:
        fig.delaxes(ax)
    return fig
