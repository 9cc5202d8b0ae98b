"""make test runs the suite on pytest-xdist workers with --dist loadgroup, which renames a test in an
xdist_group (its id gets "@<group>"). tests/conftest.py keeps its trio scheduling seed and its replay
command those of a run without workers: the order trio runs a moment's ready tasks in is the same
either way. And it keeps the tests that share a module-scoped fixture on one worker, so the fixture
starts once. Run in pytests of their own."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = """
import os
import pytest
import trio

@pytest.mark.trio
@pytest.mark.xdist_group("together")
async def test_order():
    order = []

    async def task(i):
        await trio.sleep(0)
        order.append(i)

    async with trio.open_nursery() as nursery:
        for i in range(12):
            nursery.start_soon(task, i)
    with open(os.environ["ORDER_FILE"], "a") as out:
        out.write(" ".join(map(str, order)) + "\\n")

@pytest.mark.xdist_group("together")
def test_fails():
    assert False
"""


def run(tmp_path: Path, name: str, *workers: str) -> tuple[str, str]:
    (tmp_path / "test_grouped.py").write_text(SUITE)
    order = tmp_path / f"{name}.order"
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-c", "/dev/null",
                             "--rootdir", str(tmp_path), *workers, str(tmp_path / "test_grouped.py")],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parent),
                                 "ORDER_FILE": str(order), "NSLAB_TEST_SEED": "3"})
    assert "1 failed, 1 passed" in result.stdout, result.stdout + result.stderr
    return order.read_text(), result.stdout


def test_a_grouped_test_on_a_worker_is_scheduled_and_replayed_as_without_workers(tmp_path):
    alone, _ = run(tmp_path, "alone")
    on_worker, out = run(tmp_path, "worker", "-n", "1", "--dist", "loadgroup")
    assert "test_grouped.py::test_fails@together" in out, "the worker ran it renamed, as loadgroup does"
    assert on_worker == alone
    assert "replay: NSLAB_TEST_SEED=3 .venv/bin/python -m pytest 'test_grouped.py::test_fails'\n" in out


SHARED = """
import os
import pytest

@pytest.fixture(scope="module")
def started():
    with open(os.environ["STARTS_FILE"], "a") as out:
        out.write(f"{os.getpid()}\\n")

@pytest.mark.parametrize("i", range(4))
def test_uses_it(started, i):
    pass

@pytest.mark.parametrize("i", range(4))
def test_alone(i):
    pass
"""


def test_the_tests_of_a_module_scoped_fixture_share_one_worker_and_one_start(tmp_path):
    (tmp_path / "test_shared.py").write_text(SHARED)
    starts = tmp_path / "starts"
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-c", "/dev/null",
                             "--rootdir", str(tmp_path), "-n", "2", "--dist", "loadgroup", str(tmp_path / "test_shared.py")],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parent), "STARTS_FILE": str(starts)})
    assert "8 passed" in result.stdout, result.stdout + result.stderr
    assert len(starts.read_text().split()) == 1, "the fixture started once, on one worker"


# --- the real-time split ---------------------------------------------------------------------------
# make test runs the suite on workers without the tests marked realtime, then those alone. A test on
# the real clock left unmarked runs beside other workers' CPU work and fails now and then. The check
# below finds such tests on its own, not from tests/conftest.py's list: from the source of each test,
# of the fixtures it takes (but the whole suite's autouse ones in tests/conftest.py) and of the
# test-tree functions and classes they name, transitively. A test showing a sign of real time must
# be marked realtime, unless it runs on a virtual clock or is excused below with its reason. (A
# `trio.sleep(0)` is a checkpoint, not a wait.)

REAL_TIME_SIGNS = (r"sim=False|\"--speed\"|speed=\d|--processes|time\.sleep\(|time\.monotonic\(|time\.perf_counter\("
                   r"|trio\.sleep(?!\(0\))|sleep_until\(|fail_after\(|move_on_after\(|Popen\(|pilot|run_test\(|wait\(timeout="
                   r"|communicate\(timeout=|create_connection\(|settimeout\(|tcp_network\(")
VIRTUAL_CLOCK = r"VirtualClock\(|MockClock\(autojump_threshold=0"

EXCUSED = {
    "tests/chaos/test_clock.py::test_sleep_until_on_another_clock_is_trios":
        "sleeps 10 ms of real time and judges only that it returns",
    "tests/lab/test_app_expectations.py::test_every_bundled_app_scenario_is_ready_for_an_app":
        "hands sim=False to a check of the scenario; nothing runs",
    "tests/lab/test_bad_inputs.py::test_a_run_option_out_of_range_is_refused":
        "--speed is the refused option; nothing runs",
}

SIGNS_PLUGIN = """
import inspect, json, os, re, types
from pathlib import Path

TESTS = Path(os.environ["TESTS_DIR"])
SIGNS, VIRTUAL = re.compile(os.environ["SIGNS"]), re.compile(os.environ["VIRTUAL"])


