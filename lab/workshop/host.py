"""The learner's code in its own process: `python -m lab.workshop.host IN_FD OUT_FD FILE NAME TARGET`.

As a Maelstrom node: the checker (lab/workshop/remote.py) sends requests over a pipe and reads the
answers, so nothing the learner's file does on import (printing a verdict, os._exit, patching the
checker) reaches the checker's process. The lab's own implementation of the exercise's target is
refused here, by every module name that holds it, with a message saying why.

Frames are 4-byte big-endian lengths + pickle. Requests (from the checker, trusted):
  ("load",) | ("new", args, kwargs) | ("call", obj, method, args, kwargs, copy_back) |
  ("next", gen) | ("attrs", obj, names) | ("setattr", obj, name, value) | ("reply", value)
Answers: ("ok", value, copied_back) | ("gen", id) | ("done",) | ("raised", type, message, frames,
file, line) | ("callback", id, args) | ("loaded", kind, methods); and, while a call runs, ("callback", handle, method, args) or
("attr", handle, name): the learner's code using one of the checker's objects.

A class with coroutine methods (exercise 12) is served inside trio, in lockstep with the checker's
clock (virtual in a check): ("step", now, calls, results, cancels) sets this process's clock to the
checker's `now`, starts calls, hands over the results of the checker's coroutines the learner's
code awaited, cancels calls the checker abandoned, then runs until every task here waits and
answers ("quiet", finished, awaits, abandoned, next_deadline): calls that ended, the checker's
coroutines to run (a channel's `invoke`), awaits the learner's code gave up, and the earliest
deadline of a sleep or timeout here. Time here moves only when the checker says so.
"""

from __future__ import annotations

import builtins
import contextvars
import importlib
import importlib.abc
import inspect
import io
import os
import pickle
import struct
import sys
import time
import traceback
from pathlib import Path


def read_frame(fd: int) -> bytes | None:
    head = _read_exactly(fd, 4)
    return None if head is None else _read_exactly(fd, struct.unpack(">I", head)[0])


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_frame(fd: int, payload: bytes) -> None:
    data = struct.pack(">I", len(payload)) + payload
    while data:
        data = data[os.write(fd, data):]


class _Refused(importlib.abc.MetaPathFinder):
    """A fresh import of a module that held the lab's answer (after deleting it from sys.modules)."""

    def __init__(self, modules: set[str], why: str):
        self.modules, self.why = modules, why

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.modules:
            raise ImportError(self.why)
        return None


def refuse(target: str) -> None:
    """Take the lab's own `module:name` out of every loaded module that holds it; asking for it (from
    X import NAME, X.NAME) raises ImportError naming why."""
    module_name, attr = target.split(":")
    import lab.workshop.interfaces  # noqa: F401  the types the learner may use, loaded before the refusal
    answer = getattr(importlib.import_module(module_name), attr)
    why = (f"{attr} is what this exercise has you write: the lab's own is not available to your code "
           f"(write it yourself; the types you need are in lab.workshop.interfaces)")
    holders = set()
    for name, module in list(sys.modules.items()):
        if module is not None and getattr(module, "__dict__", {}).get(attr) is answer:
            del module.__dict__[attr]
            previous = module.__dict__.get("__getattr__")
            module.__getattr__ = _refuser(attr, why, previous, name)
            holders.add(name)
    sys.meta_path.insert(0, _Refused(holders, why))
    _neuter(answer, why)


def _neuter(answer, why: str) -> None:
    """The object itself, for code that digs it out anyway (gc, __subclasses__): using it raises."""
    namespace: dict = {}
    exec(f"def refused(*args, **kwargs):\n    raise ImportError({why!r})", namespace)
    if isinstance(answer, type):
        for name, value in list(vars(answer).items()):
            if inspect.isfunction(value) or isinstance(value, (staticmethod, classmethod, property)):
                setattr(answer, name, namespace["refused"])
        answer.__init__ = namespace["refused"]
    elif inspect.isfunction(answer) and not answer.__code__.co_freevars:
        answer.__code__ = namespace["refused"].__code__


