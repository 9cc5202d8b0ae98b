"""The client roles and their remoting read as RocketMQ's and never know they are simulated
(issue 35): the simulator's aggregation of their idle calls lives in lab/sim/clients.py and
lab/sim/remoting.py, hooked on the roles' plain steps, and the roles neither import it nor name it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROLE_PACKAGES = ("lab/clients", "lab/remoting")
# What only the simulator's side may say: its package, its word for aggregated calls, its hooks on
# a simulated stream (and its word that one delivers everything: offsets not resent), and peeking at
# what a stream happens to offer.
SIMULATOR_ONLY = re.compile(r"lab\.sim\b|lab/sim/|coast|renew_peer_call|watch_peer|query_coaster"
                            r"|delivers_everything|(has|get)attr\([\w.]*stream")


def simulator_mentions(text: str) -> list[str]:
    return [match.group(0) for match in SIMULATOR_ONLY.finditer(text.lower())]


def test_the_pattern_finds_what_it_is_for():
    assert simulator_mentions("from lab.sim import remoting") == ["lab.sim"]
    assert simulator_mentions("self.channels.wake_coasting()  # a held pull") == ["coast"]
    assert simulator_mentions('check = getattr(channel.stream, "x", None)') == ["getattr(channel.stream"]
    assert simulator_mentions("table.delivers_everything(channel)") == ["delivers_everything"]
    assert simulator_mentions("a simulated run repeats") == []


def test_client_roles_do_not_know_the_simulator():
    found = {str(path.relative_to(ROOT)): simulator_mentions(path.read_text())
             for package in ROLE_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}
    assert {path: words for path, words in found.items() if words} == {}
