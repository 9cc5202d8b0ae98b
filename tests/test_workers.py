"""make test runs the suite on pytest-xdist workers with --dist loadgroup, which renames a test in an
xdist_group (its id gets "@<group>"). tests/conftest.py keeps its trio scheduling seed and its replay
command those of a run without workers: the order trio runs a moment's ready tasks in is the same
either way. And it keeps the tests that share a module-scoped fixture on one worker, so the fixture
starts once. Run in pytests of their own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
