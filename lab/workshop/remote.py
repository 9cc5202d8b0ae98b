"""The checker's side of lab/workshop/host.py: the learner's function or class, called in a child.

`load(path, name, target)` starts the child and returns a stand-in the checker and the lab call as
they would the learner's own: a function, or a class whose instances live in the child (methods
are calls over the pipe; a generator method yields what the child's generator yields; a callable
argument is called back in this process). Values come back through an unpickler that builds only
plain data and the lab's record types, so an answer cannot run code here. Each call is bounded in
time and size; a child that exits, hangs or answers too much is the learner's error, said once.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import enum
import inspect
import io
import math
import os
import pickle
import random
import select
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import trio

from nameserver.bodies import as_topic_configs

from .host import read_frame, write_frame
from .override import WorkshopError

CALL_TIMEOUT = 20.0  # seconds of wall time one call may take (10,000 topics included)
LOAD_TIMEOUT = 60.0  # the lab's imports and the learner's module, on a loaded machine
MAX_ANSWER = 64 << 20  # bytes one answer may take
ROOT = Path(__file__).resolve().parents[2]


class LearnerProcessError(RuntimeError):
    """The learner's process ended, hung or answered what cannot be read: their error."""


PLAIN = (type(None), bool, int, float, complex, str, bytes, bytearray, tuple, list, dict, set, frozenset,
         random.Random)


def _record_type(cls: type) -> bool:
    return cls.__module__.split(".")[0] in ("nameserver", "lab") and (
        dataclasses.is_dataclass(cls) or issubclass(cls, (enum.Enum, tuple)))


class _Requests(pickle.Pickler):
    """What the learner's process receives: data by value; anything else (a channel, a callable) as
    a handle that stands for it there and comes back as itself."""

    def __init__(self, file, child: "Child"):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.child = child

    def persistent_id(self, obj):
        if isinstance(obj, (type, Mapping, *PLAIN)) or _record_type(type(obj)) or obj is getattr:
            return None  # a type goes by its name; getattr is how an enum member goes
        return self.child.handle(obj)

    def reducer_override(self, obj):
        if isinstance(obj, Mapping) and not isinstance(obj, dict):  # a lazily decoded topic table
            return dict, (as_topic_configs(obj),)
        return NotImplemented


class _Answers(pickle.Unpickler):
    """Plain data and the lab's record types (dataclasses, enums, tuples) only."""

    def __init__(self, file, child: "Child"):
        super().__init__(file)
        self.child = child

    def persistent_load(self, pid):
        return self.child.objects[pid]

    SAFE_BUILTINS = {"set", "frozenset", "list", "dict", "tuple", "bytes", "bytearray", "complex", "slice",
                     "range", "object"}

    def find_class(self, module, name):
        if module == "builtins" and name in self.SAFE_BUILTINS:
            return getattr(builtins, name)
        if (module, name) == ("builtins", "getattr"):  # how an enum member pickles: its class and name
            return _enum_member
        if (module, name) == ("random", "Random"):
            return random.Random
        if module == "collections" and name in ("OrderedDict", "deque", "defaultdict"):
            return getattr(collections, name)
        if module.split(".")[0] in ("nameserver", "lab") and module in sys.modules:
            value = getattr(sys.modules[module], name, None)
            if isinstance(value, type) and _record_type(value):
                return value
        raise pickle.UnpicklingError(
            f"your code returned an object of {module}.{name}: return plain data (dict, list, tuple, str, int, "
            f"float, None) or the record types in lab.workshop.interfaces")


def _enum_member(cls, name):
    if isinstance(cls, enum.EnumMeta) and isinstance(name, str) and name in cls.__members__:
        return cls[name]
    raise pickle.UnpicklingError(f"getattr({cls!r}, {name!r}) in an answer: only an enum's member is read so")


class Raised(Exception):
    """Stands for an exception the learner's code raised in its process (`learner_traceback`)."""


