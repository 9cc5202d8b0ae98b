"""BrokerStats: what a broker counts of its own traffic, for GET_BROKER_RUNTIME_INFO and the
consume TPS of GET_CONSUME_STATS. Pure: every call takes `now` (the clock, seconds).

RocketMQ 4.9.8 keeps these in three places, all from the broker's boot (a restart starts them at 0,
whatever the store holds):
- BrokerStatsManager: BROKER_PUT_NUMS / BROKER_GET_NUMS (msgPutTotalTodayNow / msgGetTotalTodayNow)
  and GROUP_GET_NUMS per topic@group, whose per-minute TPS is ConsumeStats.consumeTps;
- StoreStatsService: putMessageTimesTotal / putMessageSizeTotal, and putTps / getTransferedTps as
  "tps10 tps60 tps600" — the rate over the last 10, 60 and 600 s of its 1 s samples;
- BrokerStats: the *Morning figures, snapshots taken at midnight (0 until the first midnight).

Here traffic is counted in whole-second buckets, which is what the 1 s sampling sees. One
difference: a Java broker younger than a window writes an empty figure for it (fewer samples than
the window), which mqadmin clusterList then fails to parse; the lab divides by its uptime instead.
"""

from __future__ import annotations

import math

TPS_WINDOWS = (10, 60, 600)  # seconds: StoreStatsService.getPutTps(10), (60), (600)
GROUP_TPS_WINDOW = 60  # seconds: StatsItem.getStatsDataInMinute


class _Rate:
    """A count in whole-second buckets over the last `keep` seconds, and its total. A count may
    come for a second before the latest (counts made after the fact, in a batch: add_each), hence
    a dict, pruned now and then."""

    def __init__(self, keep: int):
        self.keep = keep
        self.total = 0
        self._buckets: dict[int, int] = {}  # second -> count
        self._latest = -math.inf  # the latest second counted

    def add(self, now: float, count: int = 1) -> None:
        second = math.floor(now)
        self.total += count
        buckets = self._buckets
        buckets[second] = buckets.get(second, 0) + count
        if second > self._latest:
            self._latest = second
            if len(buckets) > 2 * self.keep:
                self._prune()

    def add_each(self, times: list[float]) -> None:
        """One count at each of `times`, in order (add, one call for many)."""
        floor, buckets = math.floor, self._buckets
        for now in times:
            second = floor(now)
            buckets[second] = buckets.get(second, 0) + 1
            if second > self._latest:
                self._latest = second
        self.total += len(times)
        if len(buckets) > 2 * self.keep:
            self._prune()

    def _prune(self) -> None:
        oldest = self._latest - self.keep
        self._buckets = {s: c for s, c in self._buckets.items() if s > oldest}

    def tps(self, now: float, window: int, uptime: float) -> float:
        """Per second over the last `window` seconds (or the uptime, if shorter; at least 1 s)."""
        since = math.floor(now) - window
        count = sum(c for s, c in self._buckets.items() if s > since)
        return count / max(1.0, min(float(window), uptime))


class BrokerStats:
    def __init__(self, boot: float):
        self.boot = boot  # clock seconds when the broker (its store service) started
        self.puts = _Rate(max(TPS_WINDOWS))
        self.put_size_total = 0
        self.gets = _Rate(max(TPS_WINDOWS))  # messages handed out by pulls
        self.group_gets: dict[tuple[str, str], _Rate] = {}  # (topic, group)
        self.pulls_found = _Rate(max(TPS_WINDOWS))  # pulls that found messages (getFoundTps)
        self.pulls_miss = _Rate(max(TPS_WINDOWS))  # pulls that found none (getMissTps)

    def on_put(self, now: float, size: int) -> None:
        self.puts.add(now)
        self.put_size_total += size

    def on_get(self, now: float, group: str, topic: str, count: int) -> None:
        self.gets.add(now, count)
        rate = self.group_gets.get((topic, group))
        if rate is None:
            rate = self.group_gets[(topic, group)] = _Rate(GROUP_TPS_WINDOW)
        rate.add(now, count)

    def on_pull(self, now: float, found: bool) -> None:
        (self.pulls_found if found else self.pulls_miss).add(now)

    def on_pulls_missed(self, times: list[float]) -> None:
        """A pull that found nothing at each of `times`, counted at once: they may be earlier
        than counts already made."""
        self.pulls_miss.add_each(times)

    def uptime(self, now: float) -> float:
        return max(0.0, now - self.boot)

    def windows(self, rate: _Rate, now: float) -> tuple[float, ...]:
        """`rate` (puts, gets, pulls_found, pulls_miss) per second over each of TPS_WINDOWS."""
        return tuple(rate.tps(now, w, self.uptime(now)) for w in TPS_WINDOWS)

    def group_get_tps(self, now: float, group: str, topic: str) -> float:
        """BrokerStatsManager.tpsGroupGetNums: messages per second `group` pulled of `topic`."""
        rate = self.group_gets.get((topic, group))
        return rate.tps(now, GROUP_TPS_WINDOW, self.uptime(now)) if rate else 0.0
