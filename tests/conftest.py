"""For the whole suite: no run leaves its broker stores behind (issue: 34 `nslab-*` folders a day).

The suite's temporary files, its child processes' too, go to a folder of its own, so another suite
running on the machine at the same time cannot be mistaken for this one."""

from __future__ import annotations

import os
import tempfile

import pytest


@pytest.fixture(scope="session", autouse=True)
def no_run_folder_left_behind(tmp_path_factory):
    temp = tmp_path_factory.mktemp("tmpdir")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(temp), str(temp)
    yield
    if saved[0] is None:
        del os.environ["TMPDIR"]
    else:
        os.environ["TMPDIR"] = saved[0]
    tempfile.tempdir = saved[1]
    left = sorted(p.name for p in temp.glob("nslab-*-*"))  # nslab-SEED-xxxx (nslab-UID holds live control)
    assert left == [], f"runs left their folders behind: {left}"
