"""An application's process: started in its own process group with its output in files, stopped
with SIGTERM then SIGKILL after its grace, killed with the lab however the lab ends.

- Stopped with SIGTERM and its grace, then SIGKILL, at the timeline's end (reason `end`), by a `stop`
  fault (`stop`), and when nslab is interrupted (SIGINT, SIGTERM: reason `interrupted`); a `kill`
  fault SIGKILLs it at once (`kill`).

- Its own process group (a new session): a terminal's Ctrl-C reaches only nslab, which stops the
  app itself; stop, kill, freeze (SIGSTOP) and unfreeze (SIGCONT) go to the whole group, so a
  shell script's children go with it.
- PR_SET_PDEATHSIG (lab/run/lifeline.py), set in the child before it runs the command: the app is
  SIGKILLed if nslab dies abruptly. (Its own children, if it starts any, are not: the group is
  killed when nslab ends it, not when nslab is SIGKILLed.)
- Forked in trio's thread, not a worker thread: the death signal follows the forking thread.

Its folder (`logs`, where its stdout and stderr go) is its own place for files: NSLAB_APP_DIR in its
environment and `{appdir}` in its command and [app.env] (spec.py), absolute.

Records: app.start {command, pid, stdout, stderr, dir (its folder)} and app.exit {code, signal, stopped_by_lab, reason}.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from pathlib import Path

import trio

from lab.events import EventLog
from lab.run import lifeline

from .spec import AppSpec


def logs_dir(run_dir: Path | None, events_path: Path | None) -> Path | None:
    """Where apps' stdout and stderr go: <run_dir>/apps, else beside the event log
    (<events>.apps/), else None (the caller picks a directory it keeps)."""
    if run_dir is not None:
        return Path(run_dir) / "apps"
    if events_path is not None:
        return Path(events_path).with_name(Path(events_path).name + ".apps")
    return None


def _lab_ending() -> bool:
    """Whether this task is cancelled because the lab around the app is ending — a nursery it runs
    in, or one further out, was cancelled (`nslab run` interrupted, the run torn down) — and not
    only its node (a `kill` fault cancels the node's own scope, inside its task: the app is
    SIGKILLed then, as a killed node is)."""
    nursery = trio.lowlevel.current_task().parent_nursery
    while nursery is not None:
        task = nursery.parent_task
        # The nurseries around this one include those its task opened before it (`nslab run`'s,
        # around run_cluster's, in one task): a task's open nurseries nest, in the order opened.
        opened = task.child_nurseries if task is not None else []
        around = opened[:opened.index(nursery) + 1] if nursery in opened else [nursery]
        if any(n.cancel_scope.cancel_called for n in around):
            return True
        nursery = task.parent_nursery if task is not None else None
    return False


def _group_signal(pid: int, sig: int) -> bool:
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class AppProcess:
    """One run of the app's command (a restart is a new AppProcess)."""

    def __init__(self, spec: AppSpec, events: EventLog, logs: Path, *, namesrv: str, append: bool):
        self.spec, self.events, self.logs = spec, events, logs
        self.namesrv = namesrv
        self.append = append  # a restart's output follows the first run's
        self.process: subprocess.Popen | None = None
        self.exited = trio.Event()
        self.reason: str | None = None  # why the lab ended it: "end", "stop", "kill", "interrupted"; None: by itself

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        spec = self.spec
        self.logs.mkdir(parents=True, exist_ok=True)
        mode = "ab" if self.append else "wb"
        stdout_path, stderr_path = self.logs / f"{spec.name}.stdout", self.logs / f"{spec.name}.stderr"
        appdir = str(self.logs.resolve())  # absolute: the app may run in another cwd
        env = {**os.environ, **spec.environment(self.namesrv, appdir)}
        env.pop(lifeline.ENV, None)
        parent = os.getpid()
        argv = spec.argv(self.namesrv, appdir)
        with open(stdout_path, mode) as out, open(stderr_path, mode) as err:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=spec.cwd,
                start_new_session=True, preexec_fn=lambda: lifeline.die_with_parent(parent, signal.SIGKILL))
        self.events.emit(spec.name, "app.start", command=shlex.join(argv), pid=self.process.pid,
                         stdout=str(stdout_path), stderr=str(stderr_path), dir=appdir)

    async def wait(self) -> int:
        """Until the app's process exits (it, or the lab); then the rest of its group is killed, it is
        reaped and app.exit recorded. Cancelled: the group is SIGKILLed first."""
        process = self.process
        exited = os.pidfd_open(process.pid)  # readable once it exits, not yet reaped (Linux)
        try:
            await trio.lowlevel.wait_readable(exited)
        finally:
            with trio.CancelScope(shield=True):
                if process.poll() is None and self.reason is None and _lab_ending():
                    # nslab interrupted (SIGINT, SIGTERM) or its run torn down: the app is stopped
                    # as at the timeline's end, SIGTERM and its grace, not SIGKILLed at once
                    self.reason = "interrupted"
                    self.signal(signal.SIGCONT)
                    self.signal(signal.SIGTERM)
                    with trio.move_on_after(self.spec.grace):
                        await trio.lowlevel.wait_readable(exited)
                if process.poll() is None:
                    if self.reason is None:
                        self.reason = "kill"
                    _group_signal(process.pid, signal.SIGKILL)  # even a SIGSTOPped one
                    _group_signal(process.pid, signal.SIGCONT)
                    await trio.lowlevel.wait_readable(exited)
                _group_signal(process.pid, signal.SIGKILL)  # what it left behind in its group
                code = process.wait()
                os.close(exited)
                self.events.emit(self.spec.name, "app.exit", code=code if code >= 0 else None,
                                 signal=signal.Signals(-code).name if code < 0 else None,
                                 stopped_by_lab=self.reason is not None, reason=self.reason)
                self.exited.set()
        return code

    def signal(self, sig: int) -> bool:
        return self.process is not None and self.process.poll() is None and _group_signal(self.process.pid, sig)

    async def terminate(self, reason: str, grace: float | None = None) -> None:
        """SIGTERM to the group (SIGCONT first: a stopped process cannot stop), SIGKILL after the grace."""
        if self.process is None or self.exited.is_set():
            return
        if self.process.poll() is None and self.reason is None:
            self.reason = reason
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        with trio.move_on_after(self.spec.grace if grace is None else grace):
            await self.exited.wait()
        if not self.exited.is_set():
            self.signal(signal.SIGKILL)
            await self.exited.wait()
