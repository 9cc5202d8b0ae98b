"""An application on the real C++ RocketMQ client (tests/lab/apps/real_app.py) run by `nslab run
--app`: what it sent, was delivered and committed is read from its links (issue 39 part A)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rocketmq.client", reason="needs PyPI rocketmq 0.4.4 (the C++ client; x86-64 Linux): "
                                              "pip install rocketmq==0.4.4")

from lab.events import read_events  # noqa: E402

NSLAB = str(Path(sys.executable).with_name("nslab"))
REAL_APP = Path(__file__).with_name("apps") / "real_app.py"

SCENARIO = """\
# The real client as the app, beside a one-broker lab with no clients of its own.
[scenario]
teaches = "a real client app is seen on the wire"
duration = "12s"

[cluster]
nameservers = 2
brokers = ["broker-a"]
slavesPerBroker = 0
producers = 0
consumers = 0
topicNames = ["AppTopic"]
"""


def test_a_real_client_apps_sends_deliveries_and_commits_are_recorded(tmp_path):
    scenario = tmp_path / "real.toml"
    scenario.write_text(SCENARIO)
    events = tmp_path / "run.events"
    env = {**os.environ, "HOME": str(tmp_path)}  # the C++ client logs under ~/logs/rocketmq-cpp
    result = subprocess.run([NSLAB, "run", str(scenario), "--events", str(events), "--run-dir", str(tmp_path / "run"),
                             "--app", f"{sys.executable} {REAL_APP} AppTopic GID-app --gap 0.2"],
                            capture_output=True, text=True, timeout=90, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    records = list(read_events(events))
    app = [r for r in records if r["node"] == "app"]
    output = [json.loads(line) for line in (tmp_path / "run" / "apps" / "app.stdout").read_text().splitlines()]
    sent_ok = sum(1 for line in output if line.get("status") == "SEND_OK" or line.get("status") == "OK")
    assert sent_ok >= 10, output[-5:]

    sends = [r for r in app if r["kind"] == "app.send"]
    acked = [r for r in sends if r["result"] == 0]
    assert len(acked) >= sent_ok  # every send the client saw acknowledged, the lab saw acknowledged
    assert all(r["peer"] == "broker-a-0" and r["topic"] == "AppTopic" and r["group"] == "GID-app-producer"
               and r["uniq_key"] and r["msg_id"] and r["queue"] is not None and r["offset"] is not None
               and r["ms"] is not None for r in acked)
    delivered = {(r["queue"], offset): key for r in app if r["kind"] == "app.deliver" and r["topic"] == "AppTopic"
                 for offset, key in r["messages"]}
    assert all(r["group"] == "GID-app" for r in app if r["kind"] == "app.deliver")
    # what the consumer got is what the producer was acknowledged: same queues, offsets and keys
    early = [r for r in acked if r["t"] < 10.0]
    assert early and all(delivered.get((r["queue"], r["offset"])) == r["uniq_key"] for r in early)
    commits = [r for r in app if r["kind"] == "app.commit" and r["topic"] == "AppTopic"]
    assert commits and all(r["group"] == "GID-app" and r["offset"] >= 0 for r in commits)
    assert max(r["offset"] for r in commits) >= 1
    heartbeats = [r for r in app if r["kind"] == "app.heartbeat"]
    assert any("GID-app" in r["consumer_groups"] for r in heartbeats)
    routes = [r for r in app if r["kind"] == "app.route" and r["topic"] == "AppTopic"]
    assert routes and all(r["brokers"] == ["broker-a-0"] for r in routes if r["result"] == 0)
    (exit_record,) = [r for r in app if r["kind"] == "app.exit"]
    assert exit_record["code"] == 0 and exit_record["stopped_by_lab"] and exit_record["reason"] == "end"
