"""Reading a TOML file of settings (a scenario, a lab config) with one-line errors: a module of its
own, so `nslab`'s parser can load configuration without the scenario machinery."""

from __future__ import annotations

import tomllib
from pathlib import Path

MAX_FILE_BYTES = 1 << 20  # a scenario or config file; the largest bundled one is a few KB


def read_toml(path: str | Path, text: str | None = None) -> tuple[str, dict]:
    """A TOML file's text and table, or ValueError in one line naming the file (and the line where
    there is one) and what is wrong: unreadable, a directory, too large, not UTF-8, not TOML."""
    if text is None:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError as e:
            raise ValueError(f"{path}: cannot read: {e.strerror or e}") from None
        if len(data) > MAX_FILE_BYTES:
            raise ValueError(f"{path}: too large: over {MAX_FILE_BYTES:,} bytes (a TOML file of settings is a few KB)")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
            raise ValueError(f"{path}:{line}: not UTF-8 text: byte 0x{data[e.start]:02x} at column {column} "
                             "(save the file as UTF-8)") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = f":{e.lineno}" if getattr(e, "lineno", None) else ""  # Python 3.14 has it; 3.11 says it in words
        raise ValueError(f"{path}{line}: not valid TOML: {e}") from None
    except RecursionError:
        raise ValueError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None