def _refuser(attr, why, previous, module_name):
    def __getattr__(name):
        if name == attr:
            raise ImportError(why)
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
    return __getattr__


def checker_error(module: str, name: str, message: str) -> Exception:
    """What the checker's object raised, as the same exception here: a builtin, or one of the lab's
    (RemotingError from a channel's invoke, so the learner's `except RemotingError` catches it)."""
    if module == "builtins":
        kind = getattr(builtins, name, None)
    elif module.split(".")[0] in ("nameserver", "lab") and module in sys.modules:
        kind = getattr(sys.modules[module], name, None)
    else:
        kind = None
    if not (isinstance(kind, type) and issubclass(kind, Exception)):
        kind = RuntimeError
    try:
        return kind(message)
    except Exception:
        return RuntimeError(f"{name}: {message}")


CALL = contextvars.ContextVar("nslab_workshop_call", default=None)  # the checker's call a task serves


class RemoteClock:
    """trio's clock in the learner's process: the checker's time, as the checker last said it."""

    def __init__(self):
        self.now = 0.0

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self.now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        return 0.0 if deadline <= self.now else 3600.0  # a later deadline waits for the checker's word


class Handle:
    """One of the checker's objects that is not plain data (a channel, a callable): the same object
    there is the same Handle here, so `is` and dict keys work; calling it calls the checker's."""

    def __init__(self, ref: int, host: "Host"):
        self.ref, self._host = ref, host

    def __call__(self, *args):
        return self._host.callback(self.ref, None, args)

    def __getattr__(self, name):
        """A method of the checker's object (an index's increment_and_get, ...) is called there; a
        plain attribute's value is read from there."""
        if name.startswith("__"):
            raise AttributeError(name)
        callable_, value, is_async = self._host.ask_checker("attr", self.ref, name)
        if not callable_:
            return value
        if is_async:  # a coroutine of the checker's (a channel's invoke): run there, awaited here
            async def awaited(*args):
                return await self._host.await_checker(self.ref, name, args)
            return awaited
        return lambda *args: self._host.callback(self.ref, name, args)

    def __repr__(self) -> str:
        return f"<lab object {self.ref}>"


class _Answers(pickle.Pickler):
    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)

    def persistent_id(self, obj):
        return obj.ref if type(obj) is Handle else None


class _Requests(pickle.Unpickler):
    def __init__(self, file, host: "Host"):
        super().__init__(file)
        self.host = host

    def persistent_load(self, pid):
        return self.host.handle(pid)


