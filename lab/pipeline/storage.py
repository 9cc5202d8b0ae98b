"""Where a sweep's logs and a report's files go: a folder on the driver, or a URI the Hadoop client in
pyspark understands (file://, hdfs://, s3a://, …), written by the driver.

A plain path is the driver's own disk (pathlib). A URI is Spark's: it is opened through Hadoop's
FileSystem in the driver's JVM, so whatever filesystems the Spark installation is configured for
work, and one it is not (no hadoop-aws for s3a://) is a one-line error, never a local folder named
`s3a:`. Every write is whole-or-nothing: a temporary name, then a rename.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from .spark import first_line

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: files get the mode open() would give them, not mkstemp's 0600
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class StoreError(RuntimeError):
    """A location that cannot be used; the message names it and says why."""


def is_uri(location: str) -> bool:
    return _SCHEME.match(str(location)) is not None


def open_store(location: str | Path, spark=None) -> "Store":
    """A store for `location`: a plain path on the driver, or (with a running Spark) a Hadoop URI."""
    location = str(location)
    if not is_uri(location):
        return LocalStore(Path(location))
    if spark is None:
        raise StoreError(f"{location}: a URI needs Spark's Hadoop client, and Spark is not running")
    return HadoopStore(spark, location)


class Store:
    """A folder of named files (names may hold '/', e.g. tables/runs.parquet)."""

    uri: str

    def child(self, name: str) -> str:
        """The full location of `name`, as a user would type it."""
        return f"{self.uri.rstrip('/')}/{name}"

    def list(self, suffix: str = "") -> dict[str, int]:
        """Files directly in the folder whose names end with suffix, name -> size in bytes."""
        raise NotImplementedError

    def exists(self, name: str) -> bool:
        raise NotImplementedError

    def read_bytes(self, name: str) -> bytes:
        raise NotImplementedError

    def write_bytes(self, name: str, data: bytes) -> None:
        raise NotImplementedError

    def delete(self, name: str) -> None:
        """Remove a file or a whole subfolder; nothing there is fine."""
        raise NotImplementedError

    def is_empty(self) -> bool:
        raise NotImplementedError

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode())

    def read_text(self, name: str) -> str:
        return self.read_bytes(name).decode()


class LocalStore(Store):
    def __init__(self, root: Path):
        self.root = root
        self.uri = str(root)
        if root.exists() and not root.is_dir():
            raise StoreError(f"{root}: exists and is not a directory")

    def child(self, name: str) -> str:
        return str(self.root / name)

    def list(self, suffix: str = "") -> dict[str, int]:
        if not self.root.is_dir():
            return {}
        return {p.name: p.stat().st_size for p in sorted(self.root.iterdir())
                if p.is_file() and p.name.endswith(suffix)}

    def exists(self, name: str) -> bool:
        return (self.root / name).exists()

    def read_bytes(self, name: str) -> bytes:
        return (self.root / name).read_bytes()

    def write_bytes(self, name: str, data: bytes) -> None:
        path = self.root / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o666 & ~_UMASK)
            os.replace(tmp, path)
        except OSError as e:
            raise StoreError(f"cannot write {path}: {e.strerror or e}") from None

    def delete(self, name: str) -> None:
        path = self.root / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    def is_empty(self) -> bool:
        return not self.root.exists() or not any(self.root.iterdir())


class HadoopStore(Store):
    """A folder behind Hadoop's FileSystem API, driven from the driver's JVM over py4j."""

    def __init__(self, spark, uri: str):
        self.uri = uri.rstrip("/") or uri
        sc = spark.sparkContext
        self._jvm = sc._jvm
        self._path = self._jvm.org.apache.hadoop.fs.Path
        try:
            self._fs = self._path(self.uri).getFileSystem(sc._jsc.hadoopConfiguration())
            status = self._fs.getFileStatus(self._path(self.uri)) if self._fs.exists(self._path(self.uri)) else None
        except Exception as e:  # py4j's Java errors: unknown scheme, unreachable namenode, no credentials
            raise StoreError(f"{uri}: {_java_reason(e)}") from None
        if status is not None and not status.isDirectory():
            raise StoreError(f"{uri}: exists and is not a directory")

    def _call(self, what: str, name: str, fn):
        try:
            return fn()
        except Exception as e:
            raise StoreError(f"cannot {what} {self.child(name)}: {_java_reason(e)}") from None

    def list(self, suffix: str = "") -> dict[str, int]:
        def go():
            root = self._path(self.uri)
            if not self._fs.exists(root):
                return {}
            return {s.getPath().getName(): s.getLen() for s in self._fs.listStatus(root)
                    if s.isFile() and s.getPath().getName().endswith(suffix)}
        return dict(sorted(self._call("list", "", go).items()))

    def exists(self, name: str) -> bool:
        return self._call("look for", name, lambda: self._fs.exists(self._path(self.child(name))))

    def read_bytes(self, name: str) -> bytes:
        def go():
            stream = self._fs.open(self._path(self.child(name)))
            try:
                return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
            finally:
                stream.close()
        return self._call("read", name, go)

    def write_bytes(self, name: str, data: bytes) -> None:
        final = self._path(self.child(name))
        parent, slash, base = name.rpartition("/")
        tmp = self._path(self.child(f"{parent}{slash}.{base}.{os.getpid()}.tmp"))

        def go():
            out = self._fs.create(tmp, True)
            try:
                out.write(bytearray(data))
            finally:
                out.close()
            if self._fs.exists(final):
                self._fs.delete(final, False)
            if not self._fs.rename(tmp, final):
                raise StoreError("rename refused")
        self._call("write", name, go)

    def delete(self, name: str) -> None:
        self._call("delete", name, lambda: self._fs.delete(self._path(self.child(name)), True))

    def is_empty(self) -> bool:
        def go():
            root = self._path(self.uri)
            return not self._fs.exists(root) or len(self._fs.listStatus(root)) == 0
        return self._call("list", "", go)


def _java_reason(error: Exception) -> str:
    """The first line of a Java exception, without py4j's wrapping: what a user can act on."""
    first = first_line(error)
    scheme = re.search(r'No FileSystem for scheme "?([^"\s]+)"?', first)
    missing = re.search(r"ClassNotFoundException: Class (\S+) not found", first)
    if scheme or missing:
        what = f"for {scheme.group(1)!r}" if scheme else f"class: {missing.group(1)} is not on its classpath"
        return (f"Spark's Hadoop client has no filesystem {what} "
                f"(for s3a://, add org.apache.hadoop:hadoop-aws to spark.jars.packages)")
    return first.split(": ", 1)[1] if first.startswith(("java.", "org.")) and ": " in first else first