def _exception(kind: str, message: str, frames: str, file: str, line: int) -> Exception:
    base = getattr(builtins, kind, None)
    cls = base if isinstance(base, type) and issubclass(base, Exception) and base is not Exception else Raised
    try:
        error = cls(message) if cls is not Raised else Raised(f"{kind}: {message}" if message else kind)
    except Exception:  # an exception type whose constructor wants more: the stand-in says which it was
        error = Raised(f"{kind}: {message}")
    error.learner_traceback = (kind, file, line, f"{frames}\n{kind}: {message}" if message else f"{frames}\n{kind}")
    return error


class Child:
    def __init__(self, path: Path, name: str, target: str):
        self.path = path
        to_child, self._to_child = os.pipe()
        self._from_child, from_child = os.pipe()
        self.output = tempfile.TemporaryFile()  # what the learner's code prints, shown as theirs
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lab.workshop.host", str(to_child), str(from_child), str(path.resolve()), name,
             target],
            pass_fds=(to_child, from_child), stdin=subprocess.DEVNULL, stdout=self.output, stderr=self.output,
            env=env, cwd=str(ROOT))
        os.close(to_child)
        os.close(from_child)
        self.objects: dict[int, object] = {}  # handle -> the object it stands for (kept alive)
        self.handles: dict[int, int] = {}  # id(object) -> handle
        self.dead: str | None = None
        self.bridge = Bridge(self)  # coroutine methods (exercise 12)
        self.last_elapsed: float | None = None  # s the last plain call took in the learner's process

    def handle(self, obj) -> int:
        ref = self.handles.get(id(obj))
        if ref is None:
            ref = self.handles[id(obj)] = len(self.objects) + 1
            self.objects[ref] = obj
        return ref

    def send(self, message) -> None:
        buffer = io.BytesIO()
        _Requests(buffer, self).dump(message)
        write_frame(self._to_child, buffer.getvalue())

    def printed(self, limit: int = 20) -> list[str]:
        self.output.seek(0)
        lines = self.output.read(1 << 16).decode(errors="replace").splitlines()
        return lines[:limit] + ([f"... ({len(lines) - limit} more lines)"] if len(lines) > limit else [])

    def close(self) -> None:
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.output.close()

    def _fail(self, why: str):
        if self.dead is None:
            self.process.kill()
            self.dead = why
        raise LearnerProcessError(self.dead)

    def _read(self, timeout: float | None = None):
        if self.dead:
            raise LearnerProcessError(self.dead)
        timeout = CALL_TIMEOUT if timeout is None else timeout
        ready, _, _ = select.select([self._from_child], [], [], timeout)
        if not ready:
            self._fail(f"your code did not answer within {timeout:g} s (an endless loop?)")
        head = os.read(self._from_child, 4)
        if len(head) < 4:
            code = self.process.wait()
            self._fail(f"your code ended its process (exit code {code}) — the checker runs it in a process of "
                       f"its own, so exiting ends only your code")
        size = int.from_bytes(head, "big")
        if size > MAX_ANSWER:
            self._fail(f"your code answered {size:,} bytes: more than the {MAX_ANSWER:,} bytes one answer may take")
        body = read_frame_body(self._from_child, size)
        if body is None:
            self._fail("your code's process ended in the middle of an answer")
        try:
            return _Answers(io.BytesIO(body), self).load()
        except pickle.UnpicklingError as e:
            raise TypeError(str(e)) from None

    def _serve(self, request) -> None:
        """The learner's code called one of the checker's objects, or read one of its attributes (a
        method is called back later). What that raises is raised there, in the learner's code."""
        try:
            target = self.objects[request[1]]
            if request[0] == "attr":
                value = getattr(target, request[2])
                reply = ("reply", (True, None, inspect.iscoroutinefunction(value)) if callable(value)
                         else (False, value, False))
            else:
                reply = ("reply", (target if request[2] is None else getattr(target, request[2]))(*request[3]))
        except Exception as e:
            reply = ("error", *error_fields(e))
        self.send(reply)

    def unpack(self, data: bytes):
        """One value the learner's process packed on its own (a call's result, an await's arguments)."""
        try:
            return _Answers(io.BytesIO(data), self).load()
        except pickle.UnpicklingError as e:
            raise TypeError(str(e)) from None

    def ask(self, *message):
        """One request; callbacks asked for meanwhile are answered here. Returns the answer tuple."""
        if self.dead:
            raise LearnerProcessError(self.dead)
        try:
            self.send(message)
        except BrokenPipeError:
            self._read()  # says how it ended
        while True:
            answer = self._read(LOAD_TIMEOUT if message[0] == "load" else None)
            if answer[0] in ("callback", "attr"):
                self._serve(answer)
                continue
            if answer[0] == "lab-error":
                self.dead = "the checker's side of your code's process failed (the lab's fault, not yours)"
                raise RuntimeError(f"{self.dead}:\n{answer[1]}")
            if answer[0] == "raised":
                raise _exception(*answer[1:])
            return answer



