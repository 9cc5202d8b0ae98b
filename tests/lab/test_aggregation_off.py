"""The simulator's aggregation of idle traffic changes nothing but the speed.

On a simulated network the lab may skip idle periodic traffic that changes nothing ("coasting":
a held pull renewed in place, a route poll or rebalance round answered in aggregate, an unchanged
offset not resent; chaos/network.py, Network.aggregate). NSLAB_AGGREGATE=0 turns every such path
off and each role runs its plain RocketMQ flow, call by call. With no link jitter (whose draws
the skipped sends would have made), every bundled scenario then writes the same event log, byte
for byte, aggregated or not.

One difference is known and held here to exactly its extent: a request skipped in aggregate draws
no request number (RemotingCommand's opaque, one counter per node, as RocketMQ's requestId is one
per JVM), so the requests a node sends later carry lower numbers than in the plain run. The log
shows request numbers only in chaos.request records (a request fault acting), and aggregation is
off from the first request fault on; in the scenarios that set request faults those records'
`opaque` alone may differ, and everything else must be the same bytes.
"""

from __future__ import annotations

import collections
import hashlib
import io

import msgpack
import pytest

from chaos import network
from lab.control import scenarios
from lab.run.networks import AGGREGATE_VARIABLE
from lab.run.runner import RunOptions

SEED = 1
NAMES = [path.stem for path in scenarios.bundled()]


def _run(name: str, path, aggregate: bool, monkeypatch) -> bytes:
    monkeypatch.setenv(AGGREGATE_VARIABLE, "1" if aggregate else "0")
    scenarios.run(scenarios.prepare(name, overrides=["network.jitter=0"]),
                  RunOptions(sim=True, seed=SEED, events_path=path))
    return path.read_bytes()


def _records(data: bytes) -> list[dict]:
    return list(msgpack.Unpacker(io.BytesIO(data), raw=False))


def _without_request_numbers(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "opaque"} if r.get("kind") == "chaos.request" else r
            for r in records]


def _first_difference(on: list[dict], off: list[dict]) -> str:
    for i, (a, b) in enumerate(zip(on, off)):
        if a != b:
            return f"record {i}:\n  aggregated: {a}\n  plain:      {b}"
    return f"one log is a prefix of the other: {len(on)} records aggregated, {len(off)} plain"


@pytest.mark.parametrize("name", NAMES)
def test_a_scenario_writes_the_same_bytes_with_aggregation_off(name, tmp_path, monkeypatch):
    offers = collections.Counter()
    for method in ("renew_peer_call", "coast_peer_call", "coast_queries", "watch_peer"):
        def counting(self, *args, _method=getattr(network._SimEnd, method), _name=method):
            taken = _method(self, *args)
            offers[_name, self.net.aggregate] += taken is not None
            return taken
        monkeypatch.setattr(network._SimEnd, method, counting)

    aggregated = _run(name, tmp_path / "aggregated.log", True, monkeypatch)
    plain = _run(name, tmp_path / "plain.log", False, monkeypatch)
    assert sum(n for (_, on), n in offers.items() if on) > 0, f"nothing aggregated in {name}: {offers}"
    assert sum(n for (_, on), n in offers.items() if not on) == 0, f"aggregated while off: {offers}"

    if hashlib.sha256(aggregated).digest() == hashlib.sha256(plain).digest():
        return
    on, off = _records(aggregated), _records(plain)
    if any(r["kind"] == "chaos.request" for r in on):  # request numbers may differ there, and nothing else
        on, off = _without_request_numbers(on), _without_request_numbers(off)
        assert on == off, _first_difference(on, off)
        return
    pytest.fail(f"{name}: the event logs differ, aggregated and not; first at {_first_difference(on, off)}")
