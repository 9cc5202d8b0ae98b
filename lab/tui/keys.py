"""Which keys the footer names at a given width: every one when they fit (200 columns), else the
core of a lesson in order of need, always with `? all keys` first — help lists them all. Keys that
do nothing now (chaos in a replay, jump on a live lab) are left out, and a dialog shows its own."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    key: str  # as shown
    label: str
    ids: tuple[str, ...]  # binding ids (or actions) it stands for: shown if any is enabled
    rank: int  # lower is kept first when the width runs out


CATALOG = (
    Key("?", "all keys", ("help",), 0),
    Key("space", "pause", ("time.pause",), 1),
    Key("+-", "speed", ("time.faster", "time.slower"), 8),
    Key(".", "step", ("time.step",), 6),
    Key("j", "jump", ("time.jump",), 3),
    Key("k", "kill", ("chaos.kill",), 2),
    Key("f", "freeze", ("chaos.freeze",), 9),
    Key("u", "unfreeze", ("chaos.unfreeze",), 10),
    Key("r", "restart", ("chaos.restart",), 4),
    Key("s", "stop", ("chaos.stop",), 13),
    Key("p", "partition", ("chaos.partition",), 7),
    Key("i", "isolate", ("chaos.isolate",), 12),
    Key("h", "heal", ("chaos.heal",), 5),
    Key("t", "toxic", ("chaos.toxic",), 14),
    Key("n/N", "ns down/up", ("chaos.ns-down", "chaos.ns-up"), 11),
    Key("w/W", "perm", ("chaos.wipe-perm", "chaos.add-perm"), 15),
    Key("c", "client", ("chaos.new-client",), 16),
    Key("g", "topics", ("chaos.grow-topics",), 17),
    Key("1-4", "tabs", ("view.brokers",), 18),
    Key("/", "filter", ("view.filter",), 19),
    Key("^p", "palette", ("command_palette",), 20),
    Key("q", "quit", ("quit",), 0),
    # dialogs and help
    Key("esc/q", "close", ("help.close",), 0),
    Key("pgup/pgdn", "scroll", ("help.close",), 1),
    Key("enter", "cut", ("dialog.cut",), 0),
    Key("esc", "cancel", ("dialog.cancel",), 0),
)


def width_of(keys: list[Key], gap: int) -> int:
    return sum(len(k.key) + 1 + len(k.label) for k in keys) + gap * max(0, len(keys) - 1) + 1


def footer_keys(enabled: set[str], width: int) -> tuple[list[Key], int]:
    """The keys to show, in the catalog's order, and the gap between them (2, or 1 when tight)."""
    offered = [k for k in CATALOG if enabled.intersection(k.ids)]
    for gap in (2, 1):
        if width_of(offered, gap) <= width:
            return offered, gap
    chosen: list[Key] = []
    for key in sorted(offered, key=lambda k: k.rank):
        if width_of(chosen + [key], 1) <= width:
            chosen.append(key)
    return [k for k in offered if k in chosen], 1