def error_fields(error: BaseException) -> tuple[str, str, str]:
    return type(error).__module__, type(error).__qualname__, str(error)


class _Call:
    __slots__ = ("nursery", "outcome", "awaits")

    def __init__(self):
        self.nursery, self.outcome, self.awaits = None, None, {}


class Bridge:
    """The learner's coroutines (exercise 12), run in their process in step with this one's trio
    clock (virtual in a check): each exchange tells the learner's process the time, the calls to
    start, the results of this process's coroutines the learner's code awaited (a channel's
    `invoke`, run here in the calling task's nursery) and the calls abandoned; it runs until every
    task there waits and says what ended, what to run here, and its next deadline, when the waiting
    calls here exchange again. An exchange blocks this process: its clock cannot move meanwhile."""

    def __init__(self, child: "Child"):
        self.child = child
        self.calls: dict[int, _Call] = {}
        self.deadline: float | None = None
        self.changed = trio.Event()  # set at every exchange: the waiting calls look again
        self.next_call = 0
        self.orphans: list = []  # results for awaits no call here can run

    def exchange(self, calls=(), results=(), cancels=()) -> None:
        results = [*self.orphans, *results]
        self.orphans = []
        answer = self.child.ask("step", trio.current_time(), list(calls), results, list(cancels))
        _, finished, awaits, abandoned, self.deadline = answer
        for call_id, outcome in finished:
            call = self.calls.get(call_id)
            if call is not None:
                call.outcome = outcome
        for await_id in abandoned:
            for call in self.calls.values():
                scope = call.awaits.pop(await_id, None)
                if scope is not None:
                    scope.cancel()
        for await_id, call_id, ref, method, packed in awaits:
            call = self.calls.get(call_id)
            try:
                args = self.child.unpack(packed)
                target = getattr(self.child.objects[ref], method)
                if call is None or call.nursery is None:
                    raise RuntimeError("an await outside the call that started it (a task that outlived its call?)")
            except Exception as e:
                self.orphans.append((await_id, ("error", *error_fields(e))))
                continue
            scope = call.awaits[await_id] = trio.CancelScope()
            call.nursery.start_soon(self._await, call, await_id, scope, target, args)
        self.changed.set()
        self.changed = trio.Event()

    async def _await(self, call: _Call, await_id: int, scope: trio.CancelScope, target, args) -> None:
        with scope:
            try:
                outcome = ("ok", await target(*args))
            except Exception as e:
                outcome = ("error", *error_fields(e))
        if scope.cancelled_caught or call.awaits.pop(await_id, None) is None:
            return  # the learner's code stopped waiting for it
        self.exchange(results=[(await_id, outcome)])

    async def call(self, ref: int, method: str, args: list, kwargs: dict):
        self.next_call += 1
        call_id, call = self.next_call, _Call()
        self.calls[call_id] = call
        try:
            async with trio.open_nursery() as nursery:
                call.nursery = nursery
                try:
                    self.exchange(calls=[(call_id, ref, method, args, kwargs)])
                    while call.outcome is None:
                        if self.orphans:
                            self.exchange()
                            continue
                        changed = self.changed
                        with trio.move_on_at(self.deadline if self.deadline is not None else math.inf):
                            await changed.wait()
                            continue
                        self.exchange()  # a sleep or a timeout of the learner's is due
                    nursery.cancel_scope.cancel()
                finally:
                    call.nursery = None
        except BaseException:
            if call.outcome is None and not self.child.dead:  # cancelled here: cancel it there too
                try:
                    self.exchange(cancels=[call_id])
                except Exception:
                    pass
            raise
        finally:
            del self.calls[call_id]
        if call.outcome[0] == "ok":
            return self.child.unpack(call.outcome[1])
        if call.outcome[0] == "raised":
            raise _exception(*call.outcome[1])
        raise RuntimeError("your call was cancelled in its process, not by the checker")  # cannot happen


