"""A restart that fails says the node's own error, in-process and as a process, to `nslab chaos`."""

from __future__ import annotations

import json
import socket

import pytest
import trio

from lab.config import LabConfig
from lab.control.actions import LabControl
from lab.control.live import ControlServer
from lab.run.runner import RunOptions, run_cluster


@pytest.mark.parametrize("processes", [False, True])
def test_a_restart_on_a_taken_port_reports_the_nodes_own_error(processes):
    replies = {}

    async def drive(cluster, events, nursery):
        server = ControlServer(cluster, LabControl(cluster, nursery), {})
        await server.execute(json.dumps({"words": ["kill", "broker-a-0"]}).encode())
        host, _, port = cluster.supervisor.nodes["broker-a-0"].address.rpartition(":")
        with socket.socket() as squatter:  # someone else took the broker's port meanwhile
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind((host, int(port)))
            squatter.listen()
            replies["restart"] = await server.execute(json.dumps({"words": ["restart", "broker-a-0"]}).encode())
        replies["state"] = cluster.supervisor.nodes["broker-a-0"].state
        replies["after"] = await server.execute(json.dumps({"words": ["restart", "broker-a-0"]}).encode())

    trio.run(lambda: run_cluster(LabConfig(), RunOptions(seed=1, processes=processes), driver=drive))
    assert replies["restart"]["ok"] is False
    message = replies["restart"]["message"]
    assert message.startswith("broker-a-0 could not start: ") and "Address already in use" in message
    assert "task_status" not in message and "ExceptionGroup" not in message
    assert replies["state"] == "crashed"
    assert replies["after"] == {"ok": True, "message": "broker-a-0 restarted"}  # once the port is free again


def test_a_new_client_that_cannot_start_says_its_cause_once(monkeypatch):
    from lab.clients.producer import Producer

    replies = {}

    async def refused(self):
        raise OSError("every NameServer refused")

    async def drive(cluster, events, nursery):
        server = ControlServer(cluster, LabControl(cluster, nursery), {})
        monkeypatch.setattr(Producer, "start", refused)
        replies["new"] = await server.execute(json.dumps({"words": ["new-client", "producer"]}).encode())

    trio.run(lambda: run_cluster(LabConfig(), RunOptions(seed=1), driver=drive))
    message = replies["new"]["message"]
    assert message.startswith("producer-2 could not start: "), message
    assert message.endswith("OSError: every NameServer refused"), message
    assert message.count("could not start") == 1 and "StartError" not in message and "Trio nursery" not in message
