"""An application as a node of the lab (issue 39 part A): `nslab run NAME --app 'CMD'` over real TCP.

The app here is tests/lab/apps/tiny_app.py: raw sockets, a route lookup on every NameServer every
0.3 s (each on its own connection, 1 s timeout), a heartbeat to every broker it learns of.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.scenario import ScenarioError
from lab.control import scenarios
from lab.events import read_events
from lab.run.runner import RunOptions

NSLAB = str(Path(sys.executable).with_name("nslab"))
TINY = Path(__file__).with_name("apps") / "tiny_app.py"
APP = f"{sys.executable} {TINY}"

SCENARIO = """\
# A tiny app beside a one-broker lab.
[scenario]
teaches = "a tiny app runs as a node of the lab"
duration = "{duration}"

[cluster]
nameservers = 2
brokers = ["broker-a"]
slavesPerBroker = 0
producers = 0
consumers = 1
topicNames = ["TinyTopic"]

[client]
pollNameServerInterval = "1s"

[[app]]
name = "tiny"
grace = "{grace}"
[app.env]
TINY = "yes"
TINY_FILE = "{{appdir}}/tiny.txt"
{timeline}
"""

PARTITION = """
[[timeline]]
at = "3s"
fault = "partition"
groups = [["tiny"], ["ns-0"]]
"""


def scenario_file(tmp_path: Path, *, duration="6s", grace="2s", timeline="") -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(SCENARIO.format(duration=duration, grace=grace, timeline=timeline))
    return path


def nslab_run(tmp_path: Path, scenario: Path, *apps: str, timeout: float = 60,
              cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, list[dict]]:
    events = tmp_path / "run.events"
    argv = [NSLAB, "run", str(scenario), "--events", str(events)]
    for app in apps:
        argv += ["--app", app]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return result, list(read_events(events)) if events.exists() else []


def of(records: list[dict], kind: str, node: str | None = None) -> list[dict]:
    return [r for r in records if r["kind"] == kind and (node is None or r["node"] == node)]


def address_of(records: list[dict], node: str) -> str:
    return next(r["address"] for r in of(records, "node.start", node))


def test_app_runs_on_relays_with_its_output_and_exit_recorded_and_a_partition_applies_to_it(tmp_path):
    scenario = scenario_file(tmp_path, timeline=PARTITION)
    work = tmp_path / "work"  # nslab's working directory: a run leaves nothing in it
    work.mkdir()
    result, records = nslab_run(tmp_path, scenario, f"{APP} --topic TinyTopic at={{namesrv}} in={{appdir}}", cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert list(work.iterdir()) == []
    apps_dir = tmp_path / "run.events.apps"
    lines = [json.loads(line) for line in (apps_dir / "tiny.stdout").read_text().splitlines()]
    assert (apps_dir / "tiny.stderr").read_text() == "tiny app on stderr\n"

    # NAMESRV_ADDR: the app's relays to ns-0 and ns-1, ';'-joined; never the NameServers' own ports
    namesrv = lines[0]["namesrv"].split(";")
    own = [address_of(records, "ns-0"), address_of(records, "ns-1")]
    assert len(namesrv) == 2 and not set(namesrv) & set(own)
    assert lines[0]["argv"][0] == f"at={lines[0]['namesrv']}"  # {namesrv} substituted
    assert lines[0]["tiny"] == "yes"  # [app.env]

    # Its folder (where its stdout is), absolute: NSLAB_APP_DIR, {appdir} in its command and [app.env]
    assert lines[0]["appdir"] == str(apps_dir.resolve()) == of(records, "app.start", "tiny")[0]["dir"]
    assert lines[0]["argv"][1] == f"in={apps_dir.resolve()}"
    assert lines[0]["tiny_file"] == str(apps_dir.resolve() / "tiny.txt")
    assert (apps_dir / "tiny.txt").read_text() == "tiny\n"

    # Routes reach the app with the broker's address its relay, not the broker's own
    routes = [line for line in lines if line.get("code") == 0]
    assert routes and {b for line in routes for b in line["brokers"]} == {routes[0]["brokers"][0]}
    assert routes[0]["brokers"][0] != address_of(records, "broker-a-0")
    route_records = of(records, "app.route", "tiny")
    assert route_records and all(r["brokers"] == ["broker-a-0"] and r["queues"] == {"broker-a-0": 4}
                                 and r["topic"] == "TinyTopic" for r in route_records)
    heartbeats = of(records, "app.heartbeat", "tiny")
    assert heartbeats and heartbeats[0]["peer"] == "broker-a-0" and heartbeats[0]["producer_groups"] == ["PG-tiny"]
    assert {r["peer"] for r in of(records, "app.conn", "tiny")} == {"ns-0", "ns-1", "broker-a-0"}

    # The partition (at 3 s): ns-0 never answers the app again, ns-1 does; the lab's consumer
    # (seed 1: it asks ns-0) still gets ns-0's answers on its own link
    requests = [r for r in of(records, "app.request", "tiny") if r["request"] == "GET_ROUTEINFO_BY_TOPIC"]
    sent_after = [r for r in requests if r["t"] > 3.5]
    assert any(r["peer"] == "ns-0" and r["result"] == 0 for r in requests if r["t"] < 3.0)
    assert [r for r in sent_after if r["peer"] == "ns-0"] and all(
        r["result"] is None and r["ms"] is None for r in sent_after if r["peer"] == "ns-0")
    assert any(r["peer"] == "ns-1" and r["result"] == 0 for r in sent_after)
    ns0 = address_of(records, "ns-0")
    assert any(r["ns"] == ns0 and r["unchanged"] == r["topics"] > 0
               for r in of(records, "client.route_poll", "consumer-0") if r["t"] > 3.5)
    assert any(line.get("ns") == namesrv[0] and line.get("error") == "TimeoutError" for line in lines)

    # Stopped at the timeline's end by SIGTERM (it exits on it), recorded so
    (start,) = of(records, "app.start", "tiny")
    (end,) = of(records, "app.exit", "tiny")
    assert start["pid"] > 0 and "at=127.0.0.1:" in start["command"]
    assert end == {**end, "code": None, "signal": "SIGTERM", "stopped_by_lab": True, "reason": "end"}
    assert 6.0 <= end["t"] < 7.5
    assert records[0]["nodes"]["tiny"] == "app"


REQUEST_FAULTS = """
[[timeline]]
at = "2s"
fault = "toxic"
node = "tiny"
peer = "ns-0"
kind = "reply"
code = "GET_ROUTEINFO_BY_TOPIC"
delay = "0.5s"

