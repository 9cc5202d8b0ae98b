"""The app scenarios end to end (issue 39): `nslab run NAME --app CMD` with the sample apps of
examples/apps on the real C++ client. The well-behaved python_app is valid; each broken app is
caught by the expectation built for it, with the right message.

The bundled app scenarios take 2-2.5 minutes of real time each, too long for `make test`: these
tests run each one shortened (its faults earlier, its end sooner: `shortened` edits the bundled
text, and fails loudly when the bundled file no longer says what it replaces), under a minute each.
With NSLAB_APP_LIBRARY=1 the last tests run the whole bundled library, full length, with python_app,
and each broken app through the scenario that catches it (~25 minutes):
`NSLAB_APP_LIBRARY=1 .venv/bin/python -m pytest tests/real/test_app_scenarios.py -k library`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab.control import scenarios
from lab.events import read_events

NSLAB = str(Path(sys.executable).with_name("nslab"))
APPS = Path(__file__).resolve().parents[2] / "examples" / "apps"


def shortened(name: str, replacements: list[tuple[str, str]], drop: tuple[str, ...] = ()) -> str:
    """The bundled scenario's text with each (old, new) replaced once, and the [[expect]] tables
    whose name starts with one of `drop` left out."""
    text = (scenarios.BUNDLED / f"{name}.toml").read_text()
    for old, new in replacements:
        assert text.count(old) == 1, f"{name}.toml no longer has {old!r} once"
        text = text.replace(old, new)
    tables = text.split("\n[[expect]]\n")
    kept = [tables[0]] + [t for t in tables[1:] if not any(t.startswith(f'name = "{d}') for d in drop)]
    assert len(kept) == len(tables) - len(drop), f"{name}.toml: not every expectation of {drop} found"
    return "\n[[expect]]\n".join(kept)


def run_app(tmp_path: Path, name: str, text: str, app: str, *, timeout: float = 120):
    """Run the scenario (its text, under its bundled name) with the app; the report and the records."""
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    events = tmp_path / "run.events"
    env = {**os.environ, "HOME": str(tmp_path)}  # the C++ client logs under ~/logs/rocketmq-cpp
    result = subprocess.run([NSLAB, "run", str(path), "--json", "--events", str(events),
                             "--app", f"{sys.executable} {APPS / app}"],
                            capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path)
    assert result.stdout.strip(), result.stderr
    report = json.loads(result.stdout)
    report["exit"] = result.returncode
    report["app_stderr"] = (tmp_path / "run.events.apps" / "app.stderr").read_text()[-2000:] \
        if (tmp_path / "run.events.apps" / "app.stderr").exists() else ""
    return report, list(read_events(events))


def results(report) -> dict[str, dict]:
    return {e["name"]: e for e in report["expectations"]}


def held(report) -> str:
    """A failure's explanation: the expectations that did not hold, and the app's last words."""
    return "\n".join(f"{e['status']}: {e['name']}: {e['detail']}" for e in report["expectations"] if not e["ok"]) \
        + f"\nerror: {report.get('error')}\napp stderr: {report['app_stderr']}"


# The bundled scenarios, shortened: faults early, ends sooner. What each keeps is the point.

BROKER_CRASH = ("app-broker-crash", [('duration = "2m"', 'duration = "50s"'), ('at = "30s"', 'at = "12s"'),
                                     ('at = "80s"', 'at = "30s"'), ('start = "30s"\nend = "80s"', 'start = "12s"\nend = "30s"'),
                                     ('start = "65s"\nend = "80s"', 'start = "25s"\nend = "30s"')],
                ("the app stops sending to the dead broker", "after its route poll"))
MASTER_DOWN = ("app-master-down", [('duration = "2m"', 'duration = "50s"'), ('at = "30s"', 'at = "10s"'),
                                   ('at = "70s"', 'at = "28s"'), ('start = "30s"\nend = "70s"', 'start = "10s"\nend = "28s"')],
               ())
ALL_NS_DOWN = ("app-all-nameservers-down", [('duration = "2m"', 'duration = "45s"'), ('at = "30s"', 'at = "10s"'),
                                            ('at = "80s"', 'at = "30s"'),
                                            ('start = "30s"\nend = "80s"', 'start = "10s"\nend = "30s"')],
               ())


def test_the_well_behaved_app_is_valid_through_a_broker_crash(tmp_path):
    name, replacements, drop = BROKER_CRASH
    history = '\n[[expect]]\nname = "its history agrees with the wire"\ntype = "app_history"\nfile = "history.jsonl"\n'
    report, records = run_app(tmp_path, name, shortened(name, replacements, drop) + history, "python_app.py")
    assert report["exit"] == 0, held(report)
    assert report["valid"] is True
    assert "agree with the wire" in results(report)["its history agrees with the wire"]["detail"]
    detail = results(report)["every message acknowledged to the app is consumed by its group"]["detail"]
    in_folder = tmp_path / "run.events.apps" / "history.jsonl"  # the app's folder ({appdir}), not nslab's cwd
    assert f"processed (by its history {in_folder.resolve()}) by CG-app" in detail
    assert "agree with the wire" in results(report)["its history agrees with the wire"]["detail"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("logs", ".cache")) == \
        [f"{name}.toml", "run.events", "run.events.apps"]  # the scenario, --events and its apps folder only
    sends = [r for r in records if r["kind"] == "app.send" and r["result"] == 0]
    assert {r["peer"] for r in sends} == {"broker-a-0", "broker-b-0"}


def test_the_well_behaved_app_is_valid_with_every_nameserver_down(tmp_path):
    name, replacements, drop = ALL_NS_DOWN
    report, _ = run_app(tmp_path, name, shortened(name, replacements, drop), "python_app.py")
    assert report["exit"] == 0, held(report)
    rate = results(report)["the app lives on its cached routes at full rate while every NameServer is down"]
    assert rate["ok"] is True and "between 10s and 30s" in rate["detail"]


def test_an_app_that_never_retries_is_caught_when_the_only_master_is_down(tmp_path):
    name, replacements, drop = MASTER_DOWN
    report, _ = run_app(tmp_path, name, shortened(name, replacements, drop), "no_retry_app.py")
    assert report["exit"] == 1, held(report)
    by_name = results(report)
    recovers = by_name["the app retries until the master is back, then sends at full rate"]
    assert recovers["ok"] is False, held(report)
    assert re.search(r"after restart broker-a-0 ended the faults at t=28(\.\d)?s \(no ack after it\)",
                     recovers["detail"]), recovers["detail"]
    rate = by_name["the app sends at its rate outside the fault"]
    assert rate["ok"] is False and "app had 0 sends acknowledged in the second from" in rate["detail"]
    assert by_name["the app runs through every fault and stops cleanly when the lab stops it"]["ok"] is True


def test_an_app_that_commits_before_processing_and_dies_is_caught(tmp_path):
    name, replacements, drop = BROKER_CRASH
    text = shortened(name, replacements + [('duration = "50s"', 'duration = "30s"')], drop)
    report, _ = run_app(tmp_path, name, text, "commit_first_app.py")
    assert report["exit"] == 1, held(report)
    by_name = results(report)
    running = by_name["the app runs through every fault and stops cleanly when the lab stops it"]
    assert running["ok"] is False and "(exit code 3) before the lab stopped it" in running["detail"]
    loss = by_name["every message acknowledged to the app is consumed by its group"]
    assert loss["ok"] is False, held(report)
    history = (tmp_path / "run.events.apps" / "history.jsonl").resolve()
    assert f"never processed by group CG-app (by its history {history})" in loss["detail"]
    assert "committed before processing?" in loss["detail"]


def test_an_app_that_exits_without_nameservers_is_caught(tmp_path):
    name, replacements, drop = ALL_NS_DOWN
    text = shortened(name, replacements + [('duration = "45s"', 'duration = "30s"')], drop)
    report, _ = run_app(tmp_path, name, text, "ns_crash_app.py")
    assert report["exit"] == 1, held(report)
    running = results(report)["the app runs through every fault and stops cleanly when the lab stops it"]
    assert running["ok"] is False, held(report)
    assert re.search(r"\(exit code 2\) before the lab stopped it, during ns-down all \(since t=10(\.\d)?s\)",
                     running["detail"]), running["detail"]


LIBRARY = pytest.mark.skipif(os.environ.get("NSLAB_APP_LIBRARY") != "1",
                             reason="the app library at full length (~25 min): set NSLAB_APP_LIBRARY=1")


@LIBRARY
@pytest.mark.parametrize("path", scenarios.app_scenarios(), ids=lambda p: p.stem)
def test_the_well_behaved_app_is_valid_on_the_whole_library(tmp_path, path):
    report, _ = run_app(tmp_path, path.stem, path.read_text(), "python_app.py", timeout=400)
    assert report["exit"] == 0, held(report)


@LIBRARY
@pytest.mark.parametrize("scenario, app, caught", [
    ("app-master-down", "no_retry_app.py", "the app retries until the master is back, then sends at full rate"),
    ("app-broker-crash", "commit_first_app.py", "every message acknowledged to the app is consumed by its group"),
    ("app-all-nameservers-down", "ns_crash_app.py",
     "the app runs through every fault and stops cleanly when the lab stops it"),
], ids=["no_retry_app", "commit_first_app", "ns_crash_app"])
def test_each_broken_app_is_caught_by_the_full_library_scenario(tmp_path, scenario, app, caught):
    path = scenarios.find(scenario)
    report, _ = run_app(tmp_path, scenario, path.read_text(), app, timeout=400)
    assert report["exit"] == 1 and results(report)[caught]["ok"] is False, held(report)