class Host:
    def __init__(self, in_fd: int, out_fd: int, path: Path, name: str):
        self.in_fd, self.out_fd, self.path, self.name = in_fd, out_fd, path, name
        self.objects: dict[int, object] = {}
        self.handles: dict[int, Handle] = {}
        self.member = None
        self.is_async = False
        self.session = None  # the trio session serving coroutine methods (serve_async)

    def send(self, *message) -> None:
        write_frame(self.out_fd, self.pack(message))

    @staticmethod
    def pack(value) -> bytes:
        buffer = io.BytesIO()
        _Answers(buffer).dump(value)
        return buffer.getvalue()

    def receive(self):
        frame = read_frame(self.in_fd)
        if frame is None:
            os._exit(0)  # the checker is gone: nothing left to answer
        return _Requests(io.BytesIO(frame), self).load()

    def handle(self, ref: int) -> "Handle":
        if ref not in self.handles:
            self.handles[ref] = Handle(ref, self)
        return self.handles[ref]

    def callback(self, ref: int, method: str | None, args: tuple):
        return self.ask_checker("callback", ref, method, args)

    def ask_checker(self, *message):
        """The learner's code used one of the checker's objects: the checker answers ("reply", value)."""
        self.send(*message)
        reply = self.receive()
        if reply[0] == "error":
            raise checker_error(*reply[1:])
        return reply[1]

    @staticmethod
    def unwrap(value):
        # A string the checker passed twice arrives as two objects: interned, `is` holds as it did there.
        return sys.intern(value) if type(value) is str else value

    def keep(self, value) -> int:
        self.objects[id(value)] = value
        return id(value)

    def raised(self, error: BaseException) -> None:
        mine = str(self.path.resolve())
        outer: list = []
        others = 0
        while isinstance(error, BaseExceptionGroup):  # a nursery's group: the cause is an exception inside
            outer += traceback.extract_tb(error.__traceback__)
            others += len(error.exceptions) - 1
            error = error.exceptions[0]
        extracted = outer + traceback.extract_tb(error.__traceback__)
        frames = [f for f in extracted if str(Path(f.filename).resolve()) == mine]
        frames = frames or extracted[-1:]
        last = frames[-1] if frames else None
        text = "".join(traceback.format_list(frames)).rstrip()
        message = str(error)
        if others:
            message += f" (and {others} more in the same nursery)"
        if isinstance(error, AttributeError) and ("can't set attribute" in message or "has no setter" in message):
            message += (" — the lab's record types (RegisterBrokerResult, QueueData, DataVersion, ...) are "
                        "immutable: build a new one, e.g. result._replace(first=True)")
        self.send("raised", type(error).__name__, message, text, last.filename if last else "",
                  last.lineno if last else 0)

    def load(self) -> None:
        sys.path.insert(0, str(self.path.parent))  # as `python FILE` would: its neighbours import
        spec = importlib.util.spec_from_file_location(f"nslab_workshop_{self.path.stem.replace('-', '_')}", self.path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            return self.raised(e)
        member = getattr(module, self.name, None)
        if not callable(member):
            return self.send("loaded", None, {})
        self.member = member
        if inspect.isclass(member):
            methods = {}
            for n in {n for klass in member.__mro__[:-1] for n in vars(klass)}:
                value = inspect.getattr_static(member, n)
                if inspect.isfunction(value) and not n.startswith("_"):
                    methods[n] = ("gen" if inspect.isgeneratorfunction(value) else
                                  "async" if inspect.iscoroutinefunction(value) else "sync")
            self.is_async = "async" in methods.values()
            return self.send("loaded", "class", methods)
        return self.send("loaded", "async" if inspect.iscoroutinefunction(member) else "function", {})

    def serve(self) -> None:
        while True:
            message = self.receive()
            if message[0] == "load":
                self.load()
                if self.is_async:
                    import trio
                    self.session = Session(self)
                    try:
                        return trio.run(self.session.serve, clock=RemoteClock())
                    except BaseException:  # the session's own failure: a call's raise is its outcome
                        self.send("lab-error", traceback.format_exc())
                        os._exit(1)
                continue
            self.serve_one(message)

    def serve_one(self, message) -> None:
        kind = message[0]
        try:
            if kind == "new":
                value = self.member(*map(self.unwrap, message[1]), **message[2])
                self.send("ok", self.keep(value), {})
            elif kind == "call":
                _, obj, method, args, kwargs, copy_back = message
                args = [self.unwrap(a) for a in args]
                function = self.member if obj is None else getattr(self.objects[obj], method)
                began = time.perf_counter()
                value = function(*args, **kwargs)
                elapsed = time.perf_counter() - began  # the call alone: what the pipe costs is not theirs
                if inspect.isgenerator(value):
                    self.send("gen", self.keep(value))
                else:
                    back = {i: a for i, a in enumerate(args) if copy_back and isinstance(a, (dict, list))}
                    self.send("ok", value, back, elapsed)
            elif kind == "next":
                try:
                    value = next(self.objects[message[1]])
                except StopIteration:
                    del self.objects[message[1]]
                    self.send("done")
                else:
                    self.send("ok", value, {})
            elif kind == "attrs":
                obj = self.objects[message[1]]
                self.send("ok", {n: getattr(obj, n, None) for n in message[2]}, {})
            elif kind == "setattr":
                setattr(self.objects[message[1]], message[2], message[3])
                self.send("ok", None, {})
        except Exception as e:  # the learner's code raised: the checker shows their traceback
            self.raised(e)

    def raised_fields(self, error: BaseException) -> tuple:
        """What `raised` sends, for a call's outcome in a ("quiet", ...) answer."""
        sent = []
        send, self.send = self.send, lambda *message: sent.append(message)
        try:
            self.raised(error)
        finally:
            self.send = send
        return sent[0][1:]

    async def await_checker(self, ref: int, method: str, args: tuple):
        return await self.session.await_checker(ref, method, args)


class Session:
    """The learner's coroutines, run by trio in step with the checker (see the module's docstring)."""

    def __init__(self, host: Host):
        self.host = host
        self.finished: list = []  # (call, ("ok", value) | ("raised", fields) | ("cancelled",))
        self.awaits: list = []  # (await id, call, handle, method, args): the checker's coroutines to run
        self.abandoned: list = []  # await ids the learner's code stopped waiting for
        self.waiting: dict = {}  # await id -> [trio.Event, outcome]
        self.scopes: dict = {}  # call -> its cancel scope
        self.next_await = 0

    async def serve(self) -> None:
        import trio
        import trio.testing
        clock = trio.lowlevel.current_clock()
        async with trio.open_nursery() as nursery:
            while True:
                message = self.host.receive()
                if message[0] != "step":
                    self.host.serve_one(message)  # a plain method, an attribute, a new instance
                    continue
                _, now, calls, results, cancels = message
                clock.now = now  # each unit test is a trio run of its own, from 0
                for await_id, outcome in results:
                    waiting = self.waiting.pop(await_id, None)
                    if waiting is not None:
                        waiting[1] = outcome
                        waiting[0].set()
                for call in cancels:
                    if call in self.scopes:
                        self.scopes[call].cancel()
                for call, ref, method, args, kwargs in calls:
                    nursery.start_soon(self.run_call, call, ref, method, [self.host.unwrap(a) for a in args], kwargs)
                await trio.testing.wait_all_tasks_blocked()
                left = trio.lowlevel.current_statistics().seconds_to_next_deadline
                deadline = clock.now + left if left != float("inf") else None
                self.host.send("quiet", self.finished, self.awaits, self.abandoned, deadline)
                self.finished, self.awaits, self.abandoned = [], [], []

    async def run_call(self, call: int, ref: int, method: str, args: list, kwargs: dict) -> None:
        import trio
        CALL.set(call)
        scope = self.scopes[call] = trio.CancelScope()
        outcome = ("cancelled",)
        try:
            with scope:
                value = await getattr(self.host.objects[ref], method)(*args, **kwargs)
                outcome = ("ok", self.host.pack(value))  # alone: what cannot be read fails this call only
        except Exception as e:
            outcome = ("raised", self.host.raised_fields(e))
        except BaseException as e:  # a Cancelled not ours (it cannot be), or worse: the learner's
            outcome = ("raised", self.host.raised_fields(RuntimeError(f"{type(e).__name__} escaped: {e}")))
        finally:
            del self.scopes[call]
            self.finished.append((call, outcome))

    async def await_checker(self, ref: int, method: str, args: tuple):
        import trio
        self.next_await += 1
        await_id = self.next_await
        waiting = self.waiting[await_id] = [trio.Event(), None]
        self.awaits.append((await_id, CALL.get(), ref, method, self.host.pack(list(args))))
        try:
            await waiting[0].wait()
        except BaseException:
            if self.waiting.pop(await_id, None) is not None:
                self.abandoned.append(await_id)
            raise
        outcome = waiting[1]
        if outcome[0] == "ok":
            return outcome[1]
        raise checker_error(*outcome[1:])


def main(argv: list[str]) -> None:
    in_fd, out_fd, path, name, target = int(argv[0]), int(argv[1]), Path(argv[2]), argv[3], argv[4]
    host = Host(in_fd, out_fd, path, name)
    try:
        refuse(target)
    except Exception:  # the lab's own import failed: the checker's fault, never the learner's
        host.send("lab-error", traceback.format_exc())
        return
    host.serve()


if __name__ == "__main__":
    main(sys.argv[1:])
