"""`nslab sweep` and `nslab report` through the parser lab/cli.py gets from add_commands, the grid,
a sweep end to end, and Spark's setup checks."""

from __future__ import annotations

import argparse
import json
import stat
import zlib
from pathlib import Path

import pytest

from lab.config import ConfigError
from lab.events import SCHEMA_VERSION, read_events
from lab.pipeline import cli, spark as spark_setup
from lab.pipeline.sweep import RunSpec, parse_grid, run_one

# Producers poll routes at 10 s or 30 s from their start; the broker dies at 5 s, so they keep
# choosing it until about 10 s or about 30 s.
SHORT_SCENARIO = """
[scenario]
teaches = "A one-minute broker crash, for the sweep test."
duration = "1m"

[[timeline]]
at = "5s"
fault = "kill"
node = "broker-a-0"

[[timeline]]
at = "50s"
fault = "restart"
node = "broker-a-0"

[[expect]]
type = "all_acked_consumed"
"""


def nslab(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="nslab")
    cli.add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.run(args)


def test_the_grid_is_every_combination_of_the_values():
    assert parse_grid(["client.pollNameServerInterval=10s,30s", "producer.sendLatencyFaultEnable=true,false"]) == [
        {"client.pollNameServerInterval": "10s", "producer.sendLatencyFaultEnable": "true"},
        {"client.pollNameServerInterval": "10s", "producer.sendLatencyFaultEnable": "false"},
        {"client.pollNameServerInterval": "30s", "producer.sendLatencyFaultEnable": "true"},
        {"client.pollNameServerInterval": "30s", "producer.sendLatencyFaultEnable": "false"},
    ]
    assert parse_grid([]) == [{}]
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_grid(["client.pollNameServerInterval"])


def test_sweep_help_says_list_values_cannot_be_swept(capsys):
    with pytest.raises(SystemExit):
        nslab("sweep", "--help")
    assert "latencyMax" in " ".join(capsys.readouterr().out.split())


def test_a_bad_key_stops_the_sweep_before_any_run(tmp_path, capsys):
    assert nslab("sweep", "broker-crash", "--seeds", "2", "--set", "client.noSuchKey=1,2",
                 "--out", str(tmp_path / "out")) == 2
    assert "noSuchKey" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_run_that_fails_is_recorded_as_failed_not_raised():
    record, log = run_one(RunSpec("broken", "[scenario]\nteaches = 'x'\nduration = 'soon'\n", 1, {}, 0, "b.events"))
    assert record["status"] == "failed" and "soon" in record["error"]
    assert zlib.decompress(log) == b""  # nothing ran: an empty log, still sent back


def test_a_run_carries_its_scenario_text_and_sends_its_log_back(tmp_path):
    """Executors need none of the driver's files: the task holds the scenario, the log comes back."""
    record, packed = run_one(RunSpec("short-crash", SHORT_SCENARIO, 2, {"client.pollNameServerInterval": "10s"},
                                     3, "short-crash-g03-s0002.events"))
    assert record["status"] == "valid" and record["grid_index"] == 3
    records = list(read_events(zlib.decompress(packed)))
    assert len(records) == record["event_count"]
    assert records[0]["grid_index"] == 3 and records[0]["seed"] == 2 and records[0]["scenario"] == "short-crash"
    assert not list(tmp_path.iterdir())


def test_report_on_a_directory_without_logs_says_so(spark, tmp_path, capsys):
    assert nslab("report", str(tmp_path)) == 2
    assert "no event logs" in capsys.readouterr().err


def test_sweep_then_report_end_to_end(spark, tmp_path, capsys):
    scenario = tmp_path / "short-crash.toml"
    scenario.write_text(SHORT_SCENARIO)
    out = tmp_path / "sweep"
    assert nslab("sweep", str(scenario), "--seeds", "2", "--set", "client.pollNameServerInterval=10s,30s",
                 "--out", str(out)) == 0
    err = capsys.readouterr().err
    assert "4/4 runs" in err  # the progress bar got to the end

    manifest = json.loads((out / "sweep.json").read_text())
    assert [r["status"] for r in manifest["runs"]] == ["valid"] * 4
    logs = sorted(out.glob("*.events"))
    assert len(logs) == 4
    start = next(read_events(logs[-1]))
    assert start["grid"] == {"client.pollNameServerInterval": "30s"} and start["seed"] == 2
    assert start["config"]["client"]["pollNameServerInterval"] == 30.0 and start["schema"] == SCHEMA_VERSION

    report_dir = tmp_path / "report"
    assert nslab("report", str(out), "--out", str(report_dir), "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == 4 and summary["events"] == sum(r["event_count"] for r in manifest["runs"])
    grid = {row["grid_label"]: row for row in summary["grid_points"]}
    fast, slow = grid["client.pollNameServerInterval=10s"], grid["client.pollNameServerInterval=30s"]
    assert fast["runs"] == slow["runs"] == 2 and fast["messages"] > 400
    assert fast["detection_max_s"] < 0.1  # a killed broker's connections close: removed at once
    # A producer stays on the dead broker until its next route poll, which each seed places anywhere
    # in the poll interval: the blind time is bounded by the interval swept.
    assert 0 < fast["blind_p50_s"] < 10 and 0 < slow["blind_p50_s"] < 30
    for name in ("index.html", "availability.png", "latency.png", "grid.png", "tables/runs.parquet",
                 "tables/blind.parquet"):
        assert (report_dir / name).exists()


def _fake_java(tmp_path, version_line: str) -> str:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path)


@pytest.mark.parametrize("line, version", [('openjdk version "17.0.15" 2025-04-15', 17),
                                           ('openjdk version "21" 2023-09-19', 21),
                                           ('java version "1.8.0_402"', 8)])
