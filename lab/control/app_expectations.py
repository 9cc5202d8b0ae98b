"""Expectations about a real application under chaos (issue 39), judged from its `app.*` records.

An app run by `nslab run NAME --app CMD` (or a scenario's `[[app]]` table) reaches the lab through
relays that record what it did on the wire (lab/apps/wire_watch.py; docs/apps.md): `app.start`,
`app.exit`, `app.conn`, `app.request`, `app.route`, `app.heartbeat`, `app.send`, `app.deliver`,
`app.commit`. The checks here read those records, and the lab's `chaos.fault` records for the fault
windows; docs/apps.md is their reference for people.

Every type takes `app = "NAME"` (or a list of names; default: every app of the run) and, like every
other expectation, is "could not be judged" when it saw nothing to judge — never a pass.

- app_acked_consumed  every message acknowledged to the app's producers is delivered to its
                      consumer group(s) by the end (loss)
- app_duplicates      at most `max` deliveries beyond a message's first, per consumer group (phase?)
- app_send_rate       acknowledged sends per whole second never below `min`: in the phase, or
                      outside the fault windows (each extended by `settle`)
- app_recovers        each time the run comes out of its fault windows, within `within` the app has
                      `min` sends acknowledged inside one second
- app_avoids_killed_broker  within `within` of a broker's kill (or stop) the app's route drops it,
                      and the app sends nothing to it from then until it restarts
- app_keeps_running   the app never exits before the lab stops it; when stopped, it exits 0 or dies
                      of the lab's SIGTERM within its grace
- app_history         the app's own JSON-lines history agrees with the wire: nothing it says was sent
                      or received went unacknowledged or undelivered, no acknowledged send it says failed
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from pathlib import Path

from chaos.checks import Check

TYPES = ("app_acked_consumed", "app_duplicates", "app_send_rate", "app_recovers", "app_avoids_killed_broker",
         "app_keeps_running", "app_history")

SEND_CODES = {10, 310, 320}  # SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE
EXAMPLES = 3  # how many missing messages a failure lists


# --- fault windows -----------------------------------------------------------------------------

class FaultWindows:
    """When faults were on, from the run's `chaos.fault` records.

    A fault opens a window that its own end closes: kill, stop and freeze of a node end with its
    restart (unfreeze); ns-down with ns-up (`all` stands for every NameServer); partition, isolate
    and toxic with heal, a toxic on one request code given `for` also by itself; wipe-perm with
    add-perm. A restart of a running node is a window of no length. new-client and grow-topics open
    none. A fault never ended lasts to the end of the run. The windows' union is what the app
    expectations call "the fault windows"; its ends are when the run came out of every fault."""

    def __init__(self, nameservers: list[str] = ()):
        self.nameservers = list(nameservers)
        self.open: dict[tuple, tuple[float, str]] = {}  # key -> (start, label)
        self.timed: list[tuple[float, tuple]] = []  # (end, key): toxics with `for`
        self.windows: list[tuple[float, float | None, str]] = []  # every fault's own window
        self.union: list[list] = []  # [start, end or None]
        self.enders: dict[float, list[str]] = {}  # a time -> the faults' ends then, as words
        self._links = 0

    # the record stream

    def observe(self, r: dict) -> None:
        self.advance(r["t"])
        if r["kind"] == "chaos.fault":
            self._fault(r)

    def advance(self, t: float) -> None:
        """Close the timed windows that ended by t, in the order they ended."""
        while self.timed and min(self.timed)[0] <= t:
            end, key = min(self.timed)
            self.timed.remove((end, key))
            if key in self.open:
                self._close(key, end, f"{self.open[key][1]} running out")

    def _fault(self, r: dict) -> None:
        # to the tenth: a step at 30 s is applied at t=30.0008 (or 30.01 on a busy machine) and reads "t=30s"
        t, verb, nodes = round(r["t"], 1), r.get("verb"), list(r.get("nodes", []))
        label = _describe(r)
        if verb in ("kill", "stop", "freeze"):
            for node in nodes:
                self._open(("node", node), t, label)
        elif verb == "ns-down":
            for node in self._expand(nodes):
                self._open(("node", node), t, label)
        elif verb == "restart":
            for node in nodes:
                if ("node", node) not in self.open:  # a running node killed and started at once
                    self._open(("node", node), t, label)
                self._close(("node", node), t, label)
        elif verb in ("unfreeze", "ns-up"):
            for node in self._expand(nodes) if verb == "ns-up" else nodes:
                self._close(("node", node), t, label)
        elif verb in ("partition", "isolate", "toxic"):
            self._links += 1
            key = ("link", self._links)
            self._open(key, t, label)
            if r.get("for_s") is not None:
                self.timed.append((t + float(r["for_s"]), key))
        elif verb == "heal":
            for key in [k for k in self.open if k[0] == "link"]:
                self._close(key, t, label)
            self.timed = [(end, key) for end, key in self.timed if key in self.open]
        elif verb == "wipe-perm":
            for node in nodes:
                self._open(("perm", node), t, label)
        elif verb == "add-perm":
            for node in nodes:
                self._close(("perm", node), t, label)

    def _expand(self, nodes: list[str]) -> list[str]:
        if "all" in nodes and self.nameservers:
            return self.nameservers
        return nodes

    def _open(self, key: tuple, t: float, label: str) -> None:
        if key in self.open:
            return
        if not self.open:
            self.union.append([t, None])
        self.open[key] = (t, label)
        self.windows.append((t, None, label))

    def _close(self, key: tuple, t: float, by: str) -> None:
        if key not in self.open:
            return
        if by not in self.enders.setdefault(t, []):
            self.enders[t].append(by)
        start, label = self.open.pop(key)
        i = max(i for i, w in enumerate(self.windows) if w[0] == start and w[2] == label and w[1] is None)
        self.windows[i] = (start, t, label)
        if not self.open:
            self.union[-1][1] = t

    # questions

    def ends(self) -> list[float]:
        """When the run came out of every fault, in order."""
        return [end for _, end in self.union if end is not None]

    def faulty(self, begin: float, end: float, settle: float = 0.0) -> bool:
        """Whether [begin, end) meets a fault window extended by `settle`."""
        return any(begin < (e if e is not None else math.inf) + settle and s < end
                   for s, e in self.union) or any(s == e and begin <= s < end for s, e in self.union)

    def at(self, t: float) -> list[str]:
        """The faults on at t, each with when it began."""
        on = [f"{label} (since t={s:g}s)" for s, e, label in self.windows if s <= t and (e is None or t < e)]
        return list(dict.fromkeys(on))  # ns-down all: one window a NameServer, one fault

    def summary(self, settle: float = 0.0) -> str:
        if not self.union:
            return "no fault"
        spans = ", ".join(f"{s:g}s-{'end' if e is None else f'{e:g}s'}" for s, e in self.union)
        return f"fault windows {spans}" + (f" (+{settle:g}s settle)" if settle else "")

    def ended_by(self, end: float) -> str:
        """What ended the faults at `end`."""
        return ", ".join(self.enders.get(end, [])) or "a fault's end"


def _describe(r: dict) -> str:
    if r.get("groups"):
        sep = " -> " if r.get("one_way") else " / "
        return "partition " + sep.join(",".join(g) for g in r["groups"])
    words = [r.get("verb", "?"), *r.get("nodes", [])]
    if r.get("toxic"):
        words.append(str(r["toxic"]))
    return " ".join(words)


# --- the checks ----------------------------------------------------------------------------------

class AppCheck(Check):
    """What every app expectation shares: which apps it judges, the fault windows, when the
    timeline ended (`run.drain`: the lab stops the apps then)."""

    def __init__(self, name: str, *, apps: list[str] | None = None, nameservers: list[str] = (),
                 broker_groups: dict[str, str] | None = None, timeline_end: float = math.inf):
        super().__init__(name)
        self.apps = apps
        self.faults = FaultWindows(nameservers)
        self.broker_groups = broker_groups or {}
        self.seen: set[str] = set()  # apps with any record
        self.timeline_end = timeline_end  # the scenario's duration: the lab stops its apps then

    @property
    def who(self) -> str:
        if self.apps:
            return ", ".join(self.apps)
        return ", ".join(sorted(self.seen)) or "the app"

    def mine(self, r: dict) -> bool:
        return r["kind"].startswith("app.") and (self.apps is None or r["node"] in self.apps)

    def group(self, broker: str) -> str:
        """A broker node's group (broker-a-1 -> broker-a): a slave serves its master's offsets."""
        if broker in self.broker_groups:
            return self.broker_groups[broker]
        name, _, index = broker.rpartition("-")
        return name if name and index.isdigit() else broker

    def observe(self, r: dict) -> None:
        self.faults.observe(r)
        if r["kind"] == "run.drain":  # a run ended early (its user quit) drains then
            self.timeline_end = min(self.timeline_end, r["t"])
        if self.mine(r):
            self.seen.add(r["node"])
            self.observe_app(r)

    def observe_app(self, r: dict) -> None:
        pass

    def tick(self, now: float) -> None:
        self.faults.advance(now)

    def end(self, now: float) -> float:
        """When the timeline ended (or now, if sooner): the lab sends its apps SIGTERM then."""
        return min(self.timeline_end, now)

    def nothing(self, what: str, now: float) -> None:
        if not self.seen:
            self.unjudged(f"no app ran{' named ' + self.who if self.apps else ''} (no app.* record)", now)
        self.unjudged(what, now)


class HistoryPath:
    """Where an app's history file is: `history` / `file` as given when absolute, else relative to
    the app's folder — the directory holding its stdout and stderr, NSLAB_APP_DIR and `{appdir}`
    to the app — which its first `app.start` record names (`dir`; older records: their stdout's)."""

    def __init__(self, given: str):
        self.given = Path(given)
        self.folder: Path | None = None

    def see(self, r: dict) -> None:
        if r["kind"] == "app.start" and self.folder is None:
            folder = r.get("dir") or (str(Path(r["stdout"]).parent) if r.get("stdout") else None)
            self.folder = Path(folder) if folder else None

    @property
    def path(self) -> Path | None:
        """The file, None while a relative path has no app folder to go with."""
        if self.given.is_absolute():
            return self.given
        return self.folder / self.given if self.folder is not None else None

    def fresh(self, began: float) -> bool:
        """Whether the file exists and was written during the run (not before `began`): a file left
        in the app's folder by an earlier run (a --run-dir or --events used again) is not this run's."""
        path = self.path
        return path is not None and path.exists() and os.stat(path).st_mtime >= began - 1

    def missing(self) -> str:
        if self.path is None:
            return f"no history file: {self.given} is relative to the app's folder, and no app.start named it"
        return f"no history file {self.path}" + ("" if self.given.is_absolute() else
                                                  f" ({self.given} in the app's folder {self.folder})")

    def __str__(self) -> str:
        return str(self.path or self.given)


def _stored(r: dict) -> list[tuple]:
    """(offset, UNIQ_KEY) of each message an acknowledged app.send stored: a batch's are at offset,
    offset + 1, ... in the order of its uniq_keys."""
    keys, offset = r.get("uniq_keys"), r.get("offset")
    if not keys:
        return [(offset, r.get("uniq_key"))]
    return [(offset + i if offset is not None else None, key) for i, key in enumerate(keys)]


def _key_text(key: tuple) -> str:
    broker, topic, queue, offset = key
    return f"{topic}@{broker}:{queue}#{offset}"


class AppAckedConsumed(AppCheck):
    """Loss: every message acknowledged to the app's producers (an `app.send` with result 0) is
    delivered to the app's consumer group by the end. A message is known by (broker group, topic,
    queue, offset), so one served by a slave counts, or by its UNIQ_KEY. Without `group`, each of
    the app's consumer groups that got any message of the topic must get it (the only consumer
    group, if none did).

    With `history` (the app's JSON-lines history, as app_history reads it; relative: in the app's
    folder, where `{appdir}` / NSLAB_APP_DIR put it), when the app wrote that file during the run,
    consumed means processed: a `receive` line with the message's UNIQ_KEY (or topic, queue and
    offset). The wire cannot see an app that commits an offset before it processes
    the message and then dies; its history can. An app that writes no history is judged on the wire."""

    def __init__(self, name, *, group: str | None = None, history: str | None = None, **kw):
        super().__init__(name, **kw)
        self.only_group = group
        self.history = HistoryPath(history) if history else None
        self.began = time.time()
        self.committed: dict[tuple, int] = {}  # (group, broker group, topic, queue) -> highest commit
        self.acked: dict[tuple, tuple[float, str | None]] = {}  # key -> (t, uniq_key)
        self.groups: set[str] = set()
        self.delivered: dict[str, set] = {}  # group -> keys
        self.delivered_uniq: dict[str, set] = {}  # group -> UNIQ_KEYs
        self.topics_of: dict[str, set] = {}  # group -> topics delivered to it

    def observe_app(self, r: dict) -> None:
        kind = r["kind"]
        if self.history is not None:
            self.history.see(r)
        if kind == "app.send" and r.get("result") == 0:
            for offset, uniq_key in _stored(r):
                key = (self.group(r["peer"]), r["topic"], r.get("queue"), offset)
                self.acked.setdefault(key if offset is not None else ("?", r["topic"], None, uniq_key), (r["t"], uniq_key))
        elif kind == "app.heartbeat":
            self.groups.update(r.get("consumer_groups") or [])
        elif kind in ("app.deliver", "app.commit"):
            group = r["group"]
            self.groups.add(group)
            if kind == "app.commit" and r.get("offset") is not None:
                at = (group, self.group(r["peer"]), r["topic"], r["queue"])
                self.committed[at] = max(self.committed.get(at, -1), r["offset"])
            if kind == "app.deliver":
                self.topics_of.setdefault(group, set()).add(r["topic"])
                keys = self.delivered.setdefault(group, set())
                uniq = self.delivered_uniq.setdefault(group, set())
                for offset, uniq_key in r.get("messages", []):
                    keys.add((self.group(r["peer"]), r["topic"], r["queue"], offset))
                    if uniq_key:
                        uniq.add(uniq_key)

    def _must_get(self, topic: str) -> list[str]:
        if self.only_group is not None:
            return [self.only_group]
        groups = sorted(g for g in self.groups if topic in self.topics_of.get(g, ()))
        return groups or sorted(self.groups)

    def finish(self, now: float) -> None:
        if self.decided:
            return
        if not self.acked:
            return self.nothing(f"no send was acknowledged to {self.who}", now)
        if self.only_group is None and not self.groups:
            return self.unjudged(f"{self.who} has no consumer group (no heartbeat with one, no delivery)", now)
        processed = self._processed()
        lost: dict[str, list] = {}
        for key, (t, uniq_key) in self.acked.items():
            for group in self._must_get(key[1]):
                if processed is not None:
                    if (uniq_key not in processed) if uniq_key else (key[1:] not in processed):
                        lost.setdefault(group, []).append((key, t, uniq_key))
                elif key not in self.delivered.get(group, ()) and uniq_key not in self.delivered_uniq.get(group, ()):
                    lost.setdefault(group, []).append((key, t, uniq_key))
        if lost:
            group, missing = min(lost.items(), key=lambda item: -len(item[1]))
            examples = "; ".join(f"{_key_text(k)} acked at t={t:.1f}s" + (f" (UNIQ_KEY {u})" if u else "")
                                 for k, t, u in sorted(missing, key=lambda m: m[1])[:EXAMPLES])
            others = f" (and groups {', '.join(g for g in sorted(lost) if g != group)})" if len(lost) > 1 else ""
            if processed is None:
                self.fail(f"{len(missing)} of {len(self.acked)} messages acknowledged to {self.who} never delivered "
                          f"to group {group}{others}, e.g. {examples}", now)
                return
            delivered = [m for m in missing if m[0] in self.delivered.get(group, ()) or m[2] in self.delivered_uniq.get(group, ())]
            committed = [m for m in delivered if self.committed.get((group, *m[0][:3]), -1) > (m[0][3] if m[0][3] is not None else 1 << 62)]
            self.fail(f"{len(missing)} of {len(self.acked)} messages acknowledged to {self.who} never processed by "
                      f"group {group}{others} (by its history {self.history}), e.g. {examples}; "
                      f"{len(delivered)} of them were delivered to it and {len(committed)} had their offsets "
                      f"committed" + (": committed before processing?" if committed else ""), now)
        else:
            groups = sorted({g for key in self.acked for g in self._must_get(key[1])})
            how = "delivered to" if processed is None else f"processed (by its history {self.history}) by"
            self.succeed(f"all {len(self.acked)} messages acknowledged to {self.who} {how} {', '.join(groups)}", now)

    def _processed(self) -> set | None:
        """UNIQ_KEYs and (topic, queue, offset)s of the history's receive lines, when the app wrote
        one in this run; else None."""
        if self.history is None or not self.history.fresh(self.began):
            return None
        processed = set()
        with open(self.history.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    op = json.loads(line)
                    if op.get("op") != "receive" or not op.get("ok"):
                        continue
                except (ValueError, AttributeError):
                    continue
                if op.get("uniq_key"):
                    processed.add(op["uniq_key"])
                if op.get("offset") is not None:
                    processed.add((op.get("topic"), op.get("queue"), op.get("offset")))
        return processed


class AppDuplicates(AppCheck):
    """Duplicates: deliveries of a message beyond its first, per consumer group, at most `max` in
    the phase (a delivery counts where it falls; the first may be earlier). Decided when the phase
    ends."""

    def __init__(self, name, *, maximum: int = 0, start: float = 0.0, end: float = math.inf, **kw):
        super().__init__(name, **kw)
        self.maximum, self.start, self.stop = maximum, start, end
        self.seen_keys: dict[str, Counter] = {}  # group -> key -> deliveries
        self.extra: Counter = Counter()  # group -> deliveries beyond the first, in the phase
        self.first_extra: dict[str, tuple] = {}  # group -> (key, t) of its first duplicate
        self.delivered = 0

    @property
    def during(self) -> str:
        end = "the end" if self.stop == math.inf else f"{self.stop:g}s"
        return f"between {self.start:g}s and {end}"

    def observe_app(self, r: dict) -> None:
        if r["kind"] != "app.deliver":
            return
        counts = self.seen_keys.setdefault(r["group"], Counter())
        inside = self.start <= r["t"] <= self.stop
        for offset, _ in r.get("messages", []):
            key = (self.group(r["peer"]), r["topic"], r["queue"], offset)
            counts[key] += 1
            if not inside:
                continue
            self.delivered += 1
            if counts[key] > 1:
                self.extra[r["group"]] += 1
                self.first_extra.setdefault(r["group"], (key, r["t"], counts[key]))
                if self.extra[r["group"]] > self.maximum:
                    first_key, first_t, _ = self.first_extra[r["group"]]
                    self.fail(f"group {r['group']} of {r['node']} got {self.extra[r['group']]} deliveries beyond a "
                              f"message's first {self.during} (max {self.maximum}): {_key_text(key)} for the "
                              f"{_nth(counts[key])} time at t={r['t']:.1f}s; the first duplicate "
                              f"{_key_text(first_key)} at t={first_t:.1f}s", r["t"])

    def tick(self, now: float) -> None:
        super().tick(now)
        if now > self.stop:
            self.finish(now)

    def finish(self, now: float) -> None:
        if self.decided:
            return
        if not self.delivered:
            return self.nothing(f"no message was delivered to {self.who} {self.during}", now)
        worst = max(self.extra.values(), default=0)
        self.succeed(f"{sum(self.extra.values())} of {self.delivered} deliveries to {self.who} {self.during} were "
                     f"a message's second or later (max {self.maximum} a group, the most {worst})", now)


def _nth(n: int) -> str:
    return {2: "2nd", 3: "3rd"}.get(n, f"{n}th")


class _AckTimes(AppCheck):
    """The times of the app's acknowledged sends, and whether it sent at all."""

    def __init__(self, name, **kw):
        super().__init__(name, **kw)
        self.acks: list[float] = []
        self.sends = 0
        self.failed = 0

    def observe_app(self, r: dict) -> None:
        if r["kind"] == "app.send":
            self.sends += 1
            if r.get("result") == 0:
                self.acks.append(r["t"])
            else:
                self.failed += 1

    def _judgeable(self, now: float) -> bool:
        """At the end: whether there is a verdict left to give — not given yet, and the app sent
        (an app that sent nothing leaves the check with nothing to judge)."""
        if self.decided:
            return False
        self.faults.advance(now)
        if not self.sends:
            self.nothing(f"{self.who} sent nothing", now)
            return False
        return True

    def count(self, begin: float, end: float) -> int:
        return sum(begin <= t < end for t in self.acks)


class AppSendRate(_AckTimes):
    """Availability: the app's acknowledged sends in every whole second [k, k+1) at least `min`.
    With a phase, every whole second of it from the app's first acknowledged send is judged (the
    floor must hold through the faults in it: every NameServer down, say); without one, every whole
    second from the app's first acknowledged send to the end of the timeline outside the fault
    windows, each extended by `settle`. Seconds after the app exited count, with nothing."""

    def __init__(self, name, *, minimum: float, settle: float, start: float = 0.0, end: float | None = None,
                 phased: bool = False, **kw):
        super().__init__(name, **kw)
        self.minimum, self.settle, self.start, self.stop, self.phased = minimum, settle, start, end, phased

    @property
    def where(self) -> str:
        if self.phased:
            return f"between {self.start:g}s and {self.stop:g}s"
        return f"outside the {self.faults.summary(self.settle)}"

    def tick(self, now: float) -> None:
        super().tick(now)
        if self.phased and now > self.stop + 1:
            self.finish(now)

    def finish(self, now: float) -> None:
        if not self._judgeable(now):
            return
        if not self.acks:
            self.fail(f"none of {self.who}'s {self.sends} sends was acknowledged", now)
            return
        begin = max(self.start, min(self.acks))
        end = min(self.stop if self.stop is not None else math.inf, self.end(now))
        seconds = [k for k in range(math.ceil(begin), math.floor(end))
                   if self.phased or not self.faults.faulty(k, k + 1, self.settle)]
        if not seconds:
            self.unjudged(f"no whole second {self.where} from {self.who}'s first acknowledged send "
                          f"(t={min(self.acks):.1f}s) to t={round(end, 1):g}s", now)
            return
        counts = Counter(math.floor(t) for t in self.acks)
        low = [k for k in seconds if counts[k] < self.minimum]
        if low:
            first = low[0]
            faults = self.faults.at(first)
            self.fail(f"{self.who} had {counts[first]} sends acknowledged in the second from t={first}s "
                      f"(min {self.minimum:g}/s); {len(low)} of {len(seconds)} seconds judged {self.where} "
                      f"were below" + (f"; then on: {', '.join(faults)}" if faults else ""), now)
        else:
            lowest = min(counts[k] for k in seconds)
            self.succeed(f"{self.who} had at least {lowest} sends acknowledged in each of {len(seconds)} seconds "
                         f"judged {self.where} (min {self.minimum:g}/s)", now)


class AppRecovers(_AckTimes):
    """Recovery: each time the run comes out of its fault windows, within `within` the app has
    `min` sends acknowledged inside one second (one second ending at an ack, from the fault's end)."""

    def __init__(self, name, *, minimum: float, within: float, **kw):
        super().__init__(name, **kw)
        self.minimum, self.within = minimum, within
        self.judged: dict[float, float | None] = {}  # fault end -> recovery time (None: not judged)

    def _recovered(self, end: float) -> float | None:
        """The first ack by end + within that closes a second (from `end` on) with `min` acks."""
        after = [t for t in self.acks if end <= t <= end + self.within]
        first = 0
        for i, t in enumerate(after):
            while after[first] <= t - 1:
                first += 1
            if i - first + 1 >= self.minimum:
                return t
        return None

    def _judge(self, now: float, final: bool) -> None:
        for end in self.faults.ends():
            if end in self.judged or end > self.end(now):
                continue
            took = self._recovered(end)
            if took is not None:
                self.judged[end] = took - end
            elif now > end + self.within + 1 or (final and end + self.within <= self.end(now)):
                self.judged[end] = None
                self.fail(f"{self.who} had not {self.minimum:g} sends acknowledged within a second by "
                          f"{self.within:g}s after {self.faults.ended_by(end)} ended the faults at t={end:g}s "
                          f"({self._since(end)})", now)

    def _since(self, end: float) -> str:
        after = [t for t in self.acks if t >= end]
        return f"its first ack after it at t={after[0]:.1f}s" if after else "no ack after it"

    def tick(self, now: float) -> None:
        super().tick(now)
        if self.sends:
            self._judge(now, final=False)

    def finish(self, now: float) -> None:
        if not self._judgeable(now):
            return
        self._judge(now, final=True)
        if self.decided:
            return
        recovered = {end: took for end, took in self.judged.items() if took is not None}
        if not recovered:
            ends = [e for e in self.faults.ends() if e <= self.end(now)]
            self.unjudged(f"the timeline ended {self.end(now) - ends[-1]:.1f}s after the faults ended at "
                          f"t={ends[-1]:g}s, before {self.within:g}s" if ends
                          else "no fault ended before the timeline did", now)
            return
        self.succeed(f"{self.who} was back to {self.minimum:g} acks/s within "
                     + ", ".join(f"{took:.1f}s of t={end:g}s" for end, took in sorted(recovered.items()))
                     + f" (within {self.within:g}s)", now)


class AppAvoidsKilledBroker(AppCheck):
    """After a broker is killed (or stopped) at t, within `within` — the route poll interval the app
    claims, plus a few seconds — the app has fetched a route that no longer lists it, for every
    topic it had sent to that broker, and from then until the broker restarts it sends nothing to
    it.

    Why the route: a send to a dead broker never reaches the lab's relays — the connection is
    refused (or closed before a frame passes) — so the wire shows what the app learnt (its route
    replies, `app.route`) better than what it tried. Any send to the broker the relays do see
    after that (an `app.send`, or a SEND_MESSAGE `app.request`) fails it too. A kill is judged when
    the app had sent to that broker before it and the broker stayed down past t + within (or the
    app's route dropped it sooner)."""

    def __init__(self, name, *, within: float, brokers: set[str], **kw):
        super().__init__(name, **kw)
        self.within, self.brokers = within, brokers
        self.topics_on: dict[str, set] = {}  # broker -> topics the app sent to it
        self.kills: list[dict] = []
        self.running: set[str] = set()  # apps running now
        self.exited_at: float | None = None  # when the last running app exited

    def observe(self, r: dict) -> None:
        if r["kind"] == "chaos.fault" and r.get("verb") in ("kill", "stop", "restart"):
            t = round(r["t"], 1)
            for node in r.get("nodes", []):
                if node not in self.brokers:
                    continue
                for kill in self.kills:
                    if kill["broker"] == node and kill["until"] is None:
                        kill["until"] = t
                if r["verb"] != "restart":
                    topics = set(self.topics_on.get(node, ()))
                    self.kills.append({"broker": node, "t": t, "until": None, "topics": topics,
                                       "unlearnt": set(topics), "learnt": None, "sends": 0, "last": {}})
        super().observe(r)
        self.tick(r["t"])

    def _open(self, kill: dict, t: float) -> bool:
        return kill["t"] <= t and (kill["until"] is None or t < kill["until"])

    def observe_app(self, r: dict) -> None:
        kind, peer, t = r["kind"], r.get("peer"), r["t"]
        if kind == "app.start":
            self.running.add(r["node"])
        elif kind == "app.exit":
            self.running.discard(r["node"])
            if not self.running:
                self.exited_at = t
        if kind == "app.route" and r.get("result") == 0:
            for kill in self.kills:
                if self._open(kill, t) and r.get("topic") in kill["unlearnt"]:
                    kill["last"][r["topic"]] = r
                    if kill["broker"] not in (r.get("brokers") or []):
                        kill["unlearnt"].discard(r["topic"])
                        if not kill["unlearnt"] and kill["learnt"] is None:
                            kill["learnt"] = (t, peer)
        elif kind == "app.send" or (kind == "app.request" and r.get("code") in SEND_CODES):
            if kind == "app.send" and r.get("topic"):
                self.topics_on.setdefault(peer, set()).add(r["topic"])
            for kill in self.kills:
                if not self._open(kill, t):
                    continue
                learnt = kill["learnt"][0] if kill["learnt"] else None
                if peer == kill["broker"] and ((learnt is not None and t > learnt) or t >= kill["t"] + self.within):
                    when = f"after its route dropped it at t={learnt:.1f}s" if learnt is not None else \
                        f"{t - kill['t']:.1f}s after it was killed at t={kill['t']:g}s (within {self.within:g}s)"
                    self.fail(f"{r['node']} sent to {peer} at t={t:.1f}s, {when}", t)
                elif peer != kill["broker"] and kind == "app.send":
                    kill["sends"] += 1

    def tick(self, now: float) -> None:
        super().tick(now)
        for kill in self.kills:
            if kill["topics"] and kill["unlearnt"] and kill["t"] + self.within < now and \
                    (kill["until"] is None or kill["until"] > kill["t"] + self.within) and \
                    (self.running or self.exited_at is None or self.exited_at > kill["t"] + self.within):
                topic = sorted(kill["unlearnt"])[0]
                last = kill["last"].get(topic)
                seen = (f"its last route of {topic}, from {last['peer']} at t={last['t']:.1f}s, still listed it"
                        if last else f"it fetched no route of {topic} since")
                self.fail(f"{self.who} still routed to {kill['broker']} {self.within:g}s after it was killed at "
                          f"t={kill['t']:g}s: {seen}", now)

    def finish(self, now: float) -> None:
        if self.decided:
            return
        self.tick(self.end(now))
        if self.decided:
            return
        if not self.kills:
            return self.nothing("no broker was killed or stopped", now)
        judged, why = [], []
        for kill in self.kills:
            name = f"{kill['broker']} killed at t={kill['t']:g}s"
            if not kill["topics"]:
                why.append(f"{name}: {self.who} had not sent to it")
            elif kill["learnt"] is None and self.exited_at is not None and not self.running and \
                    self.exited_at <= kill["t"] + self.within:
                why.append(f"{name}: {self.who} was not running at t={kill['t'] + self.within:g}s "
                           f"(it exited at t={self.exited_at:.1f}s)")
            elif kill["learnt"] is None:
                why.append(f"{name}: it was back or the timeline over before t={kill['t'] + self.within:g}s")
            else:
                t, ns = kill["learnt"]
                until = f"its restart at t={kill['until']:g}s" if kill["until"] is not None else "the end"
                judged.append(f"{kill['broker']} {t - kill['t']:.1f}s after its kill at t={kill['t']:g}s (a route "
                              f"from {ns} at t={t:.1f}s) and sent nothing to it until {until} "
                              f"({kill['sends']} sends elsewhere)")
        if not judged:
            return self.unjudged("; ".join(why), now)
        self.succeed(f"{self.who}'s routes dropped " + "; ".join(judged) + f" (within {self.within:g}s)", now)


TERM_CODES = (0, 128 + 15)  # 143: a shell's report of a child that died of SIGTERM


class AppKeepsRunning(AppCheck):
    """The app runs through every fault: no exit before the lab stops it, and when the lab stops
    it (SIGTERM at the end of the timeline), exit code 0 or death by that SIGTERM — not a crash, not
    the SIGKILL after the grace period. An exit a timeline fault caused (`stop app`, `kill app`)
    is the fault's, not the app's."""

    def __init__(self, name, **kw):
        super().__init__(name, **kw)
        self.started: dict[str, float] = {}
        self.exited: dict[str, dict] = {}

    def observe_app(self, r: dict) -> None:
        if r["kind"] == "app.start":
            self.started[r["node"]] = r["t"]
        elif r["kind"] == "app.exit":
            self.exited[r["node"]] = r
            how = _exit_text(r)
            if not r.get("stopped_by_lab"):
                faults = self.faults.at(r["t"])
                self.fail(f"{r['node']} exited at t={r['t']:.1f}s ({how}) before the lab stopped it"
                          + (f", during {', '.join(faults)}" if faults else ", with no fault on"), r["t"])
            elif r.get("reason", "end") != "end":
                pass  # a fault of the timeline stopped or killed it (stop app, kill app): not its doing
            elif not (r.get("signal") in ("SIGTERM", "TERM", 15) or (r.get("signal") is None and r.get("code") in TERM_CODES)):
                self.fail(f"{r['node']} did not stop cleanly when the lab stopped it at t={r['t']:.1f}s: {how}"
                          + (" (still running after the grace period)" if r.get("signal") in ("SIGKILL", "KILL", 9)
                             else ""), r["t"])

    def finish(self, now: float) -> None:
        if self.decided:
            return
        if not self.started:
            return self.nothing(f"{self.who} never started (no app.start)", now)
        words = []
        for app, t in sorted(self.started.items()):
            r = self.exited.get(app)
            words.append(f"{app} ran from t={t:.1f}s to the lab's stop, " + (_exit_text(r) if r else "still running"))
        self.succeed("; ".join(words), now)


def _exit_text(r: dict) -> str:
    if r.get("signal"):
        return f"killed by {r['signal']}"
    return f"exit code {r.get('code')}"


class AppHistory(AppCheck):
    """The app's own history — a JSON-lines file, one {"op": "send"|"receive", "topic", "queue"?,
    "offset"?, "uniq_key"?, "ok": bool} per completed operation, Jepsen-style — checked against the
    wire: a send it says succeeded must have been acknowledged to it (by UNIQ_KEY, else by topic,
    queue and offset); a message it says it received must have been delivered to it; a send it
    says failed must not have been acknowledged (by UNIQ_KEY). Read when the run ends; a relative
    `file` is in the app's folder (HistoryPath); a file older than the run is not this run's."""

    def __init__(self, name, *, path: str, **kw):
        super().__init__(name, **kw)
        self.history = HistoryPath(path)
        self.began = time.time()
        self.acked_uniq: set[str] = set()
        self.acked_at: set[tuple] = set()  # (topic, queue, offset)
        self.delivered_uniq: set[str] = set()
        self.delivered_at: set[tuple] = set()
        self.wire = 0

    @property
    def path(self) -> Path | None:
        return self.history.path

    def observe_app(self, r: dict) -> None:
        self.history.see(r)
        if r["kind"] == "app.send":
            self.wire += 1
            if r.get("result") == 0:
                for offset, uniq_key in _stored(r):
                    if uniq_key:
                        self.acked_uniq.add(uniq_key)
                    self.acked_at.add((r["topic"], r.get("queue"), offset))
        elif r["kind"] == "app.deliver":
            self.wire += 1
            for offset, uniq_key in r.get("messages", []):
                if uniq_key:
                    self.delivered_uniq.add(uniq_key)
                self.delivered_at.add((r["topic"], r["queue"], offset))

    def finish(self, now: float) -> None:
        if self.decided:
            return
        if self.path is None or not self.path.exists():
            self.nothing(self.history.missing(), now)
        elif not self.history.fresh(self.began):
            self.unjudged(f"{self.path} was not written during this run", now)
        if not self.wire:
            self.nothing(f"{self.who} sent and received nothing on the wire", now)
        if self.decided:
            return
        ops, problems = Counter(), []
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    op = json.loads(line)
                    kind, ok = op["op"], op["ok"]
                except (ValueError, KeyError, TypeError):
                    problems.append(f"{self.path}:{n}: not a history line: {line.strip()[:80]!r}")
                    continue
                ops[kind, bool(ok)] += 1
                problem = self._check(op, kind, ok)
                if problem:
                    problems.append(f"{self.path}:{n}: {problem}")
        if problems:
            self.fail(f"{len(problems)} of {sum(ops.values())} operations in the history disagree with the wire: "
                      + "; ".join(problems[:EXAMPLES]), now)
        elif not ops:
            self.unjudged(f"{self.path} holds no operation", now)
        else:
            self.succeed(f"{sum(ops.values())} operations in {self.path} agree with the wire ("
                         + ", ".join(f"{n} {kind} {'ok' if ok else 'failed'}" for (kind, ok), n in sorted(ops.items()))
                         + ")", now)

    def _check(self, op: dict, kind: str, ok) -> str | None:
        uniq, at = op.get("uniq_key"), (op.get("topic"), op.get("queue"), op.get("offset"))
        which = f"UNIQ_KEY {uniq}" if uniq else f"{at[0]} queue {at[1]} offset {at[2]}"
        if kind == "send" and ok:
            if (uniq and uniq in self.acked_uniq) or (at[2] is not None and at in self.acked_at):
                return None
            return f"the app says send {which} succeeded; no broker acknowledged it to the app"
        if kind == "send" and not ok and uniq and uniq in self.acked_uniq:
            return f"the app says send {which} failed; a broker acknowledged it to the app"
        if kind == "receive" and ok:
            if (uniq and uniq in self.delivered_uniq) or (at[2] is not None and at in self.delivered_at):
                return None
            return f"the app says it received {which}; no broker delivered it to the app"
        if kind not in ("send", "receive"):
            return f"unknown op {kind!r}"
        return None


# --- from [[expect]] tables -------------------------------------------------------------------------

def build_one(kind: str, name: str, *, take, duration, number, window, error, topology, phased: bool,
              timeline_end: float):
    """The check for one app [[expect]] table; take/duration/number/window/error are
    expectations._build_one's readers of its keys."""
    apps = take("app", None)
    if isinstance(apps, str):
        apps = [apps]
    if apps is not None and (not isinstance(apps, list) or not apps or
                             not all(isinstance(a, str) and a for a in apps)):
        raise error(f"an app's name or a list of them, not {apps!r}", "app")
    roles = topology.roles()
    clash = [a for a in apps or () if a in roles]
    if clash:
        raise error(f"{clash[0]!r} is a node of the lab, not an app", "app")
    common = dict(apps=apps, nameservers=[name for name, _ in topology.nameservers],
                  broker_groups={b.name: b.broker_name for b in topology.brokers}, timeline_end=timeline_end)
    if kind == "app_acked_consumed":
        group = take("group", None)
        if group is not None and (not isinstance(group, str) or not group):
            raise error(f"a consumer group's name, not {group!r}", "group")
        history = take("history", None)
        if history is not None and (not isinstance(history, str) or not history):
            raise error(f"the path of the app's history file, not {history!r}", "history")
        return AppAckedConsumed(name, group=group, history=history and os.path.expandvars(os.path.expanduser(history)),
                                **common)
    if kind == "app_duplicates":
        start, end = window()
        return AppDuplicates(name, maximum=int(number("max", 0, 0, 10**9)), start=start, end=end, **common)
    if kind == "app_send_rate":
        start, end = window()
        return AppSendRate(name, minimum=number("min", ..., 0, 10**6), settle=duration("settle", "10s"),
                           start=start, end=end, phased=phased, **common)
    if kind == "app_recovers":
        return AppRecovers(name, minimum=number("min", 1, 0, 10**6), within=duration("within"), **common)
    if kind == "app_avoids_killed_broker":
        return AppAvoidsKilledBroker(name, within=duration("within"), brokers={b.name for b in topology.brokers},
                                     **common)
    if kind == "app_keeps_running":
        return AppKeepsRunning(name, **common)
    if kind == "app_history":
        path = take("file")
        if not isinstance(path, str) or not path:
            raise error(f"the path of the app's history file, not {path!r}", "file")
        return AppHistory(name, path=os.path.expandvars(os.path.expanduser(path)), **common)
    raise error(f"unknown expectation type {kind!r}", "type")
