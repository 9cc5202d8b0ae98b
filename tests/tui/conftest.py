"""Fixtures for the TUI tests; the helpers are in tui_support.py."""

import pytest


@pytest.fixture(autouse=True)
def private_runtime_dir(tmp_path, monkeypatch):
    """Each live lab's `nslab chaos` socket lives in the test's own directory."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))


def pytest_terminal_summary(terminalreporter):
    """The browser test skips without chromium: say so where nobody can miss it."""
    for report in terminalreporter.stats.get("skipped", []):
        if "test_serve.py" in report.nodeid:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            terminalreporter.write_line(f"SKIPPED the browser test: {reason}", yellow=True, bold=True)