def test_java_version_is_read_from_java_home(tmp_path, monkeypatch, line, version):
    monkeypatch.setenv("JAVA_HOME", _fake_java(tmp_path, line))
    assert spark_setup.java_version() == version


def test_too_old_or_missing_java_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", _fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15'))
    with pytest.raises(spark_setup.SparkSetupError, match=r"Java 17\+, but `java` is Java 11: install a JDK 17"):
        spark_setup.check_java()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(spark_setup.SparkSetupError, match="no working `java` was found: install a JDK 17"):
        spark_setup.check_java()


def test_the_master_comes_from_the_option_then_master_then_spark_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("MASTER", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark_setup.master_url() == "local[*]"
    (tmp_path / "spark-defaults.conf").write_text("# cluster\nspark.master   spark://head:7077\n")
    assert spark_setup.master_url() == "spark://head:7077"
    monkeypatch.setenv("MASTER", "local[3]")
    assert spark_setup.master_url() == "local[3]"
    assert spark_setup.master_url("local[1]") == "local[1]"


@pytest.mark.parametrize("command", ["sweep", "report"])
def test_without_the_analytics_extra_a_command_says_what_to_install(command, monkeypatch, capsys, tmp_path):
    real = cli.importlib.util.find_spec
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None if name == "pyspark" else real(name))
    argv = ["broker-crash", "--seeds", "1", "--out", str(tmp_path)] if command == "sweep" else [str(tmp_path)]
    assert nslab(command, *argv) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"nslab {command}: needs pyspark") and "pip install 'nslab[analytics]'" in error


def test_a_sweep_without_java_leaves_no_out_folder(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "sweep"
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "nowhere")}
    result = subprocess.run([str(Path(sys.executable).with_name("nslab")), "sweep", "broker-crash", "--seeds", "1",
                             "--out", str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2 and "no working `java` was found" in result.stderr
    assert not out.exists()


def test_a_sweep_prints_no_jvm_noise_first(tmp_path):
    """The first line a user sees is the sweep's own, not the JVM's incubator-module warning."""
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run([str(Path(sys.executable).with_name("nslab")), "sweep", "broker-crash", "--seeds", "1",
                             "--out", str(tmp_path / "sweep")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == f"sweep broker-crash: 1 grid points x 1 seeds = 1 runs into {tmp_path / 'sweep'}"
    assert "WARNING: Using incubator modules" not in result.stderr


VIOLATION = Path(__file__).parents[1] / "lab" / "violations" / "all_acked_consumed.toml"


def _sweep(out, *extra: str, seeds: str = "2") -> int:
    return nslab("sweep", str(VIOLATION), "--seeds", seeds, "--out", str(out), *extra)


def test_an_invalid_run_is_explained_in_sweep_json_and_on_screen(spark, tmp_path, capsys):
    assert _sweep(tmp_path / "out", seeds="1") == 0
    printed = capsys.readouterr().out
    run, = json.loads((tmp_path / "out" / "sweep.json").read_text())["runs"]
    assert run["status"] == "invalid"
    assert run["failed_expectations"] and run["failed_expectations"][0].startswith("all_acked_consumed")
    assert f"invalid: {run['log']}" in printed and run["failed_expectations"][0] in printed
    failed = [r for r in read_events(tmp_path / "out" / run["log"]) if r["kind"] == "check.result" and not r["ok"]]
    assert failed and failed[0]["status"] == "failed"  # the event log holds the failed expectation too


def test_a_used_out_folder_is_refused_unless_resume_or_force(spark, tmp_path, capsys):
    out = tmp_path / "out"
    assert _sweep(out) == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    capsys.readouterr()
    assert _sweep(out, seeds="3") == 2
    error = capsys.readouterr().err
    assert "is not empty (2 event logs, sweep.json)" in error and "--resume" in error and "--force" in error
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before  # nothing touched

    # --resume with one more seed and one log lost: only those two run, the others are kept as they are.
    lost = out / "all_acked_consumed-g00-s0001.events"
    lost.unlink()
    assert _sweep(out, "--resume", seeds="3") == 0
    assert "(1 already done)" in capsys.readouterr().err
    assert (out / "all_acked_consumed-g00-s0002.events").stat().st_mtime_ns == before[
        "all_acked_consumed-g00-s0002.events"]
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    assert [(r["seed"], r["status"]) for r in runs] == [(1, "invalid"), (2, "invalid"), (3, "invalid")]
    assert lost.exists()

    # Another grid is another sweep: --resume refuses to mix them.
    assert _sweep(out, "--resume", "--set", "producer.rate=5,10") == 2
    assert "another grid" in capsys.readouterr().err

    # --force starts again: the old logs go.
    assert _sweep(out, "--force", seeds="1") == 0
    assert sorted(p.name for p in out.iterdir()) == ["all_acked_consumed-g00-s0001.events", "sweep.json"]


def test_out_may_be_a_uri_written_through_hadoop(spark, tmp_path, capsys):
    """A URI goes through Spark's Hadoop client (here file://, as hdfs:// would); a scheme it does not
    know is a one-line error, not a folder named after the scheme."""
    out = tmp_path / "viahadoop"
    assert _sweep(out.as_uri(), seeds="1") == 0
    assert (out / "all_acked_consumed-g00-s0001.events").stat().st_size > 0 and (out / "sweep.json").exists()
    capsys.readouterr()
    assert nslab("sweep", str(VIOLATION), "--seeds", "1", "--out", "nosuch://bucket/sweep") == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no filesystem for 'nosuch'" in error
    assert not Path("nosuch:").exists()
