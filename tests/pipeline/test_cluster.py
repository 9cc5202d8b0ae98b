"""`nslab sweep` and `nslab report` on a real Spark standalone cluster (a master and a worker from the
pyspark package, on 127.0.0.1), given nothing but --master, as a user runs them: as commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.events import read_events

from standalone import Cluster, free_port

NSLAB = str(Path(sys.executable).with_name("nslab"))
GRID = "client.pollNameServerInterval=10s,30s"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = Cluster(tmp_path_factory.mktemp("spark-cluster")).start()
    yield running
    running.stop()


def nslab(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    # No MASTER or PYSPARK_PYTHON from the caller's environment: --master alone must do.
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER", "PYSPARK_PYTHON", "SPARK_HOME")}
    return subprocess.run([NSLAB, *argv], capture_output=True, text=True, timeout=timeout, env=env)


def test_a_sweep_and_its_report_run_on_a_cluster_with_only_master(cluster, tmp_path):
    out = tmp_path / "driver-only" / "sweep"
    swept = nslab("sweep", "broker-crash", "--seeds", "2", "--set", GRID, "--master", cluster.url, "--out", str(out))
    assert swept.returncode == 0, swept.stderr
    assert "4 runs: 4 valid" in swept.stdout
    # Every log reached the driver's folder whole; the worker kept none (nothing assumed shared).
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    assert sorted(p.name for p in out.glob("*.events")) == sorted(r["log"] for r in runs)
    for run in runs:
        records = list(read_events(out / run["log"]))
        assert len(records) == run["event_count"] and records[-1]["kind"] == "run.end"
    assert not list(cluster.work_dir.rglob("*.events"))

    # The report's executors read logs they cannot see on the driver's disk: the driver ships them.
    reported = nslab("report", str(out), "--master", cluster.url, "--json")
    assert reported.returncode == 0, reported.stderr
    summary = json.loads(reported.stdout)
    assert summary["runs"] == 4
    assert [p["grid_label"] for p in summary["grid_points"]] == [f"client.pollNameServerInterval={v}"
                                                                  for v in ("10s", "30s")]
    assert (out / "report" / "index.html").exists() and (out / "report" / "tables" / "runs.parquet").exists()
    assert "report: " in reported.stderr  # progress while it runs


def test_uris_are_read_and_written_through_hadoop_on_a_cluster(cluster, tmp_path):
    out = tmp_path / "uri"
    swept = nslab("sweep", "broker-crash", "--seeds", "1", "--master", cluster.url, "--out", out.as_uri())
    assert swept.returncode == 0, swept.stderr
    reported = nslab("report", out.as_uri(), "--master", cluster.url, "--out", (tmp_path / "r").as_uri(), "--json")
    assert reported.returncode == 0, reported.stderr
    assert json.loads(reported.stdout)["runs"] == 1 and (tmp_path / "r" / "index.html").exists()


def test_an_unreachable_master_is_one_line_at_once(tmp_path):
    url = f"spark://127.0.0.1:{free_port()}"
    result = nslab("sweep", "broker-crash", "--seeds", "1", "--master", url, "--out", str(tmp_path / "s"), timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f"nslab sweep: cannot reach the Spark master {url}")
    assert "Traceback" not in result.stderr and "py4j" not in result.stderr
    assert not (tmp_path / "s").exists()


def test_executors_without_a_usable_python_are_one_line(cluster, tmp_path):
    result = nslab("sweep", "broker-crash", "--seeds", "1", "--master", cluster.url, "--python", "/nonexistent/python3",
                   "--out", str(tmp_path / "s"))
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("nslab sweep: executors of") and "/nonexistent/python3" in last and "--python" in last
    assert "Traceback" not in result.stderr
