"""What keeps keys answered with 3 NameServers × 1,000 topics in one process (benchmarks/bench_tui.py
measures it): a key press holds trio's batches until the screen has answered, full garbage
collections wait for a quiet moment, Textual's threads get the GIL back quickly, and the event log
keeps only the sizes of table snapshots."""

from __future__ import annotations

import asyncio
import gc
import sys

from tui_support import EXPIRED_AT, build_log

from lab.config import LabConfig
from lab.run.runner import RunOptions
from lab.tui import guest
from lab.tui.responsive import AT_MOST, EVERY, NEVER, QUIET, SWITCH, Responsive
from lab.tui.guest import HOLD, LiveLab
from lab.tui.model import TABLES, LabModel
from lab.tui.widgets.event_log import summary


def test_a_key_press_holds_trios_next_batch_and_a_repeating_key_never_starves_trio(monkeypatch):
    lab = LiveLab(LabConfig(), RunOptions(sim=True, seed=1, speed=4.0))
    ran: list[tuple[str, float]] = []

    async def main():
        loop = lab._loop = asyncio.get_running_loop()

        def tick(name):  # what trio's guest run hands the host: its next batch
            return lambda: ran.append((name, loop.time()))

        async def until(count):
            while len(ran) < count:
                await asyncio.sleep(0.002)

        lab._soon(tick("free"))
        await until(1)
        lab.hold()  # a key, from the terminal's input thread
        pressed = loop.time()
        lab._soon(tick("held"))
        await asyncio.sleep(HOLD / 2)
        assert [name for name, _ in ran] == ["free"], "the screen goes first"
        lab.hold()  # the key repeats: the hold is not extended...
        await until(2)
        assert HOLD - 0.01 <= ran[1][1] - pressed < HOLD + 1.0
        lab._soon_threadsafe(tick("after"))  # ...but the next batch is held for the new press
        await asyncio.sleep(HOLD / 2)
        assert len(ran) == 2
        await until(3)
        monkeypatch.setattr(guest, "STALE", 0.0)
        lab.hold()  # a press answered long ago (trio was idle meanwhile) holds nothing
        await asyncio.sleep(0.01)
        lab._soon(tick("stale"))
        await until(4)

    asyncio.run(main())
    assert [name for name, _ in ran] == ["free", "held", "after", "stale"]


def test_full_collections_wait_for_quiet_but_not_for_ever_and_the_process_is_given_back():
    now = [0.0]
    responsive = Responsive(clock=lambda: now[0])
    thresholds, switch = gc.get_threshold(), sys.getswitchinterval()
    responsive.start()
    try:
        assert gc.get_threshold() == (*thresholds[:2], NEVER), "young generations stay CPython's"
        assert sys.getswitchinterval() == SWITCH
        now[0] = EVERY - 1
        assert not responsive.tick()
        responsive.pressed()
        now[0] = EVERY
        assert not responsive.tick(), "a key was pressed a moment ago"
        now[0] += QUIET
        assert responsive.tick()
        start = now[0]
        while now[0] - start < AT_MOST:  # someone pressing a key every second
            assert not responsive.tick()
            responsive.pressed()
            now[0] += 1
        assert responsive.tick(), "memory is bounded all the same"
    finally:
        responsive.stop()
    assert (gc.get_threshold(), sys.getswitchinterval()) == (thresholds, switch)


def test_the_event_log_keeps_the_sizes_of_table_snapshots_not_the_tables():
    model = LabModel()
    for record in build_log():
        model.feed(record)
    logged = model.events("ns.tables")
    assert [(r["node"], r["topics"], r["brokers"]) for r in logged] == [
        ("ns-0", 2, 2), ("ns-1", 2, 2), ("ns-2", 2, 2), ("ns-2", 2, 1)]
    assert not any(table in r for r in logged for table in TABLES)
    assert summary(logged[-1]) == "topics=2 brokers=1"
    assert set(model.nameservers["ns-2"].tables["brokerLiveTable"]) == {"127.0.0.1:11011"}, "the tables live on"
    assert model.diverged[("topicQueueTable", "TopicOrder")] == EXPIRED_AT
