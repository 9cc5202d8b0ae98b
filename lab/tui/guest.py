"""The live lab: the cluster runs on trio inside Textual's asyncio loop (trio's guest mode), on a
clock the screen controls — pause is rate 0, faster and slower change the rate. Simulated, it is a
PacedVirtualClock: time jumps from event to event as in `nslab run`, only never ahead of the screen,
and a step lets it run through the next second at once; on sockets, a MockClock.

The run is a scenario's Play (an empty one when none is playing): an action from the keys or from
`nslab chaos` is injected and applied at the Play's next whole second, as a timeline step would be.
So a simulated run is a pure function of its seed and its actions — paused, sped up or not — and
`nslab replay EVENTS --export-scenario FILE` gives a scenario `nslab run` repeats record for record.

The cluster never waits for the screen: its records go to a list that the screen's timer drains
into the model. The screen never blocks on the cluster: calls into trio go through the trio token's
run_sync_soon and come back as asyncio futures.

Trio runs its ready tasks in batches, one per turn of the asyncio loop, and with 1,000 topics a
batch can take 50-200 ms (8,000 long-polled pulls answered at once, offsets persisted). A key press
crosses the loop several times before it reaches the screen (driver, app, focused widget, its
parents, the screen's update timer), and each crossing used to wait for a whole batch. So a key
press holds trio's next batches for HOLD seconds (`hold`): the screen answers first, then the
cluster catches up — at worst one batch per HOLD while keys repeat.
"""

from __future__ import annotations

import asyncio
import math
import time

import outcome
import trio

from chaos.clock import PacedVirtualClock
from chaos.faults import Fault, FaultError

from lab.control import live
from ..config import LabConfig
from lab.control.actions import vocabulary
from lab.control.feed import EventFeed
from chaos.trio_internals import deterministic_scheduling
from lab.run.runner import RunOptions, make_clock, run_cluster
from lab.control.scenarios import Play, live_play
from .source import STEP, Source

STOP_TIMEOUT = 30.0  # real seconds for the graceful shutdown after `q`
HOLD = 0.05  # real seconds a key press keeps trio's batches waiting; a redraw takes ~10-20 ms
STALE = 0.5  # a press older than this when trio next ticks was answered long ago: no hold


