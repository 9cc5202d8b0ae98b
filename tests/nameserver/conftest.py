"""Hands tests/nameserver/helpers.py to the tests as the `h` fixture.

helpers.py is loaded by path under a private module name, so it works whatever pytest's import
mode is and whatever other `helpers` module is importable.
"""

import importlib.util
import pathlib
import sys

import pytest

_NAME = "_nameserver_test_helpers"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, pathlib.Path(__file__).with_name("helpers.py"))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
helpers = sys.modules[_NAME]


@pytest.fixture(scope="session")
def h():
    """The builders of helpers.py (stateless, so safe to share with Hypothesis tests)."""
    return helpers


@pytest.fixture
def routes():
    """A fresh RouteInfoManager harness."""
    return helpers.Routes()


@pytest.fixture
def ns():
    """A fresh DefaultRequestProcessor harness with default config."""
    return helpers.Ns()
