"""The scenario library and the checks: every bundled scenario holds, every check can fail, a bad
file is refused before anything runs, and `nslab run` speaks to CI."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lab.control import expectations, scenarios
from lab.config import ConfigError
from lab.run.runner import RunOptions
from chaos.scenario import ScenarioError

VIOLATIONS = Path(__file__).parent / "violations"
NSLAB = str(Path(sys.executable).with_name("nslab"))


def run(name_or_path, **kwargs):
    return scenarios.run(scenarios.prepare(str(name_or_path), **kwargs), RunOptions(sim=True))


@pytest.mark.parametrize("path", sorted(VIOLATIONS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_expectation_type_can_fail(path):
    verdict = run(path)
    assert verdict.exit_code == 1, [r.to_dict() for r in verdict.results]
    assert [r.ok for r in verdict.results] == [False]
    assert verdict.results[0].name.startswith(path.stem)


def test_every_expectation_type_has_a_violation_scenario():
    assert {p.stem for p in VIOLATIONS.glob("*.toml")} == set(expectations.TYPES)


def test_a_scenario_is_a_pure_function_of_its_seed():
    first, second = run("nameserver-restart"), run("nameserver-restart")
    assert first.event_log_sha256 == second.event_log_sha256
    assert run("nameserver-restart", seed=99).event_log_sha256 != first.event_log_sha256


def test_a_large_cluster_is_a_pure_function_of_its_seed_too():
    # 3 NameServers, 16 brokers, 2,000 topics: the route caches, counted polls and partial
    # ns.tables records keep a run byte for byte the same.
    first, second = run("large-cluster-broker-crash", seed=3), run("large-cluster-broker-crash", seed=3)
    assert first.valid is True and first.event_log_sha256 == second.event_log_sha256


def test_every_bundled_scenario_says_what_it_teaches():
    for path in scenarios.bundled():
        text = path.read_text()
        assert text.startswith("# ") and len(text.splitlines()[0]) > 40, path.name
        assert scenarios.prepare(str(path)).scenario.teaches


BAD = [
    ('[scenario]\nteaches = "x"\nduration = "1m"\n\n[cluster]\nbrokerz = 2\n', 6, "[cluster] brokerz", "unknown key"),
    ('[scenario]\nteaches = "x"\nduration = "1m"\n\n[[timeline]]\nat = "soon"\nfault = "kill"\nnode = "broker-a-0"\n',
     6, "[[timeline]] #1 at", "bad duration"),
    ('[scenario]\nteaches = "x"\nduration = "1m"\n\n[[timeline]]\nat = "10s"\nfault = "kill"\nnode = "broker-z-0"\n',
     8, "[[timeline]] #1 node", "no nameserver or broker or producer or consumer named 'broker-z-0'"),
    ('[scenario]\nteaches = "x"\nduration = "1m"\n\n[[timeline]]\nat = "10s"\nfault = "explode"\nnode = "ns-0"\n',
     7, "[[timeline]] #1 fault", "unknown fault 'explode'"),
    ('[scenario]\nteaches = "x"\nduration = "1m"\n\n[[expect]]\ntype = "broker_removed"\nbroker = "broker-q-0"\nwithin = "5s"\n',
     7, "[[expect]] #1 broker", "no broker named 'broker-q-0'"),
    ('[scenario]\nteaches = "x"\nduration = "1m"\n\n[[expect]]\ntype = "everything_fine"\n',
     6, "[[expect]] #1 type", "unknown expectation type"),
    ('[scenario]\nteaches = "x"\nduration = "1m"\n\n[[expect]]\ntype = "duplicates"\nmaxx = 3\n',
     7, "[[expect]] #1 maxx", "unknown parameter"),
    ('[scenario]\nteaches = "x"\nduration = "1m"\n\n[[expect]]\ntype = "send_success_rate"\nphase = "later"\nmin = 1\n',
     7, "[[expect]] #1 phase", "no phase named 'later'"),
    ('[scenario]\nduration = "1m"\n', 1, "[scenario] teaches", "what the scenario teaches"),
]


@pytest.mark.parametrize("text, line, key, message", BAD, ids=[b[2] for b in BAD])
def test_a_bad_scenario_names_file_line_and_key_before_anything_runs(tmp_path, text, line, key, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises((ScenarioError, ConfigError)) as info:
        scenarios.prepare(str(path))
    error = str(info.value)
    assert error.startswith(f"{path}:{line}: {key}"), error
    assert message in error


def test_an_unknown_scenario_name_lists_the_bundled_ones():
    with pytest.raises(ScenarioError, match="broker-crash"):
        scenarios.prepare("no-such-scenario")


def test_nslab_run_prints_seed_and_profile_first_and_reports_for_ci(tmp_path):
    junit = tmp_path / "junit.xml"
    result = subprocess.run([NSLAB, "run", str(VIOLATIONS / "broker_kept.toml"), "--seed", "4",
                             "--junit", str(junit)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith("seed 4") and "--seed 4" in lines[1]
    assert "at 20s: kill broker-a-0" in lines[4]
    assert lines[-1].startswith("INVALID: 0/1 expectations held")
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    assert suite.find("testcase/failure") is not None

    result = subprocess.run([NSLAB, "run", "nameserver-restart", "--json"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) >= {"scenario", "seed", "valid", "virtual_seconds", "wall_seconds", "event_count",
                           "event_log_sha256", "expectations"}
    assert report["valid"] is True and all(e["ok"] for e in report["expectations"])


def test_a_bad_scenario_exits_2_with_the_reason(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[scenario]\nteaches = "x"\nduration = "2 weeks"\n')
    result = subprocess.run([NSLAB, "run", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"{path}:3: [scenario] duration: bad duration" in result.stderr


def test_nslab_scenarios_lists_the_library_a_line_each():
    result = subprocess.run([NSLAB, "scenarios"], capture_output=True, text=True, timeout=60)
    simulated, _, apps = result.stdout.partition("\n\n")
    names = [line.split()[0] for line in simulated.splitlines()]
    assert names == [p.stem for p in scenarios.bundled()]
    # then the app scenarios, under a line saying how to run them
    heading, *app_lines = apps.splitlines()
    assert "--app" in heading
    assert [line.split()[0] for line in app_lines] == [p.stem for p in scenarios.app_scenarios()]
    for required in ("broker-crash", "broker-hang", "broker-graceful-shutdown", "all-nameservers-down",
                     "one-nameserver-down", "partition", "nameserver-divergence", "nameserver-restart",
                     "write-perm-wipe", "master-down", "oversized-heartbeat", "blackholed-nameserver"):
        assert required in names
