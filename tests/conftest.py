"""For the whole suite: no run leaves its broker stores behind (issue: 34 `nslab-*` folders a day),
no test leaves a process running (issue 40: a lab the tests started ran on for hours), and every
test runs with trio's scheduling seeded, so a simulated test's verdict replays from its seed.

The suite's temporary files, its child processes' too, go to a folder of its own, so another suite
running on the machine at the same time cannot be mistaken for this one."""

from __future__ import annotations

import inspect
import os
import signal
import tempfile
import time
import zlib
from pathlib import Path

import pytest

from chaos.trio_internals import deterministic_scheduling

GRACE = 5.0  # s for what a test stopped to finish exiting (a browser's helpers, a lab's last flush)


@pytest.fixture(scope="session", autouse=True)
def no_run_folder_left_behind(tmp_path_factory):
    # Under pytest-xdist each worker is a session of its own, with a folder of its own: the labs
    # two workers start at once find their runtime folders ($TMPDIR/nslab-<uid>) apart. Without
    # XDG_RUNTIME_DIR, so that the runtime folder is that one and not the user's own.
    temp = tmp_path_factory.mktemp("tmpdir")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir, os.environ.pop("XDG_RUNTIME_DIR", None)
    os.environ["TMPDIR"], tempfile.tempdir = str(temp), str(temp)
    yield
    if saved[0] is None:
        del os.environ["TMPDIR"]
    else:
        os.environ["TMPDIR"] = saved[0]
    tempfile.tempdir = saved[1]
    if saved[2] is not None:
        os.environ["XDG_RUNTIME_DIR"] = saved[2]
    left = sorted(p.name for p in temp.glob("nslab-*-*"))  # nslab-SEED-xxxx (nslab-UID holds live control)
    assert left == [], f"runs left their folders behind: {left}"


