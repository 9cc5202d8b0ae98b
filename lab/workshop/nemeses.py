"""The seeded faults of the warm-ups' scenarios (Maelstrom's nemesis): a scenario file with ${...}
fields is filled by its exercise's function here with what the seed draws — which node, when, for
how long — and "summary" says it in one line (exercise 10's, 11's and 12's are beside their checks).
"""

from __future__ import annotations

import random

BROKERS = ("broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1")


def expiry_scan(seed: int) -> dict:
    """Exercise 5: which broker freezes (only the scan can drop it), and when; another is kept."""
    rng = random.Random(f"expiry-scan:{seed}")
    frozen = BROKERS[seed % len(BROKERS)]
    kept = rng.choice([b for b in BROKERS if b != frozen])
    at = rng.randint(35, 90)
    return {"frozen": frozen, "kept": kept, "at": f"{at}s", "listed_end": f"{at + 85}s",
            "summary": f"{frozen} frozen at t={at}s"}


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
