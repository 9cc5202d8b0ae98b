"""trio's private names nslab uses, all in chaos/trio_internals.py: an upgrade that moves one
fails here, by name, before any simulated run quietly stops repeating."""

import trio

from chaos import trio_internals
from chaos.clock import VirtualClock


def test_this_trio_has_every_private_name_nslab_uses():
    trio_internals.check()


def test_the_virtual_clock_sees_the_runner_it_needs():
    seen = []

    async def main():
        seen.append(trio_internals.current_runner())

    trio.run(main, clock=VirtualClock())
    assert seen[0] is not None, "trio keeps its run queue elsewhere: the virtual clock would lose its shortcut"


def test_seeded_scheduling_repeats_the_order_of_same_moment_wakeups():
    def order(seed: int) -> list[int]:
        woke = []

        async def sleeper(i: int) -> None:
            await trio.sleep(1)
            woke.append(i)

        async def main():
            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(sleeper, i)

        trio_internals.deterministic_scheduling(seed)
        trio.run(main, clock=VirtualClock())
        return woke

    assert order(7) == order(7)
    assert order(7) != order(8), "the seed changes nothing: scheduling is not seeded"
