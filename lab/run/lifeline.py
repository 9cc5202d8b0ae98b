"""A child process that ends with the process that started it, however that one ends (even SIGKILL).

One mechanism for every child nslab starts: Linux's PR_SET_PDEATHSIG, set by the child itself.
`nslab up --processes`' nodes get the parent's pid in their spec (lab/run/child.py); `nslab serve`'s
lab and browser tabs get it in the environment (ENV), which `nslab` reads as it starts.

The kernel signals the child when the *thread* that forked it exits, not the process: a parent must
fork from a thread that lives as long as it does (its main thread, its event loop's), never from a
worker pool whose idle threads retire.
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
ENV = "NSLAB_DIE_WITH"  # "PID:SIGNAL", e.g. "4242:SIGTERM"


def die_with_parent(parent: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Have `sig` sent to this process when `parent` dies (Linux; elsewhere a no-op)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect (or is not who spawned us)
        os._exit(1)


def environment(sig: signal.Signals, parent: int | None = None) -> dict[str, str]:
    """The variable that makes an `nslab` child die with `parent` (this process unless given)."""
    return {ENV: f"{os.getpid() if parent is None else parent}:{sig.name}"}


def from_environment() -> None:
    """Called first by `nslab`: die with the parent ENV names, if it names one. The variable is
    removed, so this process's own children do not inherit a parent that is not theirs."""
    value = os.environ.pop(ENV, None)
    if value is None:
        return
    pid, _, name = value.partition(":")
    try:
        parent, sig = int(pid), signal.Signals[name]
    except (ValueError, KeyError):
        raise SystemExit(f"nslab: {ENV}={value!r} is not PID:SIGNAL (e.g. 4242:SIGTERM)") from None
    die_with_parent(parent, sig)
