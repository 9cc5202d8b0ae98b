"""The exercises: what each one runs, what it measures or swaps in, and its unit tests.

A watching exercise asks the learner to predict a number, then measures it from the run's event
log (measure.py). A building exercise names the lab attribute the learner's file replaces
(`target`: a function, or a class the lab builds by that name), the unit tests it must pass
(warmups.py for the short ones, a module per stateful one), and the scenarios, each run over
`seeds`, that show its behaviour in the whole cluster.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from lab.control import scenarios

from . import nemeses, register_everywhere, route_manager, selector, warmups
from .measure import disagreement_seconds, failed_sends_while_down, freeze_minus_kill, silence_before_removal

HERE = Path(__file__).resolve().parent
EXERCISES_DIR = HERE / "exercises"
SOLUTIONS_DIR = HERE / "solutions"


@dataclass(frozen=True)
class Prediction:
    question: str  # what to predict, in one line
    unit: str
    tolerance: float
    measure: Callable[[list[dict]], float | None]  # from the run's event records


@dataclass(frozen=True)
class Exercise:
    number: int
    slug: str
    title: str
    scenario: str  # a bundled scenario's name, or a file in the exercise's directory
    predict: Prediction | None = None  # watching exercises
    target: str | None = None  # building exercises: "module:name" the learner's file replaces
    tests: list[Callable[[Callable], None]] = field(default_factory=list)
    also: tuple[str, ...] = ()  # building: more scenarios the learner's code must keep valid
    seeds: tuple[int, ...] = (1, 2, 3)  # building: every scenario runs on each (simulated, deterministic)
    adapt: Callable | None = None  # (learner's member, LearnerErrors) -> what is swapped in; default: itself
    stateful: bool = False  # a class with state, not a warm-up function
    # A scenario file with ${...} fields is a template: nemesis(seed) fills them with the fault the
    # seed draws (which node, what, when, how long; "summary" says it in one line).
    nemesis: Callable[[int], dict] | None = None
    # The `also` scenarios' own (by file stem), for those that are templates too.
    also_nemeses: dict[str, Callable[[int], dict]] = field(default_factory=dict)
    # More verdicts on a run of the scenario of that name: () -> (name, ok | None, detail), made
    # fresh per run by judges(nemesis's draw or None).
    judges: Callable[[str, dict | None], tuple] | None = None

    @property
    def name(self) -> str:
        return f"{self.number:02d}-{self.slug}"

    @property
    def kind(self) -> str:
        return "build" if self.target else "watch"

    @property
    def function(self) -> str | None:
        """The name the learner's file defines: a function, or a class (stateful exercises)."""
        return self.target.split(":")[1] if self.target else None

    @property
    def dir(self) -> Path:
        return EXERCISES_DIR / self.name

    def text(self, part: str) -> str:
        path = self.dir / f"{part}.md"
        return path.read_text() if path.exists() else ""

    @property
    def scenario_path(self) -> Path:
        return self._find(self.scenario)

    @property
    def scenario_paths(self) -> list[Path]:
        return [self._find(name) for name in (self.scenario, *self.also)]

    def nemesis_of(self, path: Path) -> Callable[[int], dict] | None:
        return self.nemesis if path == self.scenario_path else self.also_nemeses.get(path.stem)

    def _find(self, name: str) -> Path:
        local = self.dir / name
        return local if local.exists() else scenarios.find(name)

    def seeded(self, path: Path, seed: int) -> tuple[str | None, str | None, tuple]:
        """(scenario text with the seed's fault, what that fault is, the run's extra verdicts)."""
        text = path.read_text()
        drawn = None
        if "${" in text:
            nemesis = self.nemesis_of(path)
            if nemesis is None:
                raise ValueError(f"{path} is a template but exercise {self.number} draws no fault for it (nemesis)")
            drawn = nemesis(seed)
            text = string.Template(text).substitute(drawn)
        judges = self.judges(path.stem, drawn) if self.judges else ()
        return (text if drawn is not None else None), (drawn or {}).get("summary"), judges

    @property
    def starter(self) -> Path | None:
        return self.dir / "starter.py" if self.target else None

    @property
    def solution(self) -> Path:
        return SOLUTIONS_DIR / (f"{self.name}.py" if self.target else f"{self.name}.txt")


TEN = tuple(range(1, 11))  # a seeded scenario's seeds: each draws its own fault

