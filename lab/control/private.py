"""The per-user folder a running lab's sockets live in, and who is at the other end of them.

`$XDG_RUNTIME_DIR/nslab`, or `$TMPDIR/nslab-<uid>` without it. In a shared /tmp anyone can create
that name first, so the folder is trusted only when it is a real directory (not a symlink), owned
by this user, mode exactly 0700; anything else is refused with what is wrong and how to fix it,
never used and never repaired (someone may be waiting for us to use it).
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import tempfile
from pathlib import Path


# A Unix socket's path is at most 107 bytes (108 with its NUL on Linux); the longest name a lab
# puts in the folder is "/<pid>.events" with a pid of up to 7 digits (Linux's pid_max is 2**22).
SOCKET_PATH_MAX = 107
LONGEST_NAME = len("/4194304.events")


class RuntimeDirError(Exception):
    """The runtime folder is not this user's own: a one-line reason naming it and the fix."""


def runtime_dir() -> Path:
    """The folder, created (mode 0700) when missing, checked before every use."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "nslab" if base else Path(tempfile.gettempdir()) / f"nslab-{os.getuid()}"
    try:
        os.mkdir(path, 0o700)  # atomic: nobody can slip in between creating it and setting its mode
    except FileExistsError:
        pass  # checked below, like any folder found
    except OSError as e:
        where = "XDG_RUNTIME_DIR" if base else "TMPDIR"
        raise RuntimeDirError(f"cannot create the lab's runtime folder {path}: {e.strerror}; "
                              f"set {where} to a folder of yours") from None
    else:
        os.chmod(path, 0o700)  # ours since this instant; a umask such as 0777 may have taken bits off
    check_private(path)
    if len(os.fsencode(path)) + LONGEST_NAME > SOCKET_PATH_MAX:
        raise RuntimeDirError(f"the lab's runtime folder {path} is too long a path for its sockets "
                              f"(at most {SOCKET_PATH_MAX - LONGEST_NAME} bytes): set XDG_RUNTIME_DIR to a shorter folder")
    return path


def check_private(path: Path) -> None:
    """Raise RuntimeDirError unless `path` is a directory of this user's, mode 0700."""
    try:
        info = os.lstat(path)  # lstat: a symlink is judged itself, never the folder it points to
    except OSError as e:
        raise RuntimeDirError(f"the lab's runtime folder {path}: {e.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symlink"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != os.getuid():
        problem = f"is owned by {describe_user(info.st_uid)}, not by you ({describe_user(os.getuid())})"
    elif stat.S_IMODE(info.st_mode) != 0o700:
        raise RuntimeDirError(f"the lab's runtime folder {path} has mode {stat.S_IMODE(info.st_mode):04o}, not 0700 "
                              f"(others could reach its sockets): `chmod 700 {path}` if you made it, "
                              f"else remove it")
    else:
        return
    raise RuntimeDirError(f"the lab's runtime folder {path} {problem}: refusing to use it; remove it "
                          f"(if it is not yours, ask an administrator) or set XDG_RUNTIME_DIR to a folder of yours")


def describe_user(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end of a connected Unix socket (Linux's
    SO_PEERCRED); None where the platform cannot tell."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def write_private(path: Path, text: str) -> None:
    """A file only this user can read, replaced whole (a reader never sees half of it)."""
    partial = path.with_name(f".{path.name}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with open(fd, "w", encoding="utf-8") as file:
        os.fchmod(fd, 0o600)  # a file left by an earlier lab keeps its mode through O_CREAT
        file.write(text)
    os.replace(partial, path)
