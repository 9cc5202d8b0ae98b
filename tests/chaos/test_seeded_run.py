"""Seeded scheduling is the run's: a task that is not the run's (`nslab run`'s signal watcher, the
TUI's control server, `nslab chaos` requests coming in real time) neither uses the seed's draws
nor changes the order of the run's same-instant wakeups — nor does how a guest run's batches fall
(issue 35: a TUI run and `nslab run` of its export ordered two same-instant records differently)."""

import asyncio
import math
import threading
import time

import trio

from chaos import trio_internals
from chaos.clock import PacedVirtualClock, VirtualClock
from chaos.trio_internals import deterministic_scheduling

SEED = 11
TASKS, INSTANTS = 8, 30


async def the_run(woke: list, *, as_trio_would: bool = False) -> None:
    """What a cluster's run is here: seeded from inside trio, tasks waking at the same instants —
    half started by the run's task, half by a callback of the virtual clock (its timers are the
    run's). as_trio_would: every task in a batch shuffled together, as trio's own shuffle does."""
    deterministic_scheduling(SEED)
    if as_trio_would:
        trio_internals._run_root = None

    async def sleeper(i: int) -> None:
        for k in range(1, INSTANTS + 1):
            await trio.sleep_until(k / 100)
            woke.append((k, i))

    async with trio.open_nursery() as nursery:
        for i in range(TASKS // 2):
            nursery.start_soon(sleeper, i)
        clock = trio.lowlevel.current_clock()
        for i in range(TASKS // 2, TASKS):
            clock.timers.call_at(0.001 * i, lambda i=i: nursery.start_soon(sleeper, i))


async def outsider(nursery: trio.Nursery) -> None:
    """Not the run's: wakes at the run's instants, so it shares the run's batches, and starts more."""
    for k in range(1, INSTANTS + 1):
        await trio.sleep_until(k / 100)
        if k % 3 == 0:
            nursery.start_soon(trio.sleep_until, (k + 1) / 100)


def plain(*, outside: bool, as_trio_would: bool = False) -> list:
    woke = []

    async def main():
        async with trio.open_nursery() as nursery:
            if outside:  # as `nslab run`'s signal watcher: started before the run
                nursery.start_soon(outsider, nursery)
            await the_run(woke, as_trio_would=as_trio_would)

    deterministic_scheduling(SEED)
    trio.run(main, clock=VirtualClock())
    return woke


def test_a_task_outside_the_run_changes_nothing_of_the_runs_order():
    alone = plain(outside=False)
    assert sorted(alone) != alone, "same-instant wakeups in creation order: nothing was shuffled"
    assert alone == plain(outside=False, as_trio_would=True), \
        "alone, a run is not scheduled as before (the tasks a timer starts are the run's)"
    assert plain(outside=True) == alone, "a task outside the run changed its order"


def test_a_guest_run_on_a_paced_clock_orders_the_run_as_trio_run_does_whatever_comes_in_real_time():
    """In guest mode on a paced clock, batches end where the host loop and real time say, and
    requests from a thread (as `nslab chaos` sends them) start tasks at any moment: the run's order
    stays the seed's."""
    expected = plain(outside=False)
    woke, stop = [], threading.Event()

    async def main():
        async with trio.open_nursery() as nursery:
            token = trio.lowlevel.current_trio_token()

            def requests():  # a task now and then, started from outside trio at real-time moments
                while not stop.wait(0.003):
                    try:
                        trio.from_thread.run_sync(nursery.start_soon, visitor, trio_token=token)
                    except trio.RunFinishedError:
                        return

            async def visitor():  # wakes at the run's next instant, in the run's batch
                await trio.sleep_until(math.ceil(trio.current_time() * 100 + 1) / 100)

            threading.Thread(target=requests, daemon=True).start()
            try:
                await the_run(woke)
            finally:
                stop.set()

    async def host():
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        deterministic_scheduling(SEED)
        trio.lowlevel.start_guest_run(main, run_sync_soon_threadsafe=loop.call_soon_threadsafe,
                                      done_callback=done.set_result, clock=PacedVirtualClock(1.0),
                                      host_uses_signal_set_wakeup_fd=True)
        started = time.monotonic()
        (await done).unwrap()
        return time.monotonic() - started

    wall = asyncio.run(host())
    assert wall > 0.2, "the paced clock did not pace: real time had no say"
    assert woke == expected
