"""The virtual clock: time jumps to the next deadline or timer as soon as every task waits."""

import pytest
import trio

from chaos.clock import Timers, VirtualClock, sleep_until
from chaos.links import Links, Toxic
from chaos.network import SimNetwork
from chaos.pause import Pause
from nameserver.schedule import Schedule


def test_timers_run_in_due_order_and_ties_in_the_order_they_were_set():
    timers, ran = Timers(), []
    for when, name in ((2.0, "c"), (1.0, "a"), (2.0, "d"), (1.0, "b"), (3.0, "e")):
        timers.call_at(when, lambda name=name: ran.append(name))
    timers.run_due(2.0)
    assert ran == ["a", "b", "c", "d"] and timers.next_due() == 3.0


def test_time_jumps_to_whichever_comes_first_a_deadline_or_a_timer():
    seen = []

    async def main():
        clock = trio.lowlevel.current_clock()
        clock.timers.call_at(0.5, lambda: seen.append(("timer", trio.current_time())))
        await trio.sleep(1)
        seen.append(("sleep", trio.current_time()))
        clock.timers.call_at(10.0, lambda: seen.append(("timer", trio.current_time())))
        await trio.sleep(20)
        seen.append(("sleep", trio.current_time()))

    trio.run(main, clock=VirtualClock())
    assert seen == [("timer", 0.5), ("sleep", 1.0), ("timer", 10.0), ("sleep", 21.0)]


def test_a_simulated_link_delivers_after_its_latency_on_the_virtual_clock():
    async def main():
        net = SimNetwork(Links(base_latency=0.25))
        listener, address = await net.listen("server")
        client = await net.connect("client", address)
        server = await listener.accept()
        net.add_toxic("client", "server", Toxic("latency", latency=0.5))
        start = trio.current_time()
        await client.send_all(b"ping")
        assert await server.receive_some() == b"ping"
        return trio.current_time() - start

    assert trio.run(main, clock=VirtualClock()) == pytest.approx(0.75)


def test_a_deadline_a_timer_sets_is_kept_though_later_timers_run_in_the_same_go():
    # Timers that wake no task run back to back; one that sets an earlier trio deadline must
    # still get it on time, not after the timers queued behind it.
    seen = []

    async def main():
        clock = trio.lowlevel.current_clock()
        scope = trio.CancelScope()

        def shorten():
            scope.deadline = 2.0

        clock.timers.call_at(1.0, shorten)
        for when in (3.0, 4.0, 5.0):
            clock.timers.call_at(when, lambda: seen.append(("timer", trio.current_time())))
        with scope:
            await trio.sleep_forever()
        seen.append(("woken", trio.current_time()))
        await trio.sleep(10)

    trio.run(main, clock=VirtualClock())
    assert seen[0] == ("woken", 2.0)
    assert [t for kind, t in seen if kind == "timer"] == [3.0, 4.0, 5.0]


def test_sleep_until_wakes_on_time_and_can_be_cancelled():
    async def main():
        await sleep_until(1.5)
        woke = trio.current_time()
        with trio.move_on_at(2.0):
            await sleep_until(10.0)
        cancelled_at = trio.current_time()
        await trio.sleep(20)  # the cancelled sleep's timer, due at 10, wakes nothing
        return woke, cancelled_at

    assert trio.run(main, clock=VirtualClock()) == (1.5, 2.0)


def test_sleep_until_on_another_clock_is_trios():
    async def main():
        await sleep_until(trio.current_time() + 0.01)
        return True

    assert trio.run(main)


# --- Pause: freeze as SIGSTOP for an in-process node ------------------------------------------------

async def test_a_pause_holds_a_wait_past_its_time_and_resume_runs_what_came_due(autojump_clock):
    pause, woke, ran = Pause(), [], []
    async with trio.open_nursery() as nursery:
        async def sleeper():
            await pause.sleep_until(trio.current_time() + 5)
            woke.append(trio.current_time())

        nursery.start_soon(sleeper)
        await trio.sleep(1)
        pause.pause()
        assert pause.defer(lambda: ran.append(trio.current_time()))
        await trio.sleep(99)
        assert woke == [] and ran == [], "nothing of a paused node runs, however late"
        pause.resume()
        assert ran == [100.0], "a deferred callback runs on resume"
        await trio.sleep(0.5)
    assert woke == [100.0], "the overdue wait ends at the resume"
    assert not pause.defer(lambda: None), "a running node runs its callbacks itself"


async def test_a_fixed_rate_schedule_keeps_its_period_and_catches_up_after_a_pause(autojump_clock):
    pause = Pause()
    schedule = Schedule(0.5, pause.sleep_until)
    runs = []

    async def task():
        runs.append(trio.current_time())
        await trio.sleep(0.018)  # a run that takes time does not push the next one later

    async with trio.open_nursery() as nursery:
        nursery.start_soon(schedule.every, 10.0, 30.0, task)
        await trio.sleep(100)
        assert runs == [25.0, 55.0, 85.0], "first run at delay + phase × period, then every period"
        pause.pause()
        await trio.sleep(100)  # 115, 145, 175 come due while paused
        assert len(runs) == 3
        pause.resume()
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert [round(t, 3) for t in runs[3:]] == [200.0, 200.018, 200.036], "the overdue runs come back to back"
