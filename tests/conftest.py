"""For the whole suite: no run leaves its broker stores behind (issue: 34 `nslab-*` folders a day),
no test leaves a process running (issue 40: a lab the tests started ran on for hours), and every
test runs with trio's scheduling seeded, so a simulated test's verdict replays from its seed.

The suite's temporary files, its child processes' too, go to a folder of its own, so another suite
running on the machine at the same time cannot be mistaken for this one."""

from __future__ import annotations

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


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(items):
    for item in items:
        if "autojump_clock" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.simulated)
        if not any(item.iter_markers("xdist_group")) and (group := worker_group(item)):
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_configure(config):
    config.addinivalue_line("markers", "simulated: runs on pytest-trio's virtual clock (make schedules)")


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
