"""Fixtures for the real-client tests: a lab, and real clients in child processes (real_harness.py)."""

import os
import sys

import pytest

pytest.importorskip("rocketmq.client")  # the wheel bundles an x86-64 Linux librocketmq.so

from real_harness import CLIENT, Child, Lab  # noqa: E402


@pytest.fixture
def env(tmp_path):
    # A private runtime directory (this lab is the only one `nslab chaos` finds) and HOME (the C++
    # client writes its log under ~/logs/rocketmq-cpp).
    return {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "HOME": str(tmp_path)}


@pytest.fixture
def lab(env, tmp_path, request):
    marker = request.node.get_closest_marker("lab_args")
    lab = Lab(env, tmp_path, marker.args if marker else ())
    yield lab
    lab.stop()


@pytest.fixture
def lab_for(env, tmp_path):
    """A lab in the mode asked for: "in-process", or "processes" (NameServers and brokers as
    child processes, `nslab up --processes`)."""
    labs = []

    def start(mode: str) -> Lab:
        labs.append(Lab(env, tmp_path, ("--processes",) if mode == "processes" else ()))
        return labs[-1]

    yield start
    for lab in labs:
        lab.stop()


@pytest.fixture
def clients(env):
    started = []

    def start(*args):
        child = Child([sys.executable, CLIENT, *map(str, args)], env)
        started.append(child)
        assert child.record(timeout=30) == {"started": True}
        return child

    yield start
    for child in started:
        child.close()
