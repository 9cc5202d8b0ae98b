"""The seeded faults of the warm-ups' scenarios (Maelstrom's nemesis): a scenario file with ${...}
fields is filled by its exercise's function here with what the seed draws — which node, when, for
how long — and "summary" says it in one line (exercise 10's, 11's and 12's are beside their checks).
"""

from __future__ import annotations

import random

BROKERS = ("broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1")


def expiry_scan(seed: int) -> dict:
    """Exercise 5: which broker freezes (only the scan can drop it), and when; another is kept; and
    the NameServers' brokerChannelExpiredTime: 4.9.8's 120 s on half the seeds, 60 or 90 s on the
    others (the lab's knob), so a scan that ignores its expired_time keeps a silent broker too long."""
    rng = random.Random(f"expiry-scan:{seed}")
    frozen = BROKERS[seed % len(BROKERS)]
    kept = rng.choice([b for b in BROKERS if b != frozen])
    at = rng.randint(35, 90)
    expiry = 120 if seed % 2 else (60, 90)[seed // 2 % 2]
    # A second broker freezes a few seconds later: brokers register in step, so both fall silent
    # past the expiry by the same scan, and a scan that takes one per call keeps the other too long.
    second = rng.choice([b for b in BROKERS if b not in (frozen, kept)])
    second_at = at + rng.randint(0, 5)
    # a frozen broker's last registration may be 30 s before its freeze: kept until then, at least
    return {"frozen": frozen, "kept": kept, "at": f"{at}s", "expiry": f"{expiry}s",
            "listed_end": f"{at + expiry - 35}s", "within": f"{expiry + 15}s",
            "second": second, "second_at": f"{second_at}s",
            "summary": f"{frozen} frozen at t={at}s and {second} at t={second_at}s, expiry {expiry} s"}


def broker_crash(seed: int) -> dict:
    """Exercise 6: which master dies, when, and when it is restarted."""
    rng = random.Random(f"broker-crash:{seed}")
    killed = ("broker-a-0", "broker-b-0")[seed % 2]
    at = rng.randint(40, 80)
    restart_at = at + rng.randint(60, 100)
    return {"killed": killed, "at": f"{at}s", "restart_at": f"{restart_at}s", "recovered_at": f"{restart_at + 30}s",
            "summary": f"{killed} killed at t={at}s, restarted at t={restart_at}s"}


def shrink_the_heartbeat(seed: int) -> dict:
    """Exercise 9: which master's links to both NameServers slow to 10 KB/s, when, and when its topic
    table grows to 10,000 topics."""
    rng = random.Random(f"shrink-the-heartbeat:{seed}")
    grown = ("broker-a-0", "broker-b-0")[seed % 2]
    at = rng.randint(20, 50)
    grow_at = at + rng.randint(5, 20)
    return {"grown": grown, "at": f"{at}s", "grow_at": f"{grow_at}s",
            "summary": f"{grown}'s links slow to 10 KB/s at t={at}s, it grows to 10,000 topics at t={grow_at}s"}


def latency_fault_tolerance(seed: int) -> dict:
    """Exercise 8: the producer's ban steps (RocketMQ's defaults, or shorter bans for slow sends, so a
    function that ignores its parameters bans too long), which master is briefly slow and how slow (a
    send of ~0.6 s or ~1.2 s), when and for how long; then which master hangs, and when. The
    "recovered" window opens once the slow master's ban is over, so a right answer has given it its
    traffic back and an over-long ban has not."""
    rng = random.Random(f"latency-fault-tolerance:{seed}")
    slow = ("broker-a-0", "broker-b-0")[seed % 2]
    shorter = rng.random() < 0.5
    latency = rng.choice((300, 600))  # each way: a send waits for twice the latency
    # the ban of a ~0.6 s send (step 550 ms) and of a ~1.2 s one (step 1000 ms), in seconds
    ban = {300: 5, 600: 10}[latency] if shorter else {300: 30, 600: 60}[latency]
    # A ban starts at the first slow send and is renewed by the first one after it ends: an answer
    # that bans six times too long is still banning well into the window below.
    steps = ("latencyMax = [50, 100, 550, 1000, 2000, 3000, 15000]\n"
             "notAvailableDuration = [0, 0, 5000, 10000, 120000, 180000, 600000]") if shorter else ""
    slow_at = rng.randint(30, 60)
    heal_at = slow_at + rng.randint(3, 10)
    recovered_start = heal_at + ban + 5  # the last slow send's ban, with room for its own latency
    hang_at = recovered_start + 30
    hung = rng.choice(("broker-a-0", "broker-b-0"))
    return {"steps": steps, "slow": slow, "latency": f"{latency}ms", "slow_at": f"{slow_at}s",
            "heal_at": f"{heal_at}s", "recovered_start": f"{recovered_start}s", "hang_at": f"{hang_at}s",
            "hung": hung,
            "summary": f"{slow} {latency} ms slower each way from t={slow_at}s to t={heal_at}s "
                       f"({'shorter bans than the defaults' if shorter else 'the default bans'}: {ban} s), "
                       f"{hung} hangs at t={hang_at}s"}


def broker_graceful_shutdown(seed: int) -> dict:
    """Exercises 10 and 12's `broker-graceful-shutdown`: which master shuts down gracefully, when and
    for how long; and the other group's slave, shut down and back at times of its own (its name stays:
    its master is still there, and so are that master's routes)."""
    rng = random.Random(f"broker-graceful-shutdown:{seed}")
    group, other = (("a", "b"), ("b", "a"))[seed % 2]
    at = rng.randint(40, 90)
    restart_at = at + rng.randint(70, 110)
    slave_at = rng.randint(30, 150)
    slave_back = slave_at + rng.randint(40, 80)
    return {"stopped": f"broker-{group}-0", "name": f"broker-{group}", "at": f"{at}s", "restart_at": f"{restart_at}s",
            "after_poll": f"{at + 40}s", "slave": f"broker-{other}-1", "kept": f"broker-{other}-0",
            "slave_at": f"{slave_at}s", "slave_back": f"{slave_back}s",
            "summary": f"broker-{group}-0 shut down at t={at}s, back at t={restart_at}s; broker-{other}-1 shut "
                       f"down at t={slave_at}s, back at t={slave_back}s"}


def master_down(seed: int) -> dict:
    """Exercise 10's `master-down`: which master dies (its slave then serves the group's backlog),
    when, and when it comes back; the consumers stop 20 s before it dies, so there is a backlog."""
    rng = random.Random(f"master-down:{seed}")
    group = ("a", "b")[seed % 2]
    at = rng.randint(45, 90)
    restart_at = at + rng.randint(100, 130)
    return {"killed": f"broker-{group}-0", "slave": f"broker-{group}-1", "name": f"broker-{group}",
            "consumers_down": f"{at - 20}s", "consumers_back": f"{at + 10}s", "at": f"{at}s",
            "restart_at": f"{restart_at}s",
            "summary": f"broker-{group}-0 killed at t={at}s, restarted at t={restart_at}s (consumers down from "
                       f"t={at - 20}s to t={at + 10}s)"}