[[timeline]]
at = "2s"
fault = "toxic"
node = "tiny"
peer = "ns-1"
kind = "dialect"
code = "GET_ROUTEINFO_BY_TOPIC"
keys = "unquoted"
"""


def test_request_faults_on_the_apps_links_act_on_its_requests_alone(tmp_path):
    scenario = scenario_file(tmp_path, duration="5s", timeline=REQUEST_FAULTS)
    result, records = nslab_run(tmp_path, scenario, APP)
    assert result.returncode == 0, result.stdout + result.stderr
    routes = [r for r in of(records, "app.request", "tiny") if r["request"] == "GET_ROUTEINFO_BY_TOPIC"]
    before = [r for r in routes if r["t"] < 2.0 and r["peer"] == "ns-0"]
    after = [r for r in routes if r["t"] > 2.6 and r["peer"] == "ns-0" and r["result"] is not None]
    assert before and all(r["ms"] < 400 for r in before)
    assert after and all(r["ms"] >= 500 for r in after)  # the reply's delay is the app's latency
    faulted = of(records, "chaos.request", "lab")
    assert faulted and all("tiny" in (r["src"], r["dst"]) for r in faulted)  # its links only
    # the dialect fault: ns-1's route bodies reach the app with unquoted keys, which a standard
    # JSON parser refuses; the lab still reads them (app.route) and the broker is still its relay's
    lines = [json.loads(line) for line in (tmp_path / "run.events.apps" / "tiny.stdout").read_text().splitlines()]
    ns1 = lines[0]["namesrv"].split(";")[1]
    answers = [line for line in lines if line.get("ns") == ns1 and line.get("code") == 0]
    assert answers[0]["strict"] is True and answers[-1]["strict"] is False
    assert len({b for line in answers for b in line["brokers"]}) == 1
    assert all(r["brokers"] == ["broker-a-0"] for r in of(records, "app.route", "tiny") if r["peer"] == "ns-1")


LIFE = "".join(f"""
[[timeline]]
at = "{at}"
fault = "{verb}"
node = "tiny"
""" for at, verb in (("1s", "freeze"), ("2s", "unfreeze"), ("3s", "kill"), ("4s", "restart")))


def test_freeze_kill_and_restart_act_on_the_apps_process(tmp_path):
    scenario = scenario_file(tmp_path, duration="6s", timeline=LIFE)
    result, records = nslab_run(tmp_path, scenario, APP)
    assert result.returncode == 0, result.stdout + result.stderr
    opened = [r["t"] for r in of(records, "app.conn", "tiny") if r["state"] == "open"]
    assert [t for t in opened if t < 1.0] and [t for t in opened if 2.0 < t < 3.0]
    assert not [t for t in opened if 1.1 < t < 1.95]  # SIGSTOPped: it dials nothing
    starts, exits = of(records, "app.start", "tiny"), of(records, "app.exit", "tiny")
    assert len(starts) == 2 and starts[0]["pid"] != starts[1]["pid"] and 4.0 <= starts[1]["t"] < 4.5
    assert exits[0] == {**exits[0], "signal": "SIGKILL", "stopped_by_lab": True, "reason": "kill"}
    assert 3.0 <= exits[0]["t"] < 3.5
    assert exits[1] == {**exits[1], "signal": "SIGTERM", "reason": "end"}
    assert not [t for t in opened if 3.1 < t < 4.0]  # killed: nothing until the restart
    stdout = (tmp_path / "run.events.apps" / "tiny.stdout").read_text()
    assert stdout.count('"namesrv"') == 2  # the restarted app's output follows the first's


def test_an_app_that_ignores_sigterm_is_killed_after_its_grace(tmp_path):
    scenario = scenario_file(tmp_path, duration="3s", grace="1.5s")
    result, records = nslab_run(tmp_path, scenario, f"{APP} --ignore-term")
    assert result.returncode == 0, result.stdout + result.stderr
    (end,) = of(records, "app.exit", "tiny")
    assert end["signal"] == "SIGKILL" and end["code"] is None and end["stopped_by_lab"] is True
    assert 3.0 + 1.5 <= end["t"] < 3.0 + 3.5  # SIGTERM at 3 s, SIGKILL 1.5 s later
    assert '"term": "ignored"' in (tmp_path / "run.events.apps" / "tiny.stdout").read_text()


def test_an_app_that_exits_early_is_recorded_at_once_and_the_run_goes_on(tmp_path):
    scenario = scenario_file(tmp_path, duration="4s")
    result, records = nslab_run(tmp_path, scenario, f"{APP} --exit-after 1 --code 3")
    assert result.returncode == 0, result.stdout + result.stderr
    (end,) = of(records, "app.exit", "tiny")
    assert end["code"] == 3 and end["signal"] is None and end["stopped_by_lab"] is False and end["reason"] is None
    assert 1.0 <= end["t"] < 2.5
    assert of(records, "run.end")[0]["t"] >= 4.0


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:") and "Z" in line for line in f)  # a zombie has died
    except FileNotFoundError:
        return True


def test_the_app_dies_with_nslab_however_nslab_ends(tmp_path):
    pidfile = tmp_path / "app.pid"
    scenario = scenario_file(tmp_path, duration="60s")
    lab = subprocess.Popen([NSLAB, "run", str(scenario), "--events", str(tmp_path / "run.events"), "--run-dir",
                            str(tmp_path / "run"),  # a folder of the test's: a SIGKILLed run cannot remove its own
                            "--app", f"sh -c 'echo $$ > {pidfile}; exec sleep 60'"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = int(pidfile.read_text())
        assert not _gone(pid)
    finally:
        lab.kill()  # SIGKILL: nslab stops nothing itself
        lab.wait()
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(pid), "the app outlived nslab"


def test_the_command_line_adds_apps_and_fills_the_scenarios(tmp_path):
    scenario = scenario_file(tmp_path)
    prepared = scenarios.prepare(str(scenario), apps=["echo one", "two=echo two", "echo three"])
    assert [(a.name, a.command) for a in prepared.apps] == [("tiny", "echo one"), ("two", "echo two"),
                                                            ("app", "echo three")]
    assert prepared.apps[0].grace == 2.0 and prepared.apps[0].env == {"TINY": "yes", "TINY_FILE": "{appdir}/tiny.txt"}
    assert prepared.apps[0].argv("a;b") == ["echo", "one"]
    # a slot without a command cannot run; nor can an app in the simulation or sped up
    bare = scenarios.prepare(str(scenario))
    assert "--app" in scenarios.app_problem(bare, RunOptions(sim=False))
    assert "--sockets" in scenarios.app_problem(prepared, RunOptions(sim=True))
    assert "real time" in scenarios.app_problem(prepared, RunOptions(sim=False, speed=4))
    assert scenarios.app_problem(prepared, RunOptions(sim=False)) is None
    verdict = scenarios.run(prepared, RunOptions(sim=True))
    assert verdict.exit_code == 2 and "--sockets" in verdict.error


@pytest.mark.parametrize("table, line, message", [
    ('[[app]]\nname = "ns-0"\ncommand = "x"\n', 5, "is the name of a lab node"),
    ('[[app]]\ncommand = "x"\ngrace = "forever"\n', 6, "grace"),
    ('[[app]]\ncommand = "x"\ncolour = "red"\n', 6, "unknown key"),
    ('[[app]]\ncommand = "x \'unclosed"\n', 5, "closing quotation"),
    ('[[app]]\ncommand = "x"\n[[app]]\ncommand = "y"\n', 6, "a second app named 'app'"),
])
def test_a_bad_app_table_names_file_line_and_key(tmp_path, table, line, message):
    path = tmp_path / "bad.toml"
    path.write_text('[scenario]\nteaches = "x"\nduration = "5s"\n' + table)  # the first [[app]] is line 4
    with pytest.raises(ScenarioError) as e:
        scenarios.prepare(str(path))
    assert f"bad.toml:{line}:" in str(e.value) and message in str(e.value), str(e.value)


def test_faults_may_name_the_app_only_when_there_is_one(tmp_path):
    scenario = scenario_file(tmp_path, timeline=PARTITION)
    assert scenarios.prepare(str(scenario)).apps[0].name == "tiny"
    path = tmp_path / "noapp.toml"
    path.write_text(scenario.read_text().replace('name = "tiny"', 'name = "other"'))
    with pytest.raises(ScenarioError, match="no nameserver or broker or producer or consumer or app named 'tiny'"):
        scenarios.prepare(str(path))


def test_nslab_run_refuses_a_scenario_app_without_a_command(tmp_path):
    result = subprocess.run([NSLAB, "run", str(scenario_file(tmp_path))], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "--app 'CMD'" in result.stderr
