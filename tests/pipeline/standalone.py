"""A real Spark standalone cluster on 127.0.0.1, started from the pyspark package itself (its
spark-class): one master, one worker with a work directory of its own. No REST server, no UIs
beyond what the daemons insist on, free ports picked by the OS."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    root: Path
    master_port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def work_dir(self) -> Path:
        return self.root / "worker-work"

    def _daemon(self, name: str, *args: str) -> subprocess.Popen:
        env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
               "SPARK_LOG_DIR": str(self.root / "logs"), "SPARK_CONF_DIR": str(self.root / "conf")}
        log = open(self.root / f"{name}.log", "wb")
        process = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(process)
        return process

    def start(self) -> "Cluster":
        (self.root / "conf").mkdir(parents=True, exist_ok=True)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(self.master_port), "--webui-port", str(free_port()))
        self._wait_for("master", "I have been elected leader")
        self._daemon("worker", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                     "--cores", "2", "--memory", "2g", "--work-dir", str(self.work_dir),
                     "--webui-port", str(free_port()))
        self._wait_for("worker", "Successfully registered with master")
        return self

    def _wait_for(self, name: str, line: str) -> None:
        log = self.root / f"{name}.log"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if line in log.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self.processes):
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the Spark {name} did not start; its log:\n{log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, 15)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()
        self.processes.clear()