def read_frame_body(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _copy_back(args, back: dict) -> None:
    """A function's dict or list arguments as the learner's code left them (a table it mutated)."""
    for i, value in back.items():
        if isinstance(args[i], dict):
            args[i].clear()
            args[i].update(value)
        elif isinstance(args[i], list):
            args[i][:] = value


def _function(child: Child, name: str):
    def function(*args, **kwargs):
        answer = child.ask("call", None, name, list(args), kwargs, True)
        _copy_back(args, answer[2])
        return answer[1]
    function.__name__ = function.__qualname__ = name
    return function


def _method(name: str, kind: str):
    if kind == "gen":
        def generator(self, *args, **kwargs):
            answer = self._child.ask("call", self._ref, name, list(args), kwargs, False)
            if answer[0] != "gen":
                return answer[1]
            while True:
                step = self._child.ask("next", answer[1])
                if step[0] == "done":
                    return
                yield step[1]
        method = generator
    elif kind == "async":
        async def method(self, *args, **kwargs):
            return await self._child.bridge.call(self._ref, name, list(args), kwargs)
    else:
        def method(self, *args, **kwargs):
            answer = self._child.ask("call", self._ref, name, list(args), kwargs, False)
            if answer[0] == "gen":  # a method returning a generator it built: iterate it there
                return _iterate(self._child, answer[1])
            self._child.last_elapsed = answer[3] if len(answer) > 3 else None
            return answer[1]
    method.__name__ = method.__qualname__ = name
    return method


def _iterate(child: Child, ref: int):
    while True:
        step = child.ask("next", ref)
        if step[0] == "done":
            return
        yield step[1]


class RemoteObject:
    """An instance living in the learner's process; attributes are read (a copy) and set there."""

    def __init__(self, *args, **kwargs):
        object.__setattr__(self, "_ref", self._child.ask("new", list(args), kwargs)[1])

    def remote_attrs(self, names) -> dict:
        """Several attributes in one round trip (the five tables after each change)."""
        return self._child.ask("attrs", self._ref, list(names))[1]

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.remote_attrs([name])[name]

    def __setattr__(self, name, value):
        self._child.ask("setattr", self._ref, name, value)


def load(path: Path, name: str, target: str):
    """(stand-in, child): the learner's `name` from `path`, running in a process of its own."""
    if not path.is_file():
        raise WorkshopError(f"{path}: no such file")
    child = Child(path, name, target)
    try:
        answer = child.ask("load")
    except BaseException as e:
        if not (hasattr(e, "learner_traceback") or isinstance(e, LearnerProcessError)):
            child.close()
            raise  # the checker's own failure: not the learner's to fix
        text = e.learner_traceback[3] if hasattr(e, "learner_traceback") else str(e)
        printed = "".join(f"\n  your code printed: {line}" for line in child.printed())
        child.close()
        raise WorkshopError(f"{path}: cannot load it: {text.splitlines()[-1]}\n{text}{printed}") from None
    kind, methods = answer[1], answer[2]
    if kind is None:
        child.close()
        raise WorkshopError(f"{path}: defines no {'class' if name[:1].isupper() else 'function'} {name}()")
    if kind == "class":
        namespace = {m: _method(m, k) for m, k in methods.items()}
        return type(name, (RemoteObject,), {**namespace, "_child": child}), child
    return _function(child, name), child
