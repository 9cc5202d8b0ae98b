"""The fabric every lab node listens and connects through.

Two implementations of one interface:
- SimNetwork: in memory, on trio's clock; latency, jitter and loss from a seeded RNG. A run on a
  virtual clock is a pure function of its seed.
- TcpNetwork: real loopback sockets. Each node listens on a real port; a connection from one lab
  node to another passes an in-process relay for that link, so the link can be cut, black-holed
  or slowed whoever owns the sockets. Addresses outside the lab are dialled directly. A relay's
  port is the link's for the whole run and refuses while its node does not listen, as the node's
  own port would (_Relay).

Nodes are named (`ns-0`, `broker-a-0`, ...); addresses are `host:port` strings, as RocketMQ wants.
A connection across a partition or a black hole stays open and its bytes wait, as TCP's would;
they arrive if the link heals before someone closes the connection.
"""

from __future__ import annotations

import errno
import functools
import logging
import math
import random
import socket
from collections import deque
from typing import Awaitable, Callable, Iterable, NamedTuple, Protocol

import trio


from .clock import Timers, timer_source
from .links import Links, Toxic
from .request_faults import PASS, RequestFault, Verdict, judge_reply
from .wire_codec import Frame, WireCodec

# A payload's size in bytes, or a function of the payload giving it: only a bandwidth toxic needs
# it, so a network carrying objects measures one only then (and keeps no closure per payload).
Size = int | Callable[[object], int]

log = logging.getLogger("chaos.network")


# Accepts on a listener for ever, handing each stream to the callable; the str names it in logs.
AcceptLoop = Callable[[trio.abc.Listener, Callable[[trio.abc.Stream], object], str], Awaitable[None]]


class LinkWatch(Protocol):
    """One relayed connection's frames, for whoever builds the network (TcpNetwork.link_watch)."""

    def sent(self, src: str, dst: str, frame: Frame) -> Frame:
        """A frame src sent towards dst, before any fault acts on it: the frame to pass on (this
        one, or one rewritten by the codec that cut it)."""

    def arrived(self, src: str, dst: str, frame: Frame) -> None:
        """A frame (as `sent` returned it, or an answer a fault gave in the peer's stead) as it is
        written to dst, after every delay the link gave it: what dst receives, when it does."""

    def ended(self, src: str, dst: str) -> None:
        """src has closed its end (its EOF, or a reset): nothing more comes from it. Its close may
        still wait in the link (a partition holds it, as TCP would hold a FIN)."""

    def closed(self) -> None:
        """The connection has ended, either side."""


class Unreachable(OSError):
    """Connection refused: nothing listens at that address (a killed node, say)."""


