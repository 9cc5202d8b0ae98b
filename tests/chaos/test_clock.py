"""The virtual clock: time jumps to the next deadline or timer as soon as every task waits."""

import pytest
import trio

from chaos.clock import Timers, VirtualClock
from chaos.links import Links, Toxic
from chaos.network import SimNetwork


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
