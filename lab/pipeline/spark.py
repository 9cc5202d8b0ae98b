"""The SparkSession behind `nslab sweep` and `nslab report`: local by default, quiet, on loopback.

The master is, first found: --master, the MASTER environment variable, `spark.master` in
spark-defaults.conf ($SPARK_CONF_DIR or $SPARK_HOME/conf), then `local[*]`. A local session binds
to 127.0.0.1 and runs its workers on this very Python. On a cluster, nslab ships its own code to the
executors (a zip added with addPyFile) and runs them on the executor Python: --python, else
PYSPARK_PYTHON, else `spark.pyspark.python`, else this interpreter's path. Nothing assumes the
executors share a filesystem with the driver.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

MIN_JAVA = 17
LOG4J = Path(__file__).with_name("log4j2.properties")


class SparkSetupError(RuntimeError):
    """Spark cannot start here; the message says what to install or set."""


def java_version() -> int | None:
    """The major version of the java Spark will launch (JAVA_HOME first, as spark-submit does)."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except OSError:
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def check_java() -> None:
    version = java_version()
    install = "install a JDK 17 or newer (e.g. `apt-get install openjdk-17-jre-headless`) or point JAVA_HOME at one"
    if version is None:
        raise SparkSetupError(f"Spark needs Java {MIN_JAVA}+, and no working `java` was found: {install}")
    if version < MIN_JAVA:
        raise SparkSetupError(f"Spark 4 needs Java {MIN_JAVA}+, but `java` is Java {version}: {install}")


def _defaults(key: str) -> str | None:
    """A setting from spark-defaults.conf, as spark-submit would read it."""
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        str(Path(os.environ["SPARK_HOME"]) / "conf") if "SPARK_HOME" in os.environ else None)
    if conf_dir is None:
        return None
    try:
        lines = (Path(conf_dir) / "spark-defaults.conf").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0] == key:
            return parts[1].strip()
    return None


def master_url(master: str | None = None) -> str:
    return master or os.environ.get("MASTER") or _defaults("spark.master") or "local[*]"


def executor_python(python: str | None = None, conf: dict[str, str] | None = None) -> str:
    """The interpreter executors run: --python, PYSPARK_PYTHON, spark.pyspark.python, else ours."""
    return (python or os.environ.get("PYSPARK_PYTHON") or (conf or {}).get("spark.pyspark.python")
            or _defaults("spark.pyspark.python") or sys.executable)


CONNECT_TIMEOUT = 3.0  # s per master address: a refused or silent master is an error at once
EXECUTOR_WAIT = 30.0  # s for the first executor to register and run a probe
LOOPBACK = ("127.", "localhost", "::1", "[::1]")


def standalone_masters(url: str) -> list[tuple[str, int]]:
    """The host:port pairs of a spark:// URL (several with ZooKeeper recovery); [] for other masters."""
    if not url.startswith("spark://"):
        return []
    pairs = []
    for part in url[len("spark://"):].rstrip("/").split(","):
        host, _, port = part.rpartition(":")
        try:
            pairs.append((host.strip("[]"), int(port)))
        except ValueError:
            raise SparkSetupError(f"{url}: expected spark://HOST:PORT") from None
    return pairs


def check_reachable(url: str) -> None:
    """Fail in seconds, in one line, when no master of a spark:// URL accepts a connection (Spark
    itself retries for a minute, then prints a page of py4j traceback)."""
    errors = []
    for host, port in standalone_masters(url):
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
            return
        except OSError as e:
            errors.append(f"{host}:{port}: {e.strerror or e}")
    if errors:
        raise SparkSetupError(f"cannot reach the Spark master {url} ({'; '.join(errors)}): "
                              "is it running, and is that its host and port?")