class Network:
    def __init__(self, links: Links | None = None, *, seed: int = 0, codec: WireCodec | None = None,
                 aggregate: bool = True):
        self.links = links or Links()
        # Whether idle periodic traffic may be simulated in aggregate ("coasting": renew_peer_call,
        # coast_peer_call, coast_queries, watch_peer, delivers_everything on a simulated end). Off,
        # every such offer is declined and every role runs its plain flow, call by call; a run's
        # events are the same bytes either way (tests/chaos/test_aggregation_off.py).
        self.aggregate = aggregate
        # The protocol on the links, for request faults (the lab gives RocketMQ's); without one a
        # network takes none.
        self.codec = codec
        self.rng = random.Random(seed)
        # Who listens where; changed by `listening` and `close_node` alone, which tell whoever
        # follows it (a TCP network's relays).
        self.node_at: dict[str, str] = {}  # address -> node
        self.address_of: dict[str, str] = {}  # node -> address it listens on
        self._endpoints: dict[str, list] = {}  # node -> open connection ends (for kill)
        self._listeners: dict[str, list] = {}
        self._changed = trio.Event()
        # Told of every request a request fault acted on (the lab records it: chaos.request).
        self.on_request_fault: Callable[[dict], None] | None = None
        # Whoever has calls coasting (_SimEnd.coast_peer_call): told once of the next link change.
        self._coasting: dict[Callable[[], None], None] = {}

    # --- link state (every change wakes whoever waits on a held link) ----------------------------

    async def links_changed(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
        coasting, self._coasting = self._coasting, {}
        for stop_coasting in coasting:
            stop_coasting()

    def partition(self, groups: Iterable[Iterable[str]], *, one_way: bool = False) -> None:
        self.links.partition(groups, one_way=one_way)
        self._notify()

    def isolate(self, node: str) -> None:
        self.links.isolate(node)
        self._notify()

    def heal(self) -> None:
        self.links.heal()
        self._notify()

    def freeze(self, node: str) -> None:
        """The node's process stops: its connections stay open and its bytes wait in the network."""
        self.links.frozen.add(node)
        self._notify()

    def unfreeze(self, node: str) -> None:
        self.links.frozen.discard(node)
        self._notify()

    def add_toxic(self, src: str, dst: str, toxic: Toxic) -> None:
        self.links.add_toxic(src, dst, toxic)
        self._notify()

    def add_request_fault(self, src: str, dst: str, fault: RequestFault) -> None:
        """A fault on the requests of one code crossing src -> dst ("*": every link out of src,
        or into dst), and on their replies."""
        if self.codec is None:
            raise ValueError("a network built without a wire codec takes no request faults")
        self.links.requests.add(src, dst, fault.with_codec(self.codec), trio.current_time())
        self._notify()

    def _judged(self, src: str, dst: str, code: int, flag: int, opaque: int,
                reply_faults: dict) -> Verdict:
        """A command crossing src -> dst while request faults are on: what happens to it. A
        request that meets a fault on its reply leaves it in `reply_faults` (the connection's),
        under (the replier, opaque); its reply takes it from there."""
        codec = self.codec
        if codec.is_reply(flag):
            fault = reply_faults.pop((src, opaque), None) if reply_faults else None
            verdict = PASS if fault is None else judge_reply(fault, self.rng)
        else:
            verdict, reply_fault = self.links.requests.judge(src, dst, code, flag, trio.current_time(), self.rng, codec)
            if reply_fault is not None:
                reply_faults[(dst, opaque)] = reply_fault
        if verdict.fault is not None and self.on_request_fault is not None:
            fault = verdict.fault
            reply = codec.is_reply(flag)
            request = fault.code if reply else code  # a reply's own code is its response code
            self.on_request_fault({"src": src, "dst": dst, "code": request, "request": codec.request_name(request),
                                   "reply": reply, "action": verdict.why or fault.kind, "opaque": opaque,
                                   **({"delay": round(verdict.delay, 6)} if verdict.delay else {})})
        return verdict

    def remove_toxic(self, src: str, dst: str, kind: str | None = None) -> None:
        self.links.remove_toxic(src, dst, kind)
        self._notify()

    # --- nodes ----------------------------------------------------------------------------------

    def _track(self, node: str, end) -> None:
        self._endpoints.setdefault(node, []).append(end)

    def _untrack(self, node: str, end) -> None:
        ends = self._endpoints.get(node)
        if ends and end in ends:
            ends.remove(end)

    def listening(self, node: str, address: str) -> None:
        """`node` listens at `address` from now on. `listen` says so itself; the lab says so for
        a node that listens elsewhere (one run as its own process, lab/run/cluster.py), so links
        to it pass the network too."""
        self.node_at[address], self.address_of[node] = node, address
        self._listening_changed()

    def listens(self, node: str) -> bool:
        """Whether the node listens now: started, and neither killed nor stopped since."""
        address = self.address_of.get(node)
        return address is not None and self.node_at.get(address) == node

    def _listening_changed(self) -> None:
        """Who listens where has changed (`listening`, a kill, a listener closed)."""

    def close_node(self, node: str) -> None:
        """The network half of a kill, after the node's tasks are cancelled (or of a node run as
        its own process, once it has exited): its listeners close and every connection it had is
        reset."""
        for listener in self._listeners.pop(node, []):
            listener.close_now()
        for end in list(self._endpoints.get(node, [])):
            end.reset()
        self._endpoints.pop(node, None)
        address = self.address_of.get(node)
        if address is not None and self.node_at.pop(address, None) is not None:
            self._listening_changed()

    async def _wait_reachable(self, src: str, dst: str) -> None:
        # A SYN into a partition is never answered: the caller's connect timeout decides.
        while self.links.holds(src, dst) or self.links.holds(dst, src):
            await self.links_changed()


# --- simulated ----------------------------------------------------------------------------------

class _Planned(NamedTuple):
    """In a queue's size slot: the payload's due time, planned when it was sent (send_planned)."""
    due: float


class _SimEnd(trio.abc.Stream):
    """One end of an in-memory connection: what its peer sends to it, in order, as on TCP.

    It carries bytes (the trio Stream interface) or whole objects (`send_object`): a remoting
    layer that sends its commands as objects skips encoding and decoding them, which in a
    simulated run is a fifth of the work. An end with a receiver (`set_receiver`) hands each
    arrival to it at its due time, without waking a task: a simulated message then costs no
    scheduler pass of its own. Without one, arrivals wait for `receive_some`.

    The payload at the head of `_in_flight` is planned when it gets there — at once on an idle
    link, else when the one before it arrives — so a link that changes while payloads queue
    affects them. A delivered payload arrives at its due time by a timer (chaos/clock.py); a held
    one waits for the link to change (SimNetwork re-plans it then).

    But while every link is faultless and without jitter or loss, a payload's delay is fixed, and
    one sent behind others is planned as it is sent (`_plan_behind`), with the same due time it
    would get at the head: its timer then goes among the others due at the same instant in the
    order it was sent, whatever was in flight before it on its connection. (Planned at the head,
    a reply queued behind another went after every payload sent meanwhile to arrive at its
    instant: the same instant's records came in another order when the network aggregated idle
    traffic and the payload before it was not sent.) A link change puts them back to waiting
    for the head (`_unplan_behind`). With jitter the delay is drawn at the head, as ever: the
    draws keep their order, and different payloads meet at one instant only by the no-overtaking
    rule, on one connection."""

    carries_objects = True
    # (opaque, seconds until the renewed call is sent) -> renewed?; set by whoever reads this end
    call_renewer: Callable[[int, float], bool] | None = None
    # (opaque, the holder's call) -> restore or None: the reader's side of coast_peer_call
    call_coaster: Callable[[int, object], Callable[[int, float], None] | None] | None = None
    # Set by a NameServer reading this end: what its route answers would be (coast_queries)
    query_coaster: object | None = None

    def __init__(self, net: SimNetwork, local: str, remote: str):
        self.net, self.local, self.remote = net, local, remote
        self.remote_addr = ""
        self.peer: _SimEnd | None = None
        # (sent at, payload, its Size); payload None: EOF
        self._in_flight: deque[tuple[float, object, Size]] = deque()
        self._inbox: deque = deque()  # arrived, not yet received
        self._receiver: Callable[[object], None] | None = None
        self._on_end: Callable[[Exception | None], None] | None = None
        self._eof = False
        self._reader: trio.lowlevel.Task | None = None  # parked in receive_some
        self._last_delivery = -math.inf
        self._broken = False
        self._closed = False
        self._reply_faults: dict = {}  # shared by both ends: see Network._judged
        self.batch = None  # queries coasting on this connection (coast_queries), on both ends
        self.watchers: dict[Callable[[], None], None] = {}  # told once when it closes (watch_peer)
        # The timers of the payloads planned, the first ones of _in_flight: the head's, once it is
        # planned, and those planned behind it (_plan_behind)
        self._timers: deque[list] = deque()

    # --- objects ------------------------------------------------------------------------------

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        """A timer on the network's clock, for whoever reads this end (a remoting client's call
        timeouts): what a stream carrying objects offers besides them."""
        self.net.call_at(when, callback)

    def renew_peer_call(self, opaque: int) -> float | None:
        """A call of the peer's that this end holds (a long-polled pull) is due an empty answer,
        upon which the peer would send the same call again. On a network without faults, with
        nothing in flight either way, that round trip changes nothing but the time: the peer's
        reader (`call_renewer`, set by a remoting client) renews the call in place if it would
        call again. The round trip's time, two link latencies, when it did; None when the answer
        must really go."""
        peer = self.peer
        if (not self.net.aggregate or peer is None or peer.call_renewer is None or self._broken
                or self._closed or peer._broken or peer._closed or self._in_flight or peer._in_flight):
            return None
        links = self.net.links
        if links.requests.active or not links.faultless():
            return None
        round_trip = 2 * links.base_latency
        return round_trip if peer.call_renewer(opaque, round_trip / 2) else None

    def _quiet_peer(self) -> _SimEnd | None:
        """The peer, while nothing could make a call between the two go otherwise than planned:
        both ends open, no fault on any link, no request fault ever set (one might have dropped
        or rewritten a call). None otherwise."""
        peer = self.peer
        if (not self.net.aggregate or peer is None or self._broken or self._closed or peer._broken
                or peer._closed or self.net.links.requests.ever or not self.net.links.faultless()):
            return None
        return peer

    def coast_peer_call(self, opaque: int, held,
                        stop_coasting: Callable[[], None]) -> Callable[[int, float], None] | None:
        """Just renewed (renew_peer_call), the call `opaque` may coast: be renewed every period
        from now on with no work at all, as long as nothing could make a renewal go otherwise.
        The holder counts the renewals when it next looks. What ends coasting, each told once:
        - a link change anywhere (a fault, a freeze, a heal): `stop_coasting()`, the holder's
          for all its calls;
        - a change on the caller's side (the queue taken away, a route changed): the caller
          calls `held.wake()` (`held`, the holder's object for this call);
        - the holder answering the call (data came) or the connection closing.
        The holder then calls what this returns, `restore(opaque, resent_at)`: the caller's
        timeout counts again from when the last renewed call would have been sent. None: not
        coasting.
        Only while no request fault was ever set: one might have dropped a renewed call."""
        peer = self._quiet_peer()
        if peer is None or peer.call_coaster is None:
            return None
        restore = peer.call_coaster(opaque, held)
        if restore is not None:
            self.net._coasting[stop_coasting] = None
        return restore

    def coast_queries(self, batch) -> object | None:
        """A run of calls, each sent from the reply of the one before (a route poll round), may
        be simulated in aggregate by `batch` when nothing could make one go otherwise: both ends
        open with nothing in flight, no fault on any link, no loss, no request fault ever set.
        The batch owns the connection's traffic until it ends or `batch.interrupt()` is called —
        by the next link change, a close or reset of either end, or anything else sent on it —
        and then puts what was in flight back on the wire (send_planned). The peer's
        `query_coaster`, or None when the batch may not start."""
        peer = self._quiet_peer()
        if (peer is None or peer.query_coaster is None or self.net.links.base_loss or self.batch is not None
                or self._in_flight or peer._in_flight):
            return None
        self.batch = peer.batch = batch
        self.net._coasting[batch.interrupt] = None
        return peer.query_coaster

    def watch_peer(self, interrupt: Callable[[], None]) -> object | None:
        """For calls simulated in aggregate beside the connection's other traffic (a coasting
        rebalance round): the peer's `query_coaster`, while nothing could make a call go otherwise
        — both ends open, no fault on any link, no loss, no request fault ever set — and then
        `interrupt` is called once at the next link change or when either end closes or resets
        (`unwatch` to stop that). None: the calls must really go."""
        peer = self._quiet_peer()
        if peer is None or peer.query_coaster is None or self.net.links.base_loss:
            return None
        self.watchers[interrupt] = None
        self.net._coasting[interrupt] = None
        return peer.query_coaster

    def unwatch(self, interrupt: Callable[[], None]) -> None:
        self.watchers.pop(interrupt, None)
        self.net._coasting.pop(interrupt, None)

    def _tell_watchers(self) -> None:
        for end in (self, self.peer):
            if end is not None:
                if end.batch is not None:
                    end.batch.interrupt()
                for interrupt in list(end.watchers):
                    interrupt()

    def end_coasting(self, delivered_here: float, delivered_there: float) -> None:
        """The batch lets go; the last of its payloads was due here at `delivered_here`, at the
        peer at `delivered_there` (-inf: none), which later ones may not overtake."""
        if self.batch is not None:
            self.net._coasting.pop(self.batch.interrupt, None)
        self.batch = None
        self._last_delivery = max(self._last_delivery, delivered_here)
        if self.peer is not None:
            self.peer.batch = None
            self.peer._last_delivery = max(self.peer._last_delivery, delivered_there)

    def base_delay(self) -> float:
        """A payload's delay on a faultless link, jitter aside (as renew_peer_call takes it)."""
        latency = self.net.links.base_latency
        return latency if latency > 0.0 else 0.0

    def send_planned(self, payload: object, sent_at: float, due: float) -> None:
        """`payload`, sent from this end at `sent_at` (past) on a faultless link and due at the
        peer at `due`, as it was planned then: what a coasting batch had in flight. It takes its
        place in the queue among what was sent after it, and whatever comes later (an EOF too)
        stays behind it."""
        peer = self.peer
        if peer is None or peer._broken or peer._closed:
            return
        queue = peer._in_flight
        at = len(queue)
        while at and queue[at - 1][0] > sent_at:
            at -= 1
        queue.insert(at, (sent_at, payload, _Planned(due)))
        timers = peer._timers
        if at < len(timers):  # it goes before payloads planned: they wait for the head again
            while len(timers) > at:
                Timers.cancel(timers.pop())
            # (none planned: what was before the head has arrived)
            peer._last_delivery = timers[-1][0] if timers else -math.inf
        if at == 0:
            peer._plan_head()

    def delivers_everything(self) -> bool:
        """Whether what is sent on this end reaches the peer, in order, unless the connection ends
        first, as TCP promises: until a request fault (which drops or rewrites single commands)
        is first set on the network. False too while the network does not aggregate: offsets
        are then resent as RocketMQ resends them, changed or not."""
        return self.net.aggregate and not self.net.links.requests.ever

    def send_object(self, payload: object, size: Size) -> None:
        """Queue `payload` to the peer; `size` (bytes, or a function of the payload giving them,
        asked only when a bandwidth toxic needs it) stands for what it would take on the wire."""
        if self.batch is not None:
            self.batch.interrupt()  # what it has in flight goes first
        if self._closed:
            raise trio.ClosedResourceError("connection closed")
        peer = self.peer
        if self._broken or peer is None or peer._closed:
            raise trio.BrokenResourceError("connection reset")
        if self.net.links.requests.active and not isinstance(payload, bytes):
            self._send_judged(peer, payload, size)
        else:
            peer._enqueue(payload, size)

    def _send_judged(self, peer: _SimEnd, cmd, size: Size) -> None:
        """A command past the request faults: dropped, answered in the peer's stead, delayed or
        sent twice."""
        verdict = self.net._judged(self.local, self.remote, cmd.code, cmd.flag, cmd.opaque, self._reply_faults)
        if verdict.action == "answer":
            try:
                peer.send_object(self.net.codec.answer(cmd, verdict.fault.answer_code(), verdict.fault.remark or None), 64)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the connection is going: no answer to give
        elif verdict.action == "rewrite":
            peer._enqueue(self.net.codec.rewrite(cmd, verdict.fault.keys), size)
        elif verdict.action == "deliver":
            for _ in range(verdict.copies):
                peer._enqueue(cmd, size, verdict.delay)

    def set_receiver(self, on_object: Callable[[object], None],
                     on_end: Callable[[Exception | None], None]) -> None:
        """From now on every arrival goes to `on_object` (what arrived before, at once), and the
        end of the connection to `on_end`: None for the peer's close, an exception for a reset.
        They run in trio's loop, not in a task: they may move data, set events and reschedule,
        never block. One that raises costs this connection (it is reset), not the run."""
        self._receiver, self._on_end = on_object, on_end
        while self._inbox and self._receiver is not None:
            self._deliver(self._inbox.popleft())
        if self._broken or self._eof or self._closed:
            self._signal_end()

    def _deliver(self, payload: object) -> None:
        try:
            self._receiver(payload)
        except Exception:
            log.exception("receiver on %s from %s failed; resetting the connection", self.local, self.remote)
            self.reset()

    def _signal_end(self) -> None:
        on_end, self._on_end, self._receiver = self._on_end, None, None
        if on_end is not None:
            if self._closed:
                on_end(trio.ClosedResourceError("connection closed"))
            else:
                on_end(trio.BrokenResourceError("connection reset") if self._broken else None)

    # --- bytes: the trio Stream interface ----------------------------------------------------------

    async def send_all(self, data) -> None:
        # No schedule point unless cancelled: the bytes only join a queue, and every sender next
        # waits for a reply or a timer anyway — a yield here would cost a scheduler pass per frame.
        await trio.lowlevel.checkpoint_if_cancelled()
        if data:
            data = bytes(data)
            self.send_object(data, len(data))
        elif self._closed:
            raise trio.ClosedResourceError("connection closed")

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self._inbox:
            if self._closed:
                raise trio.ClosedResourceError("connection closed")
            if self._broken:
                raise trio.BrokenResourceError("connection reset")
            if self._eof:
                return b""
            if self._reader is not None:
                raise trio.BusyResourceError("another task is receiving on this connection")
            self._reader = trio.lowlevel.current_task()

            def abort(_):
                self._reader = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        if self._closed:
            raise trio.ClosedResourceError("connection closed")
        inbox = self._inbox
        data = inbox.popleft() if len(inbox) == 1 else b"".join([inbox.popleft() for _ in range(len(inbox))])
        if not isinstance(data, bytes):
            raise TypeError(f"receive_some on a connection carrying {type(data).__name__} objects")
        if max_bytes is not None and len(data) > max_bytes:
            inbox.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        return data

    # --- the network's side: payloads in flight to this end ----------------------------------------

    def _enqueue(self, payload: object, size: Size = 0, late: float = 0.0) -> None:
        in_flight = self._in_flight
        sent_at = self.net.now() + late
        in_flight.append((sent_at, payload, size))
        if len(in_flight) == 1:
            self._plan_head()
        elif len(self._timers) == len(in_flight) - 1 and payload is not None:
            self._plan_behind(sent_at)

    def _plan_behind(self, sent_at: float) -> None:
        """The payload just queued behind planned ones, planned now if its delay is fixed: every
        link faultless, no jitter, no loss (no draw of the network's RNG). Its due time is the one
        the head would give it."""
        net = self.net
        links = net.links
        if links.base_jitter or links.base_loss or self._broken or self._closed or not links.faultless():
            return
        delay = links.base_latency
        due = sent_at + (delay if delay > 0.0 else 0.0)
        if due < self._last_delivery:
            due = self._last_delivery
        self._last_delivery = due
        self._timers.append(net.call_at(due, self._arrive))
        if len(self._timers) == 2:
            net._planned_behind[self] = None

    def _unplan_behind(self) -> None:
        """A link changed: payloads planned behind the head wait for it again, to be planned by
        the link as it is when they get there."""
        timers = self._timers
        while len(timers) > 1:
            Timers.cancel(timers.pop())
        if timers:
            self._last_delivery = timers[0][0]

    def _plan_head(self) -> None:
        if self._broken or self._closed or not self._in_flight:
            return
        sent_at, payload, size = self._in_flight[0]
        net = self.net
        if type(size) is _Planned:  # planned when it was sent (send_planned)
            due, transmit = size.due, 0.0
        else:
            delay = net.links.healthy_delay(net.rng) if payload is not None else None
            if delay is None:  # EOF, or a link with a fault
                if payload is None:  # EOF: right behind the last payload
                    self._in_flight.popleft()
                    self._eof = True
                    self._wake()
                    self._signal_end()
                    return
                nbytes = size if type(size) is int else functools.partial(size, payload)
                plan = net.links.plan(self.remote, self.local, nbytes, net.rng)
                if plan.action == "hold":
                    net._held.append(self)
                    return
                if plan.action == "reset":
                    self.reset()
                    return
                delay, transmit = plan.delay, plan.transmit
            else:
                transmit = 0.0
            due = sent_at + delay
        if due < self._last_delivery:  # no overtaking: TCP delivers in order
            due = self._last_delivery
        self._last_delivery = due = due + transmit
        self._timers.append(net.call_at(due, self._arrive))

    def _arrive(self) -> None:
        if self._broken or self._closed:
            return
        self._timers.popleft()
        payload = self._in_flight.popleft()[1]
        if self._receiver is not None:
            self._deliver(payload)
        else:
            self._inbox.append(payload)
            self._wake()
        if self._in_flight and not self._timers:  # (a coast ending in the delivery may have planned it)
            self._plan_head()

    def _wake(self) -> None:
        if self._reader is not None:
            task, self._reader = self._reader, None
            trio.lowlevel.reschedule(task)

    def reset(self) -> None:
        """Tear down both ends, as an RST would."""
        self._tell_watchers()
        for end in (self, self.peer):
            if end is not None and not end._broken:
                end._broken = True
                end._in_flight.clear()
                end._timers.clear()  # (they find the end broken)
                end.net._planned_behind.pop(end, None)
                end._wake()
                end.net._untrack(end.local, end)
                end._signal_end()

    async def aclose(self) -> None:
        self._tell_watchers()
        if not self._closed:
            self._closed = True
            self._in_flight.clear()
            self._timers.clear()  # (they find the end closed)
            self.net._planned_behind.pop(self, None)
            self._wake()
            self._signal_end()
            self.net._untrack(self.local, self)
            if self.peer is not None and not self.peer._broken:
                self.peer._enqueue(None)  # the peer reads EOF after what is in flight
        await trio.lowlevel.checkpoint()


class _SimListener(trio.abc.Listener):
    def __init__(self, address: str):
        self.address = address
        self.closed = False  # nothing listens here any more: connects are refused
        self._send, self._receive = trio.open_memory_channel(math.inf)

    async def accept(self) -> _SimEnd:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise trio.ClosedResourceError("listener closed") from None

    def close_now(self) -> None:
        self.closed = True
        self._send.close()

    async def aclose(self) -> None:
        self.close_now()
        await trio.lowlevel.checkpoint()


class SimNetwork(Network):
    def __init__(self, links: Links | None = None, *, seed: int = 0, next_port: int = 30000,
                 codec: WireCodec | None = None, aggregate: bool = True):
        """Made inside trio: it runs on that run's clock and timers. `aggregate`: see Network."""
        super().__init__(links, seed=seed, codec=codec, aggregate=aggregate)
        self._listening: dict[str, _SimListener] = {}
        self._next_port = next_port
        self._held: list[_SimEnd] = []  # ends whose next chunk waits for the link to change
        self._planned_behind: dict[_SimEnd, None] = {}  # ends that may have payloads planned behind the head
        # The clock's own methods, as these run for every payload (trio.current_time() alone
        # costs three calls).
        self.call_at: Callable[[float, Callable[[], None]], object] = timer_source()
        self.now: Callable[[], float] = trio.lowlevel.current_clock().current_time

    def _notify(self) -> None:
        super()._notify()
        planned, self._planned_behind = self._planned_behind, {}
        for end in planned:
            end._unplan_behind()
        held, self._held = self._held, []
        for end in held:
            end._plan_head()

    async def listen(self, node: str, port: int = 0) -> tuple[trio.abc.Listener, str]:
        if not port:
            port, self._next_port = self._next_port, self._next_port + 1
        address = f"127.0.0.1:{port}"
        if address in self._listening and not self._listening[address].closed:
            raise OSError(errno.EADDRINUSE, f"address {address} in use")
        listener = _SimListener(address)
        self._listening[address] = listener
        self._listeners.setdefault(node, []).append(listener)
        self.listening(node, address)
        await trio.lowlevel.checkpoint()
        return listener, address

    async def connect(self, src: str, address: str) -> _SimEnd:
        listener = self._listening.get(address)
        dst = self.node_at.get(address, address)
        await self._wait_reachable(src, dst)
        plan = self.links.plan(src, dst, 0, self.rng)
        await trio.sleep(2 * plan.delay)  # the handshake's round trip
        if plan.action == "reset":
            raise ConnectionResetError(errno.ECONNRESET, f"connection to {address} reset")
        if listener is None or listener.closed:
            raise Unreachable(errno.ECONNREFUSED, f"connection to {address} refused")
        client, server = _SimEnd(self, src, dst), _SimEnd(self, dst, src)
        client.peer, server.peer = server, client
        server._reply_faults = client._reply_faults
        client.remote_addr, server.remote_addr = address, f"{src}"
        self._track(src, client)
        self._track(dst, server)
        listener._send.send_nowait(server)
        return client


# --- real sockets -------------------------------------------------------------------------------

class _RelayedConnection:
    """One connection through a link relay: two sockets and the pumps between them."""

    def __init__(self, a: trio.SocketStream, b: trio.SocketStream):
        self.a, self.b = a, b
        self.scope = trio.CancelScope()

    def reset(self) -> None:
        self.scope.cancel()


class TcpNetwork(Network):
    RECEIVE_SIZE = 65536

    def __init__(self, nursery: trio.Nursery, links: Links | None = None, *, seed: int = 0,
                 host: str = "127.0.0.1", codec: WireCodec | None = None, accept_loop: AcceptLoop | None = None):
        super().__init__(links, seed=seed, codec=codec)
        self.nursery = nursery
        self.host = host
        self._relays: dict[tuple[str, str], int] = {}  # link -> relay port
        # The relays' accept loop, given by the lab (nameserver.tcp's: it outlasts a full descriptor
        # table, with a bounded log); a network that relays nothing needs none.
        self.accept_loop = accept_loop
        # Given by the lab for links it wants to see frame by frame (an application's, lab/apps): for
        # a connection on the link src -> dst, a LinkWatch or None. Its links are always cut into
        # frames, and the watch sees each one (and may rewrite it) as it leaves and as it arrives.
        self.link_watch: Callable[[str, str], LinkWatch | None] | None = None
        # A relay listens only while its dst does (_Relay): each change of who listens tells them.
        self._relay_of: dict[tuple[str, str], _Relay] = {}

    def _listening_changed(self) -> None:
        for relay in self._relay_of.values():
            relay.follow()

    def _stopped_listening(self, node: str, listener: trio.SocketListener) -> None:
        """The node closed its listener (a graceful stop, before the node's exit closes it in
        close_node): from now on it is down, and its relays refuse."""
        if any(closable.listener is listener for closable in self._listeners.get(node, ())):
            address = self.address_of.get(node)
            if address is not None and self.node_at.get(address) == node:
                self.node_at.pop(address)
                self._listening_changed()

    async def listen(self, node: str, port: int = 0) -> tuple[trio.abc.Listener, str]:
        listeners = await trio.open_tcp_listeners(port, host=self.host, backlog=1024)
        address = "%s:%d" % listeners[0].socket.getsockname()[:2]
        self._listeners.setdefault(node, []).extend(_ClosableTcpListener(lst) for lst in listeners)
        self.listening(node, address)
        return _FreezableListener(self, node, listeners[0]), address

    async def connect(self, src: str, address: str) -> trio.SocketStream:
        host, _, port = address.rpartition(":")
        dst = self.node_at.get(address)
        if dst is None:  # not a lab node: dial it directly
            return await trio.open_tcp_stream(host, int(port))
        await self._wait_reachable(src, dst)
        return await trio.open_tcp_stream(self.host, await self.relay_port(src, dst))

    async def relay_port(self, src: str, dst: str) -> int:
        """The port of the relay for the link src -> dst, started on first use; the link's for the
        whole run, whatever becomes of dst. A node run as its own process (lab/run/child.py) dials
        its peers at these ports, so its links pass the relays too; so does an app (lab/apps)."""
        port = self._relays.get((src, dst))
        if port is None:
            port = self._relays[(src, dst)] = await self.nursery.start(self._relay, src, dst)
        return port

    async def _relay(self, src: str, dst: str, task_status=trio.TASK_STATUS_IGNORED) -> None:
        relay = _Relay(self, src, dst, _bind_port(self.host))
        self._relay_of[(src, dst)] = relay
        try:
            relay.follow()
            task_status.started(relay.port)
            await relay.run(functools.partial(self.nursery.start_soon, self._relay_connection, src, dst))
        finally:
            self._relay_of.pop((src, dst), None)
            relay.socket.close()

    async def _relay_connection(self, src: str, dst: str, inbound: trio.SocketStream) -> None:
        address = self.address_of.get(dst)
        outbound = None
        try:
            if address is not None and self.node_at.get(address) == dst:
                host, _, port = address.rpartition(":")
                outbound = await trio.open_tcp_stream(host, int(port))
        except OSError:
            pass
        finally:
            if outbound is None:  # refused, or cancelled while dialling: the dialler sees the close
                await trio.aclose_forcefully(inbound)
        if outbound is None:
            return
        conn = _RelayedConnection(inbound, outbound)
        self._track(src, conn)
        self._track(dst, conn)
        watch = self.link_watch(src, dst) if self.link_watch is not None else None
        # A channel per direction, bounded: it pushes back on the sender as a full TCP window
        # would. Each direction's reader may also answer a request in the peer's stead, on the
        # other direction's channel, so the answer goes out between whole frames.
        to_dst, from_src = trio.open_memory_channel(64)
        to_src, from_dst = trio.open_memory_channel(64)
        reply_faults: dict = {}
        try:
            with conn.scope:
                async with trio.open_nursery() as pumps:
                    done = pumps.cancel_scope
                    pumps.start_soon(self._read, inbound, src, dst, to_dst, to_src.clone(), reply_faults, watch)
                    pumps.start_soon(self._read, outbound, dst, src, to_src, to_dst.clone(), reply_faults, watch)
                    pumps.start_soon(self._write, from_src, outbound, src, dst, done, watch)
                    pumps.start_soon(self._write, from_dst, inbound, dst, src, done, watch)
        finally:
            self._untrack(src, conn)
            self._untrack(dst, conn)
            if watch is not None:
                watch.closed()
            await trio.aclose_forcefully(inbound)
            await trio.aclose_forcefully(outbound)

    async def _read(self, source, src: str, dst: str, send, answer, reply_faults: dict,
                    watch: LinkWatch | None = None) -> None:
        """Chunks from src, on to dst's writer. While request faults are on, whole frames, each
        judged: dropped, delayed, sent twice, or answered on `answer` (back to src). A watched
        connection is always cut: the watch sees each frame as it leaves (and may rewrite it),
        and the frame goes with its bytes to the writer, which shows it again as it arrives."""
        cutter = self.codec.cutter() if self.codec is not None else None
        async with send, answer:
            while True:
                try:
                    data = await source.receive_some(self.RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    if watch is not None:
                        watch.ended(src, dst)
                    await send.send(None)  # the writer ends the connection once what came before is out
                    return
                now = trio.current_time()
                faults = bool(self.links.requests)
                for piece in cutter.feed(data, cut=faults or watch is not None) if cutter else (data,):
                    if isinstance(piece, bytes):
                        await send.send((now, piece, 0.0, None))
                        continue
                    seen = None
                    if watch is not None:
                        piece = seen = watch.sent(src, dst, piece)
                    verdict = self._judged(src, dst, piece.code, piece.flag, piece.opaque, reply_faults) \
                        if faults or watch is None else PASS
                    if verdict.action == "answer":
                        try:
                            reply = self.codec.answer_frame(piece, verdict.fault.answer_code(), verdict.fault.remark or None)
                            frame = self.codec.cutter().feed(reply, cut=True)[0] if watch is not None else None
                            await answer.send((now, reply, 0.0, frame))
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            pass  # the other direction has ended: no answer to give
                    elif verdict.action == "rewrite":
                        await send.send((now, self.codec.rewrite_frame(piece, verdict.fault.keys), 0.0, seen))
                    elif verdict.action == "deliver":
                        for _ in range(verdict.copies):
                            await send.send((now, piece.data, verdict.delay, seen))

    async def _write(self, receive, sink, src: str, dst: str, done: trio.CancelScope,
                     watch: LinkWatch | None = None) -> None:
        """Chunks to dst as the link src -> dst plans them: held, late, reset."""
        last = -math.inf
        async for item in receive:
            if item is None:
                break
            sent_at, data, late, frame = item
            while True:
                plan = self.links.plan(src, dst, len(data), self.rng)
                if plan.action != "hold":
                    break
                await self.links_changed()
            if plan.action == "reset":
                break
            last = max(last, sent_at + late + plan.delay) + plan.transmit
            if last > trio.current_time():
                await trio.sleep_until(last)
            if frame is not None:  # told before the write: dst may answer, or close, before send_all returns
                watch.arrived(src, dst, frame)
            try:
                await sink.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                break
        done.cancel()  # EOF or reset on one side ends the whole relayed connection


def _bind_port(host: str, port: int = 0) -> trio.socket.SocketType:
    """A TCP socket bound to host:port, not listening yet; port 0: a free port of its own. Always
    bound by number, as the kernel keeps a port given by number through a shutdown (_Relay), not one
    it chose: a first socket has the kernel choose, a second binds that number beside it (both
    SO_REUSEADDR, neither listening), then the first goes."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if port == 0:
        with _bound(family, host, 0) as chooser:
            return trio.socket.from_stdlib_socket(_bound(family, host, chooser.getsockname()[1]))
    return trio.socket.from_stdlib_socket(_bound(family, host, port))


def _bound(family: int, host: str, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


class _Relay:
    """The relay of one link src -> dst: a loopback port of its own for the whole run, handed out to
    whoever dials dst over the link (apps, nodes run as processes), and the task that serves it.

    The port listens while dst does. While dst is down (killed, stopped, not started yet) the
    socket stays bound to the port but does not listen: a connect there is refused at once, as at a
    dead process's port, and the kernel gives the port to nobody else meanwhile. When dst listens
    again, so does the port. Should someone have taken it in between (a socket with SO_REUSEADDR
    may bind a port nobody listens on, and listen there), the relay says so once, retries with
    backoff while dst is up, and says when it has the port back. A frozen dst is up: its port
    accepts, as a SIGSTOPped process's does."""

    RETRY_FIRST = 0.05  # s; doubled after each failed attempt, up to RETRY_MAX
    RETRY_MAX = 2.0
    BACKLOG = 1024

    def __init__(self, network: TcpNetwork, src: str, dst: str, sock: trio.socket.SocketType):
        self.network, self.src, self.dst, self.socket = network, src, dst, sock
        self.port: int = sock.getsockname()[1]
        self.where = f"relay {src} -> {dst}"
        self.listening = False
        # While the port cannot listen again: the last error, the failed attempts and when the
        # first failed (trio's clock); all None/0 once it listens.
        self.failure: OSError | None = None
        self.attempts = 0
        self.failing_since: float | None = None
        self._accepting: trio.CancelScope | None = None
        self._changed = trio.Event()

    def follow(self) -> None:
        """Listen, or stop, as dst does now. Stopping is at once: the next connect is refused."""
        if self.network.listens(self.dst):
            if not self.listening and self.failure is None:  # a failing port retries on its own time
                self._listen()
        elif self.listening:
            self.listening = False
            if self._accepting is not None:
                self._accepting.cancel()
            try:
                # Linux: a listening socket shut down stops listening and keeps its port; what
                # waited in its backlog is reset, as a dead process's queue is.
                self.socket.shutdown(trio.socket.SHUT_RD)
            except OSError:  # elsewhere it may refuse: then the socket goes, and _listen binds anew
                self.socket.close()
        elif self.failure is not None:  # down again before it had its port back: nothing to retry
            self._failure_over(listening=False)
        self._changed.set()

    def _listen(self) -> None:
        try:
            if self.socket.fileno() == -1:
                self.socket = _bind_port(self.network.host, self.port)
            self.socket.listen(self.BACKLOG)
        except OSError as e:
            self.attempts += 1
            if self.failure is None:
                self.failing_since = trio.current_time()
                log.error("%s: port %d cannot listen (%s); retrying until it is free",
                          self.where, self.port, e)
            self.failure = e
            return
        self.listening = True
        if self.failure is not None:
            self._failure_over(listening=True)

    def _failure_over(self, *, listening: bool) -> None:
        took = trio.current_time() - self.failing_since
        if listening:
            log.warning("%s: port %d listens again after %d failed attempts (%.1f s)",
                        self.where, self.port, self.attempts, took)
        else:
            log.warning("%s: %s is down again; port %d stopped retrying after %d failed attempts (%.1f s)",
                        self.where, self.dst, self.port, self.attempts, took)
        self.failure, self.attempts, self.failing_since = None, 0, None

    async def run(self, serve: Callable[[trio.abc.Stream], object]) -> None:
        """Serve the port for ever: accept while listening, retry while the port is taken, wait
        for dst otherwise."""
        while True:
            if self.listening:
                with trio.CancelScope() as self._accepting:
                    try:
                        await self.network.accept_loop(trio.SocketListener(self.socket), serve, self.where)
                    except (OSError, trio.ClosedResourceError):
                        if not self._accepting.cancel_called:
                            raise
                        # stopped between a wake-up and its accept (EINVAL on a shut-down socket)
                self._accepting = None
            elif self.failure is not None:
                await trio.sleep(min(self.RETRY_FIRST * 2 ** (self.attempts - 1), self.RETRY_MAX))
                if self.failure is not None and self.network.listens(self.dst):
                    self._listen()
            else:
                self._changed = trio.Event()
                await self._changed.wait()


class _ClosableTcpListener:
    def __init__(self, listener: trio.SocketListener):
        self.listener = listener

    def close_now(self) -> None:
        self.listener.socket.close()


class _FreezableListener(trio.abc.Listener):
    """A node's listener whose connections stop while the node is frozen.

    Links between lab nodes pass relays, which hold a frozen node's bytes; a client from outside
    the lab (a real RocketMQ client, say) dials the node's port directly, so its connection is held
    here instead: as with a SIGSTOPped process, the kernel accepts and buffers, nothing is read or
    answered until the node is unfrozen."""

    def __init__(self, network: Network, node: str, listener: trio.SocketListener):
        self.network, self.node, self.listener = network, node, listener

    async def accept(self) -> trio.abc.Stream:
        return _FreezableStream(self.network, self.node, await self.listener.accept())

    async def aclose(self) -> None:
        self.network._stopped_listening(self.node, self.listener)
        await self.listener.aclose()


class _FreezableStream(trio.abc.Stream):
    def __init__(self, network: Network, node: str, stream: trio.SocketStream):
        self.network, self.node, self.stream = network, node, stream
        self.socket = stream.socket

    async def _while_frozen(self) -> None:
        while self.node in self.network.links.frozen:
            await self.network.links_changed()

    async def send_all(self, data) -> None:
        await self._while_frozen()
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await self._while_frozen()
        data = await self.stream.receive_some(max_bytes)
        await self._while_frozen()  # read just before the freeze: processed after it, as a stopped process would
        return data

    async def aclose(self) -> None:
        await self.stream.aclose()