def ours(obj):
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        return False
    return path is not None and TESTS in Path(path).parents


def codes_of(obj):
    if isinstance(obj, types.FunctionType):
        return [obj.__code__], obj.__globals__
    functions = [v for v in vars(obj).values() if isinstance(v, types.FunctionType)]
    return [f.__code__ for f in functions], (functions[0].__globals__ if functions else {})


def sources(obj, seen):
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    try:
        found = [inspect.getsource(obj)]
    except (OSError, TypeError):
        return []
    codes, names_in = codes_of(obj)
    names = set()
    while codes:
        code = codes.pop()
        names |= set(code.co_names)
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    helpers = [m for m in names_in.values() if isinstance(m, types.ModuleType) and ours(m)]
    for name in names:
        for where in (names_in, *map(vars, helpers)):
            value = where.get(name)
            if isinstance(value, (types.FunctionType, type)) and ours(value):
                found += sources(value, seen)
    return found


def pytest_collection_modifyitems(items):
    out = {}
    for item in items:
        seen, own = set(), sources(item.obj, set())
        text = sources(item.obj, seen)
        definitions = getattr(item._fixtureinfo, "name2fixturedefs", {})
        for name in item.fixturenames:
            for fixture in definitions.get(name, ()):
                if ours(fixture.func) and Path(inspect.getsourcefile(fixture.func)) != TESTS / "conftest.py":
                    text += sources(fixture.func, seen)
        virtual = "autojump_clock" in item.fixturenames or any(VIRTUAL.search(s) for s in own)
        where = Path(item.path).relative_to(TESTS).as_posix() + "::" + getattr(item, "originalname", item.name)
        out[item.nodeid] = {"realtime": any(item.iter_markers("realtime")), "virtual": virtual,
                            "busy": any(item.iter_markers("realtime_busy")), "where": where,
                            "signs": sorted({m for s in text for m in SIGNS.findall(s)})}
    Path(os.environ["SIGNS_OUT"]).write_text(json.dumps(out))
"""


@pytest.fixture(scope="module")
def tests(tmp_path_factory) -> dict:
    """Every test of the suite, as collected: nodeid → its marks, its place, its signs of real time."""
    tmp_path = tmp_path_factory.mktemp("signs")
    (tmp_path / "signs_plugin.py").write_text(SIGNS_PLUGIN)
    out = tmp_path / "signs.json"
    root = Path(__file__).parent.parent
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "signs_plugin", "tests"],
                            capture_output=True, text=True, timeout=300, cwd=root,
                            env={**os.environ, "PYTHONPATH": str(tmp_path), "TESTS_DIR": str(root / "tests"),
                                 "SIGNS": REAL_TIME_SIGNS, "VIRTUAL": VIRTUAL_CLOCK, "SIGNS_OUT": str(out)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_test_on_real_time_is_marked_realtime(tests):
    plain = {nodeid.split("[", 1)[0] for nodeid in tests}
    assert set(EXCUSED) <= plain, f"excused tests that are gone: {sorted(set(EXCUSED) - plain)}"
    unmarked = sorted(f"{nodeid}: {', '.join(t['signs'])}" for nodeid, t in tests.items()
                      if t["signs"] and not t["virtual"] and not t["realtime"]
                      and nodeid.split("[", 1)[0] not in EXCUSED)
    assert unmarked == [], "on real time, not marked realtime (tests/conftest.py's REALTIME_PLACES):\n" + "\n".join(unmarked)
    # whole folders: the real C++ client's tests and the TUI's
    for folder in ("tests/real/", "tests/tui/"):
        assert all(t["realtime"] for nodeid, t in tests.items() if nodeid.startswith(folder)), folder
    assert not any(t["realtime"] for t in tests.values() if t["virtual"] and t["signs"] == []), \
        "a test on the virtual clock alone waits for no real time"


def suite_conftest():
    """tests/conftest.py as a module of its own (pytest holds it under a name shared with others)."""
    spec = importlib.util.spec_from_file_location("suite_conftest", Path(__file__).with_name("conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_real_time_place_holds_a_test_and_the_busy_ones_run_apart(tests):
    # A place whose tests were renamed or moved holds none: its tests would run beside others (or, busy
    # ones, on the workers) with nothing saying so.
    conftest = suite_conftest()
    wheres = {t["where"] for t in tests.values()}
    for places in (conftest.REALTIME_PLACES, conftest.REALTIME_BUSY):
        empty = sorted(p for p in places if not any(conftest.place_holds(p, w) for w in wheres))
        assert empty == [], f"places in tests/conftest.py that hold no test: {empty}"
    busy = {nodeid for nodeid, t in tests.items() if t["busy"]}
    assert busy and all(tests[nodeid]["realtime"] for nodeid in busy), "realtime_busy marks realtime tests only"
    assert busy == {nodeid for nodeid, t in tests.items() if t["realtime"]
                    and any(conftest.place_holds(p, t["where"]) for p in conftest.REALTIME_BUSY)}
