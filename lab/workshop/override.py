"""Swap one of the lab's parts for a learner's, for the duration of a check.

A building exercise targets a module attribute ("module:name"): a plain function the lab calls
through its module's globals, or a class the lab instantiates by that name (the NameServer's
RouteInfoManager, a client's NamesrvSelector, a broker's BrokerOuterAPI). Replacing the module
attribute is the whole mechanism: in-process, explicit, restored when the `with` block ends.

The learner's code is wrapped on the way in (`LearnerErrors`), so that when it raises, the check
shows the learner's own traceback once, whatever the lab then made of the exception (a request
answered SYSTEM_ERROR, a NameServer task crashed inside a nursery).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


class WorkshopError(Exception):
    """Something the learner can fix: a missing file, a syntax error, a missing function."""


class ContractError(TypeError):
    """The learner's method returned something the lab cannot use (an adapter says what)."""


def load_function(path: Path, name: str) -> Callable:
    """Execute the learner's file as a fresh module and return its function (or class) `name`."""
    if not path.is_file():
        raise WorkshopError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"nslab_workshop_{path.stem.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the learner's file: any error is theirs to see, not a lab crash
        raise WorkshopError(f"{path}: cannot load it: {type(e).__name__}: {e}") from e
    function = getattr(module, name, None)
    if not callable(function):
        raise WorkshopError(f"{path}: defines no {'class' if name[:1].isupper() else 'function'} {name}()")
    return function


class LearnerErrors:
    """The exceptions the learner's code raised, each cause once, with the learner's frames."""

    def __init__(self, path: Path):
        self.path = str(Path(path).resolve())
        self.seen: dict[tuple, str] = {}  # (type, file, line) -> the formatted traceback
        self.count: dict[tuple, int] = {}

    def record(self, error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):  # a nursery's group: each exception inside is a cause
            for inner in error.exceptions:
                self.record(inner)
            return
        if getattr(error, "learner_traceback", None):  # raised in the learner's own process (remote.py)
            kind, file, line, text = error.learner_traceback
            key = (kind, file, line)
            self.count[key] = self.count.get(key, 0) + 1
            self.seen.setdefault(key, text)
            return
        if type(error).__name__ == "LearnerProcessError":  # their process ended or hung: said once
            key = ("process", str(error), 0)
            self.count[key] = self.count.get(key, 0) + 1
            self.seen.setdefault(key, str(error))
            return
        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if str(Path(f.filename).resolve()) == self.path]
        if not frames:  # raised by the lab while called from the learner's code: still theirs
            frames = traceback.extract_tb(error.__traceback__)[-1:]
        last = frames[-1] if frames else None
        key = (type(error).__name__, last.filename if last else "", last.lineno if last else 0)
        self.count[key] = self.count.get(key, 0) + 1
        if key not in self.seen:
            lines = "".join(traceback.format_list(frames)).rstrip()
            self.seen[key] = f"{lines}\n{''.join(traceback.format_exception_only(error)).rstrip()}"

    @property
    def total(self) -> int:
        return sum(self.count.values())

    def note(self, message: str) -> None:
        """A cause with no traceback of the learner's: a broken contract (a wrong return type)."""
        key = ("note", message, 0)
        self.count[key] = self.count.get(key, 0) + 1
        self.seen.setdefault(key, message)

    def wrap_contract(self, method: Callable) -> Callable:
        """An adapter's method: a ContractError it raises about the learner's values is noted as theirs."""
        @functools.wraps(method)
        def wrapped(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except ContractError as e:
                self.note(str(e))
                raise
        return wrapped

    def wrap_contract_async(self, method: Callable) -> Callable:
        @functools.wraps(method)
        async def wrapped(*args, **kwargs):
            try:
                return await method(*args, **kwargs)
            except ContractError as e:
                self.note(str(e))
                raise
        return wrapped

    def report(self) -> list[str]:
        """One block per cause: how often it happened and the traceback of its first time."""
        out = []
        for key, text in self.seen.items():
            times = self.count[key]
            what = {"note": "your code broke its contract", "process": "your code's process"}.get(
                key[0], "where your code raised")
            out.append(f"{what}{f' ({times} times)' if times > 1 else ''}:\n"
                       + "\n".join("    " + line for line in text.splitlines()))
        return out

    def wrap(self, member: Callable) -> Callable:
        """The learner's function, or a subclass of their class whose methods record what raises."""
        if inspect.isclass(member):
            return self._wrap_class(member)
        return self._wrap_function(member)

    def _wrap_function(self, function: Callable) -> Callable:
        if inspect.iscoroutinefunction(function):
            @functools.wraps(function)
            async def wrapped_async(*args, **kwargs):
                try:
                    return await function(*args, **kwargs)
                except Exception as e:
                    self.record(e)
                    raise
            return wrapped_async

        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            try:
                result = function(*args, **kwargs)
            except Exception as e:
                self.record(e)
                raise
            if inspect.isgenerator(result):  # a generator method raises while it is iterated
                return self._wrap_generator(result)
            return result
        return wrapped

    def _wrap_generator(self, generator):
        try:
            return (yield from generator)
        except Exception as e:
            self.record(e)
            raise

    def _wrap_class(self, cls: type) -> type:
        methods = {}
        names = {name for klass in cls.__mro__[:-1] for name in vars(klass)}  # inherited ones too
        for name in names:
            value = inspect.getattr_static(cls, name)
            if inspect.isfunction(value) and (not name.startswith("_") or name == "__init__"):
                methods[name] = self._wrap_function(value)
        return type(cls.__name__, (cls,), {**methods, "__module__": cls.__module__,
                                           "__qualname__": cls.__qualname__})


def describe(error: BaseException) -> str:
    """An exception for one line: the exceptions inside a nursery's group, not the group."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(describe(e) for e in error.exceptions))
    if type(error).__name__ == "Raised":  # remote.py's stand-in already says "Kind: message"
        return str(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


@contextmanager
def swapped(target: str, function: Callable) -> Iterator[None]:
    """Within the block, `module:attr` is `function`; the lab's own comes back afterwards."""
    module_name, attr = target.split(":")
    module = importlib.import_module(module_name)
    original = getattr(module, attr)
    setattr(module, attr, function)
    try:
        yield
    finally:
        setattr(module, attr, original)