class LiveLab(Source):
    live = True

    def __init__(self, config: LabConfig, options: RunOptions, play: Play | None = None):
        super().__init__(options.speed)
        self.config, self.options = config, options
        self.mode = "sim" if options.sim else "sockets"
        self.can_step = options.sim
        # Simulated: virtual time paced to the screen. On sockets: a MockClock (options.speed is set).
        self.clock = PacedVirtualClock(options.speed) if options.sim else make_clock(options)
        self.pending: list[dict] = []
        self.vocabulary = vocabulary()
        self._origin: float | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._held: list | None = None  # trio's guest ticks waiting while a key press is answered
        self._pressed_at: float | None = None  # a key press not yet turned into a hold
        self.done: asyncio.Future | None = None  # the guest run's outcome
        if play is not None:
            self.scenario = play.prepared.scenario.name
            self.model.expect(play.names)
        self.play = play or live_play(config, options.seed)

    # --- the trio side ----------------------------------------------------------------------------

    def _record(self, record: dict) -> None:
        if record["kind"] == "run.start":
            self._origin = self.clock.current_time()
        self.pending.append(record)

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        # `nslab chaos` is served from before the cluster starts: its tasks then sit waiting for a
        # connection and never share a batch of the run's, whose order stays the seed's alone.
        # Its records stream to `nslab attach` from threads of the feed's own (feed.py).
        feed = EventFeed(live.events_path())
        feed.start()
        server = live.ControlServer(None, _InjectingControl(self.play), {"mode": self.mode, "seed": self.options.seed},
                                    feed)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve)

                async def drive(cluster, events, cluster_nursery: trio.Nursery) -> None:
                    server.attach(cluster)
                    await self.play.driver(cluster, events, cluster_nursery)

                await run_cluster(self.config, self.options, driver=drive,
                                  subscribers=[self._record, feed.record, *self.play.subscribers],
                                  scenario=self.scenario)
                nursery.cancel_scope.cancel()
        finally:
            feed.close()

    def _shutdown(self) -> None:
        self.clock.rate = math.inf if self.options.sim else max(self.speed, 1.0)  # the drain, at once
        self.play.finish()

    # --- the asyncio side ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.done = self._loop.create_future()
        if self.options.sim:
            deterministic_scheduling(self.options.seed)
        trio.lowlevel.start_guest_run(
            self._main, run_sync_soon_threadsafe=self._soon_threadsafe, run_sync_soon_not_threadsafe=self._soon,
            done_callback=self.done.set_result, clock=self.clock, host_uses_signal_set_wakeup_fd=True)

    # Trio's guest run has at most one tick outstanding (a batch, or its I/O wait coming back), so
    # holding ticks and releasing them in order keeps trio's own order.

    def hold(self) -> None:
        """A key was pressed: trio's next batches wait HOLD seconds, so the screen answers first.
        Any thread may call this (the terminal's input thread does, before the key has crossed the
        loop once); the hold starts at trio's next tick, usually the end of the batch under way. A
        press during a hold does not extend it: repeating keys leave trio a batch every HOLD."""
        self._pressed_at = time.monotonic()

    def _holding(self) -> bool:
        if self._held is None:
            pressed, self._pressed_at = self._pressed_at, None
            if pressed is None or time.monotonic() - pressed > STALE:
                return False
            self._held = []
            self._loop.call_later(HOLD, self._release)
        return True

    def _release(self) -> None:
        held, self._held = self._held, None
        for tick in held:
            self._loop.call_soon(tick)

    def _soon(self, tick) -> None:
        if self._holding():
            self._held.append(tick)
        else:
            self._loop.call_soon(tick)

    def _soon_threadsafe(self, tick) -> None:
        self._loop.call_soon_threadsafe(self._run_or_hold, tick)

    def _run_or_hold(self, tick) -> None:
        if self._holding():
            self._held.append(tick)
        else:
            tick()

    async def stop(self) -> None:
        """Graceful: the Play ends, producers stop, consumers drain; then clients, brokers (which
        unregister) and NameServers stop, and the run ends."""
        if self.done is not None and not self.done.done():
            self._call(self._shutdown)
            try:
                await asyncio.wait_for(asyncio.shield(self.done), STOP_TIMEOUT)
            except TimeoutError:  # a node that will not stop dies with the process
                pass
        self.tick()

    @property
    def error(self) -> BaseException | None:
        if self.done is not None and self.done.done() and isinstance(self.done.result(), outcome.Error):
            return self.done.result().error
        return None

    def tick(self) -> None:
        pending, self.pending = self.pending, []
        for record in pending:
            self.model.feed(record)
        if self._origin is not None and not self.model.ended:
            self.model.now = max(self.model.now, self.clock.current_time() - self._origin)

    def _call(self, fn, *args) -> None:
        """Run fn in trio's context and wake trio up (sockets mode: MockClock's settings take effect
        there). A simulated run never needs it: its clock is read, not woken."""
        if self._token is None or self.options.sim:
            fn(*args)
            return
        try:
            self._token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            pass

    def _rate_changed(self) -> None:
        self._call(setattr, self.clock, "rate", self.rate)

    def step(self, seconds: float = STEP) -> None:
        if self.can_step and self.paused:
            self.clock.advance(seconds)

    async def apply(self, words: list[str]) -> str:
        """A fault in `nslab chaos` words, applied at the run's next whole second; what happened."""
        fault = self.vocabulary.parse_words(words)
        if self.play.control is None or self.done.done():  # the Play's driver sets control as it starts
            raise FaultError("the cluster is still starting" if self.play.control is None else "the lab has stopped")
        self.play.control.validate(fault)
        future = self._loop.create_future()
        self.play.inject(fault, "tui", lambda result: self._loop.call_soon_threadsafe(_settle, future, result))
        return await future


class _InjectingControl:
    """What `nslab chaos` acts through: the Play's injection, so its actions land where the keys'
    do (and are exported alike)."""

    def __init__(self, play: Play):
        self.play = play

    async def apply(self, fault: Fault, *, source: str) -> str:
        if self.play.control is None:
            raise FaultError("the cluster is still starting")
        self.play.control.validate(fault)
        done, result = trio.Event(), []
        self.play.inject(fault, source, lambda outcome_: (result.append(outcome_), done.set()))
        await done.wait()
        return result[0].unwrap()


def _settle(future: asyncio.Future, result: outcome.Outcome) -> None:
    if future.done():  # the screen stopped waiting
        return
    if isinstance(result, outcome.Error):
        future.set_exception(result.error)
    else:
        future.set_result(result.value)