def build(master: str | None = None, conf: dict[str, str] | None = None, python: str | None = None):
    """A new SparkSession (or the running one: tests share theirs with the commands)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_java()
    url = master_url(master)
    local = url.startswith("local")
    conf = conf or {}
    java_opts = f"-Dlog4j2.configurationFile={LOG4J.as_uri()}"
    settings = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    # PySpark's RDDs take the worker Python from the environment, not from the conf.
    os.environ["PYSPARK_PYTHON"] = sys.executable if local else executor_python(python, conf)
    settings["spark.pyspark.python"] = os.environ["PYSPARK_PYTHON"]
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else a warning about the hostname
        # Short jobs on few cores: the C1 compiler alone starts Spark in half the time.
        java_opts += " -XX:TieredStopAtLevel=1"
        # Few cores: few shuffle partitions; logs packed into splits small enough that every core
        # gets a fair share of the decoding (the default 128 MB split leaves one core idle at the
        # end), big enough that each Python task decodes several logs (a task has its own cost: at
        # 16 MB, a million events' decoding took 1-2 s longer). Listing a few dozen logs is quicker
        # on the driver than as a Spark job (which Spark starts above 32 paths).
        settings |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                     "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 1)),
                     "spark.sql.files.maxPartitionBytes": "40m",
                     "spark.sql.sources.parallelPartitionDiscovery.threshold": "10000"}
    else:
        check_reachable(url)
        if all(host.startswith(LOOPBACK) for host, _ in standalone_masters(url)) and standalone_masters(url):
            # A cluster on this machine: the driver stays on loopback too (a remote cluster needs
            # the driver reachable from its workers, which is the user's network to choose).
            settings |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    settings["spark.driver.extraJavaOptions"] = java_opts
    spark_conf = SparkConf().setMaster(url).setAppName("nslab").setAll(list((settings | conf).items()))
    try:
        context = SparkContext(conf=spark_conf, gateway=_quiet_gateway(spark_conf))
    except Exception as e:  # py4j's page of traceback says less than its first line
        raise SparkSetupError(f"Spark did not start on {url}: {first_line(e)}") from None
    context.setLogLevel("ERROR")
    spark = SparkSession(context)
    if not local:
        try:
            _ship_code(context)
            _await_executors(context, url)
        except BaseException:
            spark.stop()
            raise
        if "spark.sql.shuffle.partitions" not in conf and _defaults("spark.sql.shuffle.partitions") is None:
            # Spark's default of 200 is for big data; a report's tables are small: a few per core.
            spark.conf.set("spark.sql.shuffle.partitions", str(2 * context.defaultParallelism))
    return spark


def first_line(error: BaseException) -> str:
    """A py4j error's Java exception (or any error) in its first line: what a user can act on."""
    java = getattr(error, "java_exception", None)
    text = (str(java.toString()) if java is not None else str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__


# The packages a run needs on an executor, with their data files (bundled scenarios, templates).
PACKAGES = ("lab", "nameserver", "chaos")


def code_archive(directory: Path) -> Path:
    """nslab's own packages as a zip that executors put on their sys.path."""
    import zipfile

    root = Path(__file__).resolve().parents[2]
    path = directory / "nslab-code.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in PACKAGES:
            for file in sorted((root / package).rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts and file.suffix != ".pyc":
                    archive.write(file, file.relative_to(root).as_posix())
    return path


def _ship_code(context) -> None:
    directory = Path(tempfile.mkdtemp(prefix="nslab-spark-"))
    # The driver serves the file to executors as they start, for as long as it runs.
    atexit.register(shutil.rmtree, directory, True)
    context.addPyFile(str(code_archive(directory)))


def _probe(_) -> list[str]:
    """On an executor: the modules it cannot import (nslab's code is shipped; its dependencies are not)."""
    import importlib

    missing = []
    for module in ("trio", "msgpack", "faker", "lab.control.scenarios"):
        try:
            importlib.import_module(module)
        except ImportError as e:
            missing.append(e.name or module)
    return [sys.executable, *dict.fromkeys(missing)]


def _await_executors(context, url: str) -> None:
    """Run one probe task: it waits for an executor and shows one that cannot run nslab at once,
    in a sentence, rather than as every sweep task failing four times."""
    from concurrent.futures import ThreadPoolExecutor, TimeoutError

    group = "nslab-probe"

    def probe():
        context.setJobGroup(group, "nslab: executor probe")
        return context.parallelize([0], 1).map(_probe).collect()[0]

    pool = ThreadPoolExecutor(1)
    future = pool.submit(probe)
    try:
        found = future.result(timeout=EXECUTOR_WAIT)
    except TimeoutError:
        context.cancelJobGroup(group)
        raise SparkSetupError(f"no executor of {url} ran a task within {EXECUTOR_WAIT:.0f} s: is a worker "
                              "registered, with a free core and the memory an executor asks "
                              "(spark.executor.memory, 1g by default)?") from None
    except Exception as e:
        raise SparkSetupError(f"executors of {url} cannot run Python ({os.environ['PYSPARK_PYTHON']}): "
                              f"{_python_error(e)}; choose the executors' interpreter with --python") from None
    finally:
        pool.shutdown(wait=False)
    python, *missing = found
    if missing:
        raise SparkSetupError(f"the executors' Python ({python}) has no {', '.join(missing)}: install nslab's "
                              "dependencies there (pip install nslab), or choose another interpreter with --python")


def _python_error(error: BaseException) -> str:
    """Why a task failed, out of its traceback: the reason of its last attempt."""
    text = str(getattr(error, "java_exception", None) or error)
    found = re.search(r"(Cannot run program .*?)(?:\n|$)", text) or re.search(r"\): ([^\n]+)", text)
    return found.group(1).strip() if found else first_line(error)


# What the JVM says at every start that tells a user nothing: Spark 4 runs with the incubating
# vector API, and the module system announces it on stderr before anything else is printed.
JVM_NOISE = ("WARNING: Using incubator modules:",)


def _quiet_gateway(conf):
    """The JVM behind Spark, its stderr passed on to ours but for JVM_NOISE."""
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=_pass_stderr, args=(gateway.proc.stderr,), daemon=True,
                     name="spark-jvm-stderr").start()
    return gateway


def _pass_stderr(stream) -> None:
    for line in iter(stream.readline, b""):
        if not line.decode(errors="replace").startswith(JVM_NOISE):
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()


@contextmanager
def session(master: str | None = None, python: str | None = None) -> Iterator:
    """A SparkSession for one command: stopped at the end unless it was already running."""
    from pyspark.sql import SparkSession

    running = SparkSession.getActiveSession()
    spark = build(master, python=python)
    try:
        yield spark
    finally:
        if running is None:
            spark.stop()