COURSE = [
    Exercise(1, "registration-and-expiry", "Registration and expiry: the 30 / 10 / 120 s timers",
             "registration-and-expiry.toml", predict=Prediction(
                 # ±5 s: the run measures 120; 130 (expiry + a whole scan, the scan-only idea) must fail.
                 "How many seconds after a frozen broker's last heartbeat does the first NameServer drop it?",
                 "s", 5.0, silence_before_removal)),
    Exercise(2, "kill-versus-freeze", "Kill versus freeze a broker, and time the difference",
             "kill-versus-freeze.toml", predict=Prediction(
                 "How many seconds longer does the frozen broker stay listed than the killed one?",
                 "s", 15.0, freeze_minus_kill)),
    Exercise(3, "every-nameserver-down", "Every NameServer down: running clients survive, new ones get no route",
             "all-nameservers-down", predict=Prediction(
                 "How many sends of the running producers fail while every NameServer is down?", "sends", 0.0, failed_sends_while_down)),
    Exercise(4, "partition-and-divergence", "Partition and divergence: two NameServers, two truths",
             "nameserver-divergence", predict=Prediction(
                 "For how many seconds does ns-0 go without broker-a-0 while ns-1 still lists it?",
                 "s", 15.0, disagreement_seconds)),
    Exercise(5, "expiry-scan", "Warm-up: the expiry scan's decision", "expiry-scan.toml",
             target="nameserver.routes:expired_brokers", seeds=TEN, nemesis=nemeses.expiry_scan,
             tests=[warmups.test_expiry_leaves_the_table_alone, warmups.test_expiry_only_the_silent,
                    warmups.test_expiry_boundary, warmups.test_expiry_every_silent_one_at_once,
                    warmups.test_expiry_is_a_parameter]),
    Exercise(6, "queue-choice", "Warm-up: producer queue choice that avoids a failed broker", "broker-crash.toml",
             target="lab.clients.selection:select_one_message_queue", seeds=TEN, nemesis=nemeses.broker_crash,
             tests=[warmups.test_queue_choice_avoids_failed, warmups.test_queue_choice_round_robin,
                    warmups.test_queue_choice_no_alternative]),
    Exercise(7, "nameserver-failover", "Warm-up: the order of NameServer failover",
             "../11-nameserver-selector/nameserver-failover.toml",
             target="lab.clients.namesrv:failover_order", seeds=TEN, nemesis=selector.nemesis,
             tests=[warmups.test_failover_tries_every_one, warmups.test_failover_starts_after_the_index,
                    warmups.test_failover_negative_index]),
    Exercise(8, "latency-fault-tolerance", "Warm-up: latency fault tolerance", "latency-fault-tolerance.toml",
             target="lab.clients.selection:compute_not_available_duration", seeds=TEN,
             nemesis=nemeses.latency_fault_tolerance, tests=[warmups.test_ban_steps, warmups.test_ban_uses_its_parameters]),
    Exercise(9, "shrink-the-heartbeat", "Warm-up: shrink a 10,000-topic heartbeat", "shrink-the-heartbeat.toml",
             target="nameserver.bodies:encode_compressed_register_body", seeds=TEN,
             nemesis=nemeses.shrink_the_heartbeat,
             tests=[warmups.test_register_body_round_trips, warmups.test_register_body_is_small]),
    Exercise(10, "route-info-manager", "Build the NameServer's RouteInfoManager: five tables, four changes",
             "route-info-manager.toml", target="nameserver.processor:RouteInfoManager",
             tests=route_manager.TESTS, also=("broker-graceful-shutdown.toml", "master-down.toml"),
             adapt=route_manager.adapt, stateful=True, seeds=TEN, nemesis=route_manager.nemesis,
             also_nemeses={"broker-graceful-shutdown": nemeses.broker_graceful_shutdown,
                           "master-down": nemeses.master_down}),
    Exercise(11, "nameserver-selector", "Build a client's NameServer choice and failover",
             "nameserver-failover.toml", target="lab.clients.instance:NamesrvSelector",
             tests=selector.TESTS, stateful=True, seeds=TEN, nemesis=selector.nemesis),
    Exercise(12, "register-everywhere", "Build a broker's registration with every NameServer",
             "register-everywhere.toml", target="lab.broker.server:BrokerOuterAPI",
             tests=register_everywhere.TESTS, also=("../10-route-info-manager/broker-graceful-shutdown.toml",),
             adapt=register_everywhere.adapt, stateful=True, seeds=TEN, nemesis=register_everywhere.nemesis,
             also_nemeses={"broker-graceful-shutdown": nemeses.broker_graceful_shutdown},
             judges=register_everywhere.judges),
]


def get(number: int) -> Exercise:
    for exercise in COURSE:
        if exercise.number == number:
            return exercise
    raise LookupError(f"no exercise {number}: there are 1 to {len(COURSE)} (`nslab workshop list`)")
