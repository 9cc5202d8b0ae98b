"""Idle queues cost nothing in a simulated run, and change nothing a user sees.

An idle queue's consumer gets an empty long-poll answer every 15 s and sends the same pull straight
back; every 5 s it resends every offset, changed or not. On a simulated network without faults the
lab skips those round trips (SuspendedPull.renew in lab/broker/held_replies.py,
Consumer.persist_consumer_offset), and once renewed a pull coasts: renewed every period with no
timer until something changes (SuspendedPull.coast). With no link jitter (whose draws the skipped sends would have
made), a run with the skipping and one without must hold the same records at the same times: only the order of records of one same
instant may differ (and request numbers). All 18 small bundled scenarios passed this when it was
written; five run here.
"""

from __future__ import annotations

import collections

import msgpack
import pytest

from chaos import network
from lab.broker.held_replies import SuspendedPull
from lab.broker.long_polling import PullRequestHoldService
from lab.clients.consumer import Consumer
from lab.control import scenarios
from lab.run.runner import RunOptions


def _records(path) -> collections.Counter:
    """The log's records, but for request numbers (chaos.request's opaque): a node numbers its
    requests with one counter, and the pulls not sent again draw none."""
    with open(path, "rb") as f:
        return collections.Counter(msgpack.packb({k: v for k, v in r.items() if k != "opaque"})
                                   for r in msgpack.Unpacker(f, raw=False))


def _run(name: str, path) -> collections.Counter:
    verdict = scenarios.run(scenarios.prepare(name, overrides=["network.jitter=0"]),
                            RunOptions(sim=True, events_path=path))
    assert verdict.valid, [r.to_dict() for r in verdict.results]
    return _records(path)


@pytest.mark.parametrize("name", ["broker-crash", "master-down", "partition", "registrations-lost", "route-dialect"])
def test_skipping_idle_round_trips_leaves_every_record_as_it_was(name, tmp_path, monkeypatch):
    skipped = collections.Counter()
    renewed, vouched, catch_up = PullRequestHoldService._renewed, Consumer._still_vouched, SuspendedPull.catch_up

    def counting_renewed(self, request):
        ok = renewed(self, request)
        skipped["pull round trips"] += ok
        return ok

    def counting_vouched(self, *args):
        ok = vouched(self, *args)
        skipped["offset rounds"] += ok
        return ok

    def counting_catch_up(self, now):
        before = self.renewed_at
        catch_up(self, now)
        skipped["coasting renewals"] += self.renewed_at != before

    monkeypatch.setattr(PullRequestHoldService, "_renewed", counting_renewed)
    monkeypatch.setattr(Consumer, "_still_vouched", counting_vouched)
    monkeypatch.setattr(SuspendedPull, "catch_up", counting_catch_up)
    quiet = _run(name, tmp_path / "skipping.log")
    assert skipped["pull round trips"] > 10 and skipped["offset rounds"] > 5, skipped  # it did skip
    assert skipped["coasting renewals"] > 10, skipped  # and pulls coasted, renewed with no timer

    monkeypatch.setattr(network._SimEnd, "renew_peer_call", lambda self, opaque: None)
    monkeypatch.setattr(network._SimEnd, "delivers_everything", lambda self: False)
    every = _run(name, tmp_path / "every.log")
    only_skipping = [msgpack.unpackb(r) for r in (quiet - every).elements()][:5]
    only_every = [msgpack.unpackb(r) for r in (every - quiet).elements()][:5]
    assert not only_skipping and not only_every, (only_skipping, only_every)


def test_once_a_request_fault_was_set_every_offset_is_resent(tmp_path, monkeypatch):
    # A request fault drops or rewrites single commands: an offset sent before may not have arrived.
    rounds = collections.Counter()
    persist = Consumer.persist_consumer_offset

    async def counting(self, *, periodic=False):
        if periodic:
            vouched = self._persisted_by is not None and self._still_vouched(*self._persisted_by)
            channel = next(iter(self.instance.channels._clients.values()))
            rounds[("after a fault" if channel.stream.net.links.requests.ever else "before", vouched)] += 1
        await persist(self, periodic=periodic)

    monkeypatch.setattr(Consumer, "persist_consumer_offset", counting)
    _run("registrations-lost", tmp_path / "faulted.log")
    assert rounds[("before", True)] > 0 and rounds[("after a fault", False)] > 10, rounds
    assert rounds[("after a fault", True)] == 0, rounds
