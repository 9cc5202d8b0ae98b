"""Fixtures for the TUI tests; the helpers are in tui_support.py."""

import pytest


@pytest.fixture(autouse=True)
def private_runtime_dir(tmp_path, monkeypatch):
    """Each live lab's `nslab chaos` socket lives in the test's own directory."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