def processes_under(root: int, kept: set[int] = frozenset()) -> dict[int, str]:
    """Every running process below `root` (children, theirs, ...), from /proc's parent pids: pid →
    command line. Below a `kept` process nothing is looked at: what it starts is its own."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                state, ppid = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            except (OSError, ValueError):  # ended while we looked
                continue
            if state != "Z":  # a zombie has ended: only its reaping is left
                children.setdefault(int(ppid), []).append(int(proc.name))
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in kept:
            continue
        try:
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        todo += children.get(pid, [])
    return found


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """A test ends every process it started. Those running before it are not its own: a session's
    fixtures start first (Spark's JVM for tests/pipeline), and with them whatever they start later
    (Spark's Python workers). A process left is killed, so the next tests and the machine are
    spared, and the test fails naming it."""
    before = set(processes_under(os.getpid()))
    yield
    deadline = time.monotonic() + GRACE
    while (left := processes_under(os.getpid(), kept=before)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if left:
        pytest.fail("the test left processes running (killed now): "
                    + "; ".join(f"{pid} {command}" for pid, command in sorted(left.items())), pytrace=False)


# --- seeded scheduling ------------------------------------------------------------------------------
# trio runs the tasks that are ready at one instant in a random order. Seeded, that order is a
# function of NSLAB_TEST_SEED and the test's id: a simulated test that fails replays exactly, and
# `make schedules` runs the simulated tests (those on pytest-trio's virtual clock) under other seeds
# to find verdicts that depend on the order.

def scheduler_seed(nodeid: str) -> tuple[int, int]:
    """(NSLAB_TEST_SEED, the seed this test's trio run is scheduled with)."""
    base = int(os.environ.get("NSLAB_TEST_SEED", "0"))
    return base, zlib.crc32(f"{base}:{nodeid}".encode())


def plain_nodeid(item: pytest.Item) -> str:
    """The test's id as a run without workers names it. `pytest -n N --dist loadgroup` (make test)
    appends "@<group>" to the id of a test in an xdist_group; its scheduling seed and its replay
    command must not change with that."""
    groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                     for mark in item.iter_markers("xdist_group")})
    suffix = "@" + "_".join(groups)
    return item.nodeid.removesuffix(suffix) if groups else item.nodeid


# --- workers (pytest -n N --dist loadgroup) -------------------------------------------------------
# pytest-xdist hands tests out one by one, and a worker runs the session's and a module's fixtures
# again for the tests it is given. Kept on one worker: every test of tests/pipeline, as each starts
# Spark (the session's JVM, `nslab sweep` and `nslab report`'s own, a standalone cluster's master and
# worker): two workers' JVMs at once on two cores slowed a cluster test past its timeout. And a
# module's tests that share a module-scoped fixture (labs and runs started once for them).
PIPELINE = Path(__file__).parent / "pipeline"


def worker_group(item: pytest.Item) -> str | None:
    names = getattr(item, "fixturenames", ())
    if "spark" in names or PIPELINE in Path(item.path).parents:
        return "spark"
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(definitions.get(name) and definitions[name][-1].scope == "module" for name in names):
        return item.nodeid.split("::", 1)[0]
    return None


# --- real time (make test's phase of its own) ----------------------------------------------------
# A test whose verdict depends on wall-clock time: a timeout or a sleep on the real clock, a lab or a
# real client paced in real time, a measured duration. Beside other workers' CPU work such a test
# fails now and then, so `make test` runs them apart, with nothing beside them (-m realtime), after
# the rest has run on workers (-m "not realtime"). A test on pytest-trio's virtual clock
# (autojump_clock) is never one: its time is the clock's.
TESTS = Path(__file__).parent

# Whole folders and modules, or single tests ("module::test name prefix"), each with why.
REALTIME_PLACES = {
    "real": "the real C++ client against a lab on sockets, with its timeouts",
    "tui": "the TUI's pilot waits on the real clock for a lab paced at the UI's speed; live labs",
    "workshop/test_workshop_up.py": "the workshop's TUI through its pilot",
    "lab/test_request_fault_scenarios.py::test_a_request_fault_scenario_holds_over_real_sockets":
        "bundled scenarios over real sockets, sped up",
    "lab/test_verdicts.py::test_over_real_sockets": "a scenario over real sockets at 40x",
    "lab/test_app_runner.py": "apps as lab nodes over real TCP, in real time",
    "lab/test_app_interrupt.py": "how long an app's lab takes to stop",
    "lab/test_app_real.py": "an app on the real C++ client",
    "lab/test_processes.py": "labs of child processes at --speed",
    "lab/test_live_control.py": "a lab process at --speed driven by `nslab chaos`",
    "lab/test_registration_flood.py": "a lab process at --speed",
    "lab/test_control_hostile.py": "a running lab's control socket under hostile clients, timed",
    "lab/test_feed.py": "the live feed's viewers, waited for on the real clock",
    "lab/test_run_dir.py": "lab processes waited for on the real clock",
    "lab/test_bad_inputs.py::test_a_signal_during_start_up": "how long a starting lab takes to stop",
    "lab/test_bad_inputs.py::test_a_signal_ends_a_scenario_run": "how long a scenario run takes to stop",
    "lab/test_bad_inputs.py::test_topic_names_are_drawn_in_linear_time": "a draw's duration, measured",
    "lab/test_config_validation.py::test_a_value_out_of_range": "a refusal's duration, measured",
    "pipeline/test_cluster.py": "a standalone Spark cluster, started within a deadline",
    "lab/test_broker_resources.py": "idle times and descriptor limits on real sockets",
    "lab/test_hostile_frames.py": "hostile frames on real sockets, with timeouts",
    "chaos/test_seeded_run.py": "a run on a clock paced by real time",
    "nameserver/test_flood.py": "answers within a second, measured",
    "nameserver/test_cli.py": "the NameServer command on a real port, with timeouts",
    "nameserver/test_resource_bounds.py": "descriptor limits and stalls on real sockets",
}


# make test runs most realtime tests on workers: they mostly wait (a lab at the UI's speed, a pilot, a
# client's timeout). These use CPU in real time and fail beside other tests (sped-up runs on sockets
# beside the real C++ client's, or beside the TUI's tests), or judge how many milliseconds a real
# client's send took: marked realtime_busy too, make test runs them in one process with nothing beside
# them. Not among them: the app scenarios of tests/real (apps on the real C++ client against a lab at
# real time, a few percent of a core for minutes) and the real client's tests that judge outcomes, not
# durations (every message consumed once, a producer after a consumer left); they go to the workers.
REALTIME_BUSY = ("real/test_real_client.py::test_killed_broker_sends_fail_over_at_once",
                 "real/test_real_client.py::test_frozen_broker_sends_pay_the_timeout_then_go_elsewhere",
                 "real/test_real_client.py::test_every_nameserver_down_sends_go_on_from_the_cache",
                 "pipeline/test_cluster.py", "lab/test_request_fault_scenarios.py",
                 "lab/test_registration_flood.py", "lab/test_processes.py")


def where(item: pytest.Item) -> str:
    """The test as a place names it: its module's path under tests/, "::", its function's name."""
    return Path(item.path).relative_to(TESTS).as_posix() + "::" + getattr(item, "originalname", item.name)


def place_holds(place: str, test: str) -> bool:
    """Whether `place` (a folder, a module, or "module::test name prefix") holds `test` (a where())."""
    return test.startswith(place if "::" in place or place.endswith(".py") else place + "/")


def in_place(item: pytest.Item, place: str) -> bool:
    return place_holds(place, where(item))


def realtime_reason(item: pytest.Item) -> str | None:
    names = getattr(item, "fixturenames", ())
    if "autojump_clock" in names:
        return None
    if TESTS not in Path(item.path).parents:  # a suite of a test's own, run with this file as a plugin
        return None
    for place, why in REALTIME_PLACES.items():
        if in_place(item, place):
            return why
    # pytest-trio runs an async test on trio's real clock, its timeouts and sleeps wall-clock ones;
    # or on `mock_clock`, which without autojump stands still or runs at a rate of real time
    if inspect.iscoroutinefunction(getattr(item, "obj", None)):
        return "an async test on trio's real clock, or a mock clock run at a rate of it"
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(items):
    for item in items:
        if "autojump_clock" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.simulated)
        if realtime_reason(item):
            item.add_marker(pytest.mark.realtime)
            if any(in_place(item, place) for place in REALTIME_BUSY):
                item.add_marker(pytest.mark.realtime_busy)
        if not any(item.iter_markers("xdist_group")) and (group := worker_group(item)):
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def seeded_scheduling(request):
    base, seed = scheduler_seed(plain_nodeid(request.node))
    request.node.stash[SCHEDULER_SEED] = base
    deterministic_scheduling(seed)


SCHEDULER_SEED = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and SCHEDULER_SEED in item.stash:
        base = item.stash[SCHEDULER_SEED]
        report.sections.append(("trio scheduling", f"seeded with NSLAB_TEST_SEED={base}; replay: "
                                f"NSLAB_TEST_SEED={base} .venv/bin/python -m pytest '{plain_nodeid(item)}'"))
    return report
