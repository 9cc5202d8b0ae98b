"""The broker never knows it is simulated: lab/broker/ is RocketMQ's plain flow, and the simulator's
aggregation of idle long polls lives in lab/sim/broker.py (CoastingBroker and its hold service),
which the lab builds on the simulated network alone."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from lab.broker import admin
from lab.broker.long_polling import HeldRequest, PullRequestHoldService
from lab.broker.server import Broker
from lab.run.networks import sim_network, tcp_network
from lab.sim.broker import CoastingBroker, CoastingPullRequestHoldService, Renewable, broker_class

from conftest import Harness
from test_clients import ClientLab

ROOT = Path(__file__).resolve().parents[2]


# --- the plain broker --------------------------------------------------------------------------------

# The broker's pull path: the connection, the pull, its hold, what it counts.
PULL_PATH = ("server.py", "pull.py", "long_polling.py", "held_replies.py", "stats.py")


def test_no_broker_module_imports_the_simulator_and_its_pull_path_mentions_no_coasting():
    lines = [(path.name, n, line) for path in sorted((ROOT / "lab" / "broker").glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)]
    offenders = [f"{name}:{n}" for name, n, line in lines
                 if "lab.sim" in line or (name in PULL_PATH and "coast" in line.lower())]
    assert not offenders, offenders


def test_the_broker_runs_without_the_simulators_broker_loaded():
    # What a broker on sockets loads (`nslab broker`, a process-mode broker): RocketMQ's broker,
    # never the simulator's side of it.
    code = ("import sys, lab.broker.server, lab.broker.held_replies, lab.broker.long_polling; "
            "print('lab.sim.broker' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout


async def test_the_lab_runs_the_coasting_broker_on_the_simulated_network_alone(nursery):
    assert broker_class(sim_network(seed=1)) is CoastingBroker
    assert broker_class(tcp_network(nursery)) is Broker
    assert issubclass(CoastingBroker, Broker) and CoastingBroker.hold_service_class is CoastingPullRequestHoldService


# --- held requests that coast ---------------------------------------------------------------------

class _IdlePull(HeldRequest, Renewable):
    """Never ready, renewed every 10 s, coasting once renewed; its settling may raise."""

    def __init__(self, clock, *, settling_raises: bool = False):
        super().__init__("connection", "key", check_interval=math.inf)
        self.clock, self.settling_raises, self.answered = clock, settling_raises, False

    def has_new(self) -> bool:
        return False

    def answer(self) -> None:
        self.answered = True

    def renew(self) -> float:
        return self.clock[0] + 10

    def coast(self, stop_coasting) -> bool:
        return True

    def catch_up(self, now: float) -> None:
        if self.settling_raises:
            raise RuntimeError("catch_up failed")
        while self.deadline <= now:
            self.deadline += 10


def _service(cls, clock, errors, timers):
    service = cls(lambda: clock[0], on_error=errors.append)
    service._call_at = lambda when, callback: timers.append(when)  # as run() sets it, without trio
    return service


def test_the_plain_hold_service_answers_a_pull_at_its_deadline_whatever_it_offers():
    clock, errors, timers = [0.0], [], []
    service = _service(PullRequestHoldService, clock, errors, timers)
    request = _IdlePull(clock)
    service.hold(request, 10)
    clock[0] = 10.0
    service._check()  # checkHoldRequest: past its suspend time, it is woken and answered
    assert (service.held, request.answered, errors) == (0, True, [])



@pytest.mark.parametrize("settling_raises", [False, True])
def test_a_coasting_request_woken_is_back_on_the_timers_and_what_it_raises_is_the_services(settling_raises):
    clock, errors, timers = [0.0], [], []
    service = _service(CoastingPullRequestHoldService, clock, errors, timers)
    request = _IdlePull(clock, settling_raises=settling_raises)
    service.hold(request, 10)
    clock[0] = 10.0
    service._check()  # its deadline: renewed, and coasting from then on
    assert (service.held, service.coasting, request.answered) == (1, 1, False)
    clock[0] = 35.0
    service.uncoast(request)  # its consumer's state changed: this must not raise into the consumer
    assert service.coasting == 0 and timers[-1] == request.deadline
    assert [str(e) for e in errors] == (["catch_up failed"] if settling_raises else [])
    assert request.deadline == (20.0 if settling_raises else 40.0)  # renewed at 20 and 30 while coasting


def test_a_coasting_request_whose_connection_closes_has_its_renewals_counted_and_is_never_answered():
    clock, errors, timers = [0.0], [], []
    service = _service(CoastingPullRequestHoldService, clock, errors, timers)
    request = _IdlePull(clock)
    service.hold(request, 10)
    clock[0] = 10.0
    service._check()
    clock[0] = 45.0
    service.drop("connection")
    assert (service.held, service.coasting, request.answered, request.deadline) == (0, 0, False, 50.0)


# --- getMissTps, aggregated or not ----------------------------------------------------------------------

async def _idle_cluster(nursery, aggregate: bool, clusters: dict) -> None:
    """A NameServer, broker-a and one consumer of its idle topic on a simulated network of their
    own, aggregating idle traffic or not (NSLAB_AGGREGATE), built as test_clients builds them."""
    lab = ClientLab(Harness(nursery, sim_network(seed=1, aggregate=aggregate)))
    _, brokers = await lab.start_cluster()
    await lab.consumer("consumer-0")
    clusters[aggregate] = lab.sim, brokers["broker-a"]


async def test_the_idle_pulls_a_broker_counts_in_get_miss_tps_are_the_same_aggregated_or_not(nursery, autojump_clock):
    # Both clusters start at 0 side by side on the one virtual clock, and are asked at the same
    # instant: the same pulls, the same counts.
    clusters = {}
    async with trio.open_nursery() as starting:
        for aggregate in (False, True):
            starting.start_soon(_idle_cluster, nursery, aggregate, clusters)
    await trio.sleep_until(200)
    (plain_lab, plain), (coasting_lab, coasting) = clusters[False], clusters[True]
    assert coasting.broker.hold_service.coasting == 5, "the four queues' pulls and the retry queue's coast"
    assert plain.broker.hold_service.coasting == 0, "the network declined: each pull answered and sent again"
    tables = [json.loads((await lab.call(running.address, admin.GET_BROKER_RUNTIME_INFO)).body)["table"]
              for lab, running in ((plain_lab, plain), (coasting_lab, coasting))]
    # getMissTps: over the last 10 s, 60 s and 600 s. The last 10 and 60 s are the idle queues'
    # pulls alone; the 600 s (all since boot) also hold the start, whose count is one pull more or
    # less with the order tasks run in at one instant (NSLAB_TEST_SEED), either way in either mode.
    plain_tps, coasting_tps = ([float(f) for f in table["getMissTps"].split()] for table in tables)
    assert plain_tps[:2] == coasting_tps[:2] and coasting_tps[1] > 0, (plain_tps, coasting_tps)
