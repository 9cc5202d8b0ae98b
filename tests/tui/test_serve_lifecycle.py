"""A served lab never outlives `nslab serve` (issue 40): however it ends — its terminal closed
(SIGHUP) or killed outright (SIGKILL: an OOM kill, a CI timeout) — no lab and no tab's `nslab
attach` is left running, and the lab stopped gracefully (its control socket gone, so the next
`nslab chaos` finds no stale lab)."""

from __future__ import annotations

import os
import signal

import pytest
from lab_process import wait_for
from serve_support import Served, Tab

from lab.control import live


@pytest.mark.parametrize("how", [signal.SIGHUP, signal.SIGKILL], ids=["SIGHUP", "SIGKILL"])
def test_the_lab_and_every_tab_end_with_nslab_serve(how):
    served = Served()
    tab = Tab(served.base)
    try:
        wait_for(lambda: any(" attach " in command for command in served.processes().values()),
                 "the tab runs its nslab attach", timeout=30)
        assert served.lab_pid in served.processes()
        served.process.send_signal(how)
        served.process.wait(30)
        wait_for(lambda: not served.processes(), "nothing nslab serve started is left", timeout=20)
        assert not live.running_labs(), "the lab stopped gracefully: its control socket is gone"
    finally:
        tab.close()
        out = served.close()
        for pid in served.processes():  # whatever it left (the test has failed): not left for others
            os.kill(pid, signal.SIGKILL)
    if how == signal.SIGHUP:  # a clean stop, as on Ctrl-C
        assert served.process.returncode == 0 and "lab: ran " in out
