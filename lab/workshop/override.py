"""Swap one of the lab's decision functions for a learner's, for the duration of a check.

The building exercises target plain module-level functions ("module:function"), and the lab
always calls them through their module's globals, so replacing the module attribute is the whole
mechanism: in-process, explicit, and restored when the `with` block ends, even on failure.
"""

from __future__ import annotations

import importlib
import importlib.util
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


class WorkshopError(Exception):
    """Something the learner can fix: a missing file, a syntax error, a missing function."""


def load_function(path: Path, name: str) -> Callable:
    """Execute the learner's file as a fresh module and return its function `name`."""
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
        raise WorkshopError(f"{path}: defines no function {name}()")
    return function


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
