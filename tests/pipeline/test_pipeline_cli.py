"""`nslab sweep` and `nslab report` through the parser lab/cli.py gets from add_commands, the grid,
a sweep end to end, and Spark's setup checks."""

from __future__ import annotations

import argparse
import json
import stat

import pytest

from lab.config import ConfigError
from lab.events import read_events
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


def test_a_run_that_fails_is_recorded_as_failed_not_raised(tmp_path):
    outcome = run_one(RunSpec(str(tmp_path / "gone.toml"), 1, {}, str(tmp_path / "x.events")))
    assert outcome["status"] == "failed" and "gone.toml" in outcome["error"]


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
    assert start["config"]["client"]["pollNameServerInterval"] == 30.0 and start["schema"] == 2

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
    for name in ("index.html", "availability.png", "latency.png", "grid.png", "tables/runs", "tables/blind"):
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
