"""The SparkSession behind `nslab sweep` and `nslab report`: local by default, quiet, on loopback.

The master is, first found: --master, the MASTER environment variable, `spark.master` in
spark-defaults.conf ($SPARK_CONF_DIR or $SPARK_HOME/conf), then `local[*]`. A local session binds
to 127.0.0.1 and runs its workers on this very Python; on a cluster the executors need nslab
installed and DIR on a shared filesystem.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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


def _defaults_master() -> str | None:
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
        if len(parts) == 2 and parts[0] == "spark.master":
            return parts[1].strip()
    return None


def master_url(master: str | None = None) -> str:
    return master or os.environ.get("MASTER") or _defaults_master() or "local[*]"


def build(master: str | None = None, conf: dict[str, str] | None = None):
    """A new SparkSession (or the running one: tests share theirs with the commands)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    check_java()
    url = master_url(master)
    local = url.startswith("local")
    java_opts = f"-Dlog4j2.configurationFile={LOG4J.as_uri()}"
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.pyspark.python": sys.executable if local else os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    if local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else a warning about the hostname
        # Short jobs on few cores: the C1 compiler alone starts Spark in half the time.
        java_opts += " -XX:TieredStopAtLevel=1"
        # Few cores: few shuffle partitions; logs packed into small splits so that every core gets
        # a fair share of the decoding (the default 128 MB split leaves one core idle at the end).
        settings |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                     "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 1)),
                     "spark.sql.files.maxPartitionBytes": "16m"}
    settings["spark.driver.extraJavaOptions"] = java_opts
    spark_conf = SparkConf().setMaster(url).setAppName("nslab").setAll(list((settings | (conf or {})).items()))
    context = SparkContext(conf=spark_conf, gateway=_quiet_gateway(spark_conf))
    context.setLogLevel("ERROR")
    return SparkSession(context)


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
def session(master: str | None = None) -> Iterator:
    """A SparkSession for one command: stopped at the end unless it was already running."""
    from pyspark.sql import SparkSession

    running = SparkSession.getActiveSession()
    spark = build(master)
    try:
        yield spark
    finally:
        if running is None:
            spark.stop()
