"""Exercise 12: the learner's BrokerOuterAPI in every broker of the lab.

A broker registers with every NameServer every 30 s and at each topic change, and unregisters when
it shuts down gracefully. The learner writes those calls: at once to every NameServer, each bounded
by registerBrokerTimeoutMills, a failure costing only its own NameServer; unregistration one
NameServer after the other, 3 s each. `adapt` puts the class where a broker builds its outer API
(`lab.broker.server:BrokerOuterAPI`); the lab reports each call (`broker.register`,
`broker.unregister`) from the channels it hands the learner, so the TUI and the event log show
them whatever the learner's code emits.

Unit tests run the learner's coroutines under trio's MockClock against fake NameServers (answer,
refuse, hang, fail): time is virtual and exact, so "at once" and "one timeout, not two" are
assertions, not hopes.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from lab.broker.outer_api import BrokerIdentity, RegisterBrokerResult as BrokerRegisterResult
from lab.remoting.channels import LAB_SERIALIZE_TYPE
from lab.run.topology import NAMESERVER_BASE_PORT
from nameserver.bodies import RegisterBrokerBody
from nameserver.client import RemotingError, RemotingTimeoutError
from nameserver.protocol import RequestCode, ResponseCode, crc32
from nameserver.routes import DataVersion, TopicConfig

from . import generated
from .override import ContractError
from .warmups import needs

UNREGISTER_TIMEOUT = 3.0  # 4.9.8's unregisterBroker: 3 s per NameServer
KINDS = {RequestCode.REGISTER_BROKER: "broker.register", RequestCode.UNREGISTER_BROKER: "broker.unregister"}


class ReportingChannels:
    """The broker's ChannelTable as the learner sees it: `invoke` only, each call one event."""

    def __init__(self, node, channels):
        self.node, self._channels = node, channels
        self.trigger: str | None = None
        self.registration: dict | None = None  # the latest register_broker_all's record (Registrations)

    async def invoke(self, address, command, timeout):
        kind = KINDS.get(command.code)
        fields = {"trigger": self.trigger} if kind == "broker.register" else {}
        start = trio.current_time()
        seen = None
        if kind == "broker.register" and self.registration is not None:
            seen = {"ns": address, "start": start, "end": None, "ok": False}
            self.registration["calls"].append(seen)
        try:
            reply = await self._channels.invoke(address, command, timeout)
        except RemotingError as e:
            if seen is not None:
                seen["end"] = trio.current_time()
            if kind:
                self.node.emit(kind, ns=address, ok=False, error=str(e),
                               latency=round(trio.current_time() - start, 6), **fields)
            raise
        if seen is not None:
            seen["end"], seen["ok"] = trio.current_time(), reply.code == ResponseCode.SUCCESS
        if kind:
            self.node.emit(kind, ns=address, ok=reply.code == ResponseCode.SUCCESS, code=reply.code,
                           latency=round(trio.current_time() - start, 6), **fields)
        return reply


class Registrations:
    """What the brokers' registrations did in one run, for the verdict on "at once": per
    register_broker_all call, when it began and when each NameServer's call began and ended."""

    def __init__(self):
        self.calls: list[dict] = []  # broker, start, calls: [{ns, start, end, ok}]

    def begin(self, broker: str) -> dict:
        call = {"broker": broker, "start": trio.current_time(), "calls": []}
        self.calls.append(call)
        return call


OBSERVED = Registrations()  # the current run's (check.py starts a new one per run)
AT_ONCE = 0.05  # s of virtual time: calls that began later than this after their registration waited


def _ns(address: str) -> str:
    """ns-N for a NameServer's address (the lab gives ns-N port 9876 + N), else the address."""
    port = address.rpartition(":")[2]
    return f"ns-{int(port) - NAMESERVER_BASE_PORT}" if port.isdigit() and int(port) >= NAMESERVER_BASE_PORT else address


def judge_at_once(registrations: Registrations, nemesis: dict | None = None) -> tuple[bool | None, str]:
    """A slow, silent or failing NameServer holds back no other NameServer's registration: in each
    registration where a NameServer's call failed or took over a second, every other NameServer's
    call began with the registration. None: nothing to judge (no such registration)."""
    fault = f" ({nemesis['summary']})" if nemesis else ""
    judged, held = 0, []
    for reg in registrations.calls:
        faulty = [c for c in reg["calls"] if not c["ok"] or c["end"] is None or c["end"] - c["start"] > 1.0]
        others = [c for c in reg["calls"] if c not in faulty]
        if not faulty or not others:
            continue
        judged += 1
        waited = [c for c in others if c["start"] - reg["start"] > AT_ONCE]
        if waited:
            held.append((reg, waited))
    if not judged:
        return None, f"no registration met a slow or failing NameServer beside a healthy one{fault}: nothing to judge"
    if held:
        reg, waited = held[0]
        c = waited[0]
        return False, (f"in {len(held)} of {judged} registrations that met a slow or failing NameServer{fault}, a "
                       f"healthy one heard it late: e.g. {reg['broker']}'s at t={reg['start']:.1f}s reached {_ns(c['ns'])} "
                       f"{c['start'] - reg['start']:.1f}s after it began (one after the other, it waited for the "
                       f"slow one's answer or timeout); register with every NameServer at once")
    return True, (f"in all {judged} registrations that met a slow or failing NameServer{fault}, every healthy "
                  f"NameServer's call began at once")


def judges(scenario: str, drawn: dict | None) -> tuple:
    """The verdict on "at once" for a run of register-everywhere (a fresh record of registrations)."""
    global OBSERVED
    if scenario != "register-everywhere":
        return ()
    OBSERVED = Registrations()
    observed = OBSERVED
    return (lambda: ("a slow NameServer holds back no other", *judge_at_once(observed, drawn)),)


def nemesis(seed: int) -> dict:
    """The fault of `register-everywhere.toml`, drawn from the seed: which NameServer, what it does
    to registrations, from when, for how long."""
    import random
    rng = random.Random(f"register-everywhere:{seed}")
    slow = rng.choice(("ns-0", "ns-1"))
    kind, does, toxic = ((
        ("late", "answers every registration 4 s late",
         'kind = "reply"\ncode = "REGISTER_BROKER"\ndelay = "4s"'),
        ("after-timeout", "answers every registration after the timeout",
         'kind = "reply"\ncode = "REGISTER_BROKER"\ndelay = "9s"'),
        ("lost", "never answers a registration",
         'kind = "drop-reply"\ncode = "REGISTER_BROKER"'),
        ("busy", "answers every registration SYSTEM_BUSY",
         'kind = "answer"\ncode = "REGISTER_BROKER"\nanswer = "SYSTEM_BUSY"'),
        ("blackhole", "swallows every packet", 'kind = "blackhole"'),
    ))[seed % 5]  # every kind twice over ten seeds
    at = rng.randint(35, 80)
    # A NameServer answering SYSTEM_BUSY in its own stead never takes the registration: longer than
    # ~60 s (a registration up to 30 s either side) and it expires every broker, a NameServer's
    # fault no broker can mend; the other faults let it keep them (or let clients leave it).
    end = min(at + (rng.randint(40, 55) if kind == "busy" else rng.randint(100, 150)), 230)
    return {"slow": slow, "other": "ns-1" if slow == "ns-0" else "ns-0", "kind": kind, "does": does,
            "toxic": toxic, "at": f"{at}s", "end": f"{end}s",
            "summary": f"{slow} {does} from t={at}s to t={end}s"}


def adapt(learner_cls: type, errors=None) -> type:
    class LearnersBrokerOuterAPI:
        def __init__(self, node, channels, namesrv_addrs):
            self.channels = ReportingChannels(node, channels)
            self.learner = learner_cls(self.channels, list(namesrv_addrs))

        async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout,
                                      trigger, same_body=None):  # the learner's encodes every time
            self.channels.trigger = trigger
            self.channels.registration = OBSERVED.begin(self.channels.node.name)
            result = await self.learner.register_broker_all(broker, topic_config_table, data_version,
                                                            compressed=compressed, timeout=timeout)
            if result is not None and not isinstance(result, BrokerRegisterResult):
                raise ContractError(f"register_broker_all() returned {result!r}: a BrokerRegisterResult or None")
            return result

        async def unregister_broker_all(self, broker):
            await self.learner.unregister_broker_all(broker)

    if errors is not None:
        LearnersBrokerOuterAPI.register_broker_all = errors.wrap_contract_async(LearnersBrokerOuterAPI.register_broker_all)
    return LearnersBrokerOuterAPI


# --- fake NameServers, in virtual time ---------------------------------------------------------------

class FakeNameServers:
    """channels.invoke against NameServers that each answer, refuse, hang or fail, as told."""

    ANSWER = 0.01  # s: an answering NameServer's round trip

    def __init__(self, behaviour: dict[str, str]):
        self.behaviour = behaviour  # address -> ok | refuse | hang | error
        self.calls: list[dict] = []  # address, code, header, body, timeout, start, end

    async def invoke(self, address, command, timeout):
        call = {"address": address, "code": command.code, "header": dict(command.ext_fields or {}),
                "body": command.body, "timeout": timeout, "start": trio.current_time(), "end": None}
        self.calls.append(call)
        try:
            how = self.behaviour[address]
            if how == "refuse":
                raise RemotingError(f"connect to {address} failed: connection refused")
            if how == "hang":
                await trio.sleep(timeout)
                raise RemotingTimeoutError(f"wait response on the channel <{address}> timeout, {timeout * 1000:g}(ms)")
            if how == "error":  # a failing NameServer answers first: taking the first reply is wrong
                await trio.sleep(self.ANSWER / 2)
                return command.response(ResponseCode.SYSTEM_ERROR, "the NameServer is busy")
            await trio.sleep(self.ANSWER)
            return command.response(ResponseCode.SUCCESS, ext_fields={"masterAddr": f"master-via-{address}",
                                                                      "haServerAddr": f"ha-via-{address}"})
        finally:
            call["end"] = trio.current_time()

    def to(self, code: int) -> list[dict]:
        return [c for c in self.calls if c["code"] == code]


BROKER = BrokerIdentity("DefaultCluster", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912")
TABLE = {f"Topic{i}": TopicConfig(f"Topic{i}", 8, 8, 6) for i in range(3)}
VERSION = DataVersion(1700000000000, 7)


def run(learner_cls, behaviour: dict[str, str], do):
    """`do(api)` under a MockClock that jumps whenever every task waits; (fake, what do returned,
    the virtual time it took)."""
    return _run_on(FakeNameServers(behaviour), learner_cls, list(behaviour), do)


def _run_on(fake, learner_cls, nameservers: list, do):
    api = learner_cls(fake, nameservers)
    outcome = {}

    async def main():
        outcome["value"] = await do(api)
        outcome["elapsed"] = trio.current_time()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return fake, outcome["value"], outcome["elapsed"]


def _register(timeout=6.0, compressed=False):
    return lambda api: api.register_broker_all(BROKER, TABLE, VERSION, compressed=compressed, timeout=timeout)


# --- unit tests: one rule each ----------------------------------------------------------------------

def test_registers_with_every_nameserver(BrokerOuterAPI):
    fake, result, _ = run(BrokerOuterAPI, {"ns-0": "ok", "ns-1": "ok", "ns-2": "ok"}, _register())
    got = sorted(c["address"] for c in fake.to(RequestCode.REGISTER_BROKER))
    assert got == ["ns-0", "ns-1", "ns-2"], f"one REGISTER_BROKER to every NameServer (got calls to {got})"
    assert isinstance(result, BrokerRegisterResult), f"the result of a NameServer that answered (got {result!r})"


def test_the_request_says_who_and_what(BrokerOuterAPI):
    fake, _, _ = run(BrokerOuterAPI, {"ns-0": "ok"}, _register())
    call = fake.to(RequestCode.REGISTER_BROKER)[0]
    header = call["header"]
    want = {"brokerAddr": BROKER.broker_addr, "brokerName": BROKER.broker_name, "clusterName": BROKER.cluster_name,
            "haServerAddr": BROKER.ha_server_addr, "brokerId": str(BROKER.broker_id)}
    wrong = {k: header.get(k) for k, v in want.items() if header.get(k) != v}
    assert not wrong, f"the header names the broker: {want} (wrong or missing: {wrong})"
    assert header.get("bodyCrc32") == str(crc32(call["body"] or b"")), "bodyCrc32 is the body's CRC32"
    body = RegisterBrokerBody.decode(call["body"], LAB_SERIALIZE_TYPE)
    assert body.data_version == VERSION and dict(body.topic_config_table) == TABLE, \
        "the body carries the dataVersion and every topic (encode_register_body)"


def test_compressed_when_asked(BrokerOuterAPI):
    fake, _, _ = run(BrokerOuterAPI, {"ns-0": "ok"}, _register(compressed=True))
    call = fake.to(RequestCode.REGISTER_BROKER)[0]
    assert call["header"].get("compressed") == "true", "compressedRegister: the header says compressed=true"
    body = RegisterBrokerBody.decode(call["body"], LAB_SERIALIZE_TYPE, compressed=True)
    assert dict(body.topic_config_table) == TABLE, "and the body is the compressed form"


def test_every_call_is_bounded_by_the_timeout(BrokerOuterAPI):
    fake, _, _ = run(BrokerOuterAPI, {"ns-0": "ok", "ns-1": "ok"}, _register(timeout=4.5))
    timeouts = sorted({c["timeout"] for c in fake.to(RequestCode.REGISTER_BROKER)})
    assert timeouts == [4.5], f"each call waits at most registerBrokerTimeoutMills, the timeout given: 4.5 s (got {timeouts})"


def test_a_failing_nameserver_costs_only_itself(BrokerOuterAPI):
    fake, result, _ = run(BrokerOuterAPI, {"ns-0": "refuse", "ns-1": "ok"}, _register())
    assert [c["address"] for c in fake.to(RequestCode.REGISTER_BROKER)].count("ns-1") == 1, \
        "ns-0 refusing must not stop the registration with ns-1"
    assert isinstance(result, BrokerRegisterResult) and result.master_addr == "master-via-ns-1", \
        f"the result is ns-1's, the one that answered (got {result!r})"
    _, result, _ = run(BrokerOuterAPI, {"ns-0": "refuse", "ns-1": "hang"}, _register(timeout=2.0))
    assert result is None, f"no NameServer answered: None, not an exception (got {result!r})"


@needs(test_every_call_is_bounded_by_the_timeout, test_a_failing_nameserver_costs_only_itself)
def test_registers_with_all_at_once(BrokerOuterAPI):
    fake, result, elapsed = run(BrokerOuterAPI, {"ns-0": "hang", "ns-1": "ok"}, _register(timeout=6.0))
    starts = {c["address"]: c["start"] for c in fake.to(RequestCode.REGISTER_BROKER)}
    assert starts.get("ns-1") == 0.0, \
        f"a hung ns-0 must not delay ns-1: every registration starts at once (ns-1 began at t={starts.get('ns-1')})"
    assert elapsed <= 6.0 + 0.5, f"the whole registration takes one timeout, not one per NameServer (took {elapsed:g} s)"


def test_the_result_is_a_success(BrokerOuterAPI):
    for behaviour, good in (({"ns-0": "error", "ns-1": "ok"}, "ns-1"), ({"ns-0": "ok", "ns-1": "error"}, "ns-0")):
        _, result, _ = run(BrokerOuterAPI, behaviour, _register())
        assert isinstance(result, BrokerRegisterResult) and result.master_addr == f"master-via-{good}", \
            (f"a SYSTEM_ERROR answer is no registration: the result is {good}'s, which answered SUCCESS "
             f"({behaviour}; got {result!r})")


def test_unregisters_from_each_in_turn(BrokerOuterAPI):
    fake, _, elapsed = run(BrokerOuterAPI, {"ns-0": "ok", "ns-1": "hang", "ns-2": "ok"},
                           lambda api: api.unregister_broker_all(BROKER))
    calls = fake.to(RequestCode.UNREGISTER_BROKER)
    assert [c["address"] for c in calls] == ["ns-0", "ns-1", "ns-2"], \
        f"UNREGISTER_BROKER to every NameServer, in the list's order (got {[c['address'] for c in calls]})"
    assert all(c["timeout"] == UNREGISTER_TIMEOUT for c in calls), "each unregistration waits at most 3 s"
    assert calls[2]["start"] >= calls[1]["end"], "one after the other, as 4.9.8 does: ns-2 after ns-1's timeout"
    header = calls[0]["header"]
    assert (header.get("brokerName"), header.get("brokerId"), header.get("brokerAddr")) == \
        (BROKER.broker_name, str(BROKER.broker_id), BROKER.broker_addr), "the header names the broker"


# --- 4.9.8's rules with NameServers that answer in any order, late, never, or with errors ------------

_delay = st.sampled_from((0.0, 0.01, 0.5, 2.0, 5.9, 7.0))  # 7 s: after a 6 s timeout (a 3 s one too)
_reply = st.one_of(st.tuples(st.just("ok"), _delay), st.tuples(st.just("error"), _delay),
                   st.tuples(st.just("refuse"), st.just(0.0)), st.tuples(st.just("lost"), st.just(0.0)))


class RepliesAsTold(FakeNameServers):
    """Each NameServer answers SUCCESS or SYSTEM_ERROR after its delay, refuses, or loses the
    request; a reply later than the call's timeout is a timeout (the channel gives up)."""

    def __init__(self, replies: dict[str, tuple[str, float]]):
        super().__init__({})
        self.replies = replies

    async def invoke(self, address, command, timeout):
        call = {"address": address, "code": command.code, "header": dict(command.ext_fields or {}),
                "body": command.body, "timeout": timeout, "start": trio.current_time(), "end": None,
                "outcome": "cancelled"}
        self.calls.append(call)
        try:
            how, delay = self.replies[address]
            if how == "refuse":
                call["outcome"] = "refused"
                raise RemotingError(f"connect to {address} failed: connection refused")
            if how == "lost" or delay >= timeout:
                await trio.sleep(timeout)
                call["outcome"] = "timeout"
                raise RemotingTimeoutError(f"wait response on the channel <{address}> timeout, {timeout * 1000:g}(ms)")
            await trio.sleep(delay)
            call["outcome"] = how
            if how == "error":
                return command.response(ResponseCode.SYSTEM_ERROR, "the NameServer is busy")
            return command.response(ResponseCode.SUCCESS, ext_fields={"masterAddr": f"master-via-{address}",
                                                                      "haServerAddr": f"ha-via-{address}"})
        finally:
            call["end"] = trio.current_time()


def _told(replies: dict, timeout: float) -> str:
    said = []
    for address, (how, delay) in replies.items():
        late = how in ("ok", "error") and delay >= timeout
        said.append(f"{address} " + {"ok": f"answers SUCCESS after {delay:g} s", "error": f"answers SYSTEM_ERROR after {delay:g} s",
                                     "refuse": "refuses the connection", "lost": "never answers"}[how]
                    + (" (after the timeout)" if late else ""))
    return f"timeout {timeout:g} s; " + "; ".join(said)


def _run_told(learner_cls, replies: dict, do):
    return _run_on(RepliesAsTold(replies), learner_cls, list(replies), do)


def check_registration(learner_cls, replies: dict, timeout: float, compressed: bool) -> None:
    fake, result, elapsed = _run_told(learner_cls, replies, _register(timeout=timeout, compressed=compressed))
    calls = fake.to(RequestCode.REGISTER_BROKER)
    per = {a: [c for c in calls if c["address"] == a] for a in replies}
    twice = [a for a, cs in per.items() if len(cs) != 1]
    assert not twice, (f"one REGISTER_BROKER per NameServer per registration, no retry (got "
                       f"{', '.join(f'{len(per[a])} to {a}' for a in twice)})")
    late = {a: cs[0]["start"] for a, cs in per.items() if cs[0]["start"] > 0.0}
    assert not late, (f"every registration starts at once: {', '.join(f'{a} began at t={t:g}' for a, t in late.items())} "
                      f"(a slow NameServer must not hold back the others)")
    for c in calls:
        assert c["header"].get("bodyCrc32") == str(crc32(c["body"] or b"")), \
            (f"bodyCrc32 is the CRC32 of the body sent ({'compressed' if compressed else 'plain'}: the bytes the "
             f"NameServer checks it against; got {c['header'].get('bodyCrc32')}, the body's is {crc32(c['body'] or b'')})")
        assert c["header"].get("compressed") == str(compressed).lower(), \
            f"the header says compressed={str(compressed).lower()} (got {c['header'].get('compressed')!r})"
    bounds = sorted({c["timeout"] for c in calls} - {timeout})
    assert not bounds, f"each call is bounded by the timeout given ({timeout:g} s; got {bounds})"
    cut = [a for a, cs in per.items() if cs[0]["outcome"] == "cancelled"]
    assert not cut, (f"each NameServer's call is seen through to its answer or its timeout, and reported (4.9.8 waits "
                     f"for all of them): {', '.join(cut)} cancelled at t={max(per[a][0]['end'] for a in cut):g}")
    last = max(c["end"] for c in calls)
    assert elapsed <= last + 0.001, (f"the registration returns when the last NameServer has answered or timed out "
                                     f"(t={last:g}), not later (returned at t={elapsed:g})")
    succeeded = {f"master-via-{a}" for a, (how, delay) in replies.items() if how == "ok" and delay < timeout}
    if not succeeded:
        assert result is None, f"no NameServer answered SUCCESS: the result is None (got {result!r})"
    else:
        assert isinstance(result, BrokerRegisterResult) and result.master_addr in succeeded, \
            (f"the result is the reply of a NameServer that answered SUCCESS in time "
             f"({', '.join(sorted(m[len('master-via-'):] for m in succeeded))}; got {result!r})")
        address = result.master_addr[len("master-via-"):]
        assert result.ha_server_addr == f"ha-via-{address}", \
            f"master_addr and ha_server_addr come from the same reply (got {result!r})"


def check_unregistration(learner_cls, replies: dict) -> None:
    fake, _, _ = _run_told(learner_cls, replies, lambda api: api.unregister_broker_all(BROKER))
    calls = fake.to(RequestCode.UNREGISTER_BROKER)
    order = [c["address"] for c in calls]
    assert order == list(replies), f"one UNREGISTER_BROKER to each NameServer in the list's order, whatever the " \
                                   f"others did (want {list(replies)}, got {order})"
    for before, after in zip(calls, calls[1:]):
        assert after["start"] >= before["end"], \
            f"one after the other: {after['address']} began at t={after['start']:g}, before {before['address']} ended"
    bounds = sorted({c["timeout"] for c in calls} - {UNREGISTER_TIMEOUT})
    assert not bounds, f"each unregistration waits at most 3 s (got {bounds})"


@needs(test_registers_with_every_nameserver, test_every_call_is_bounded_by_the_timeout,
       test_a_failing_nameserver_costs_only_itself, test_registers_with_all_at_once, test_the_result_is_a_success)
def test_registrations_follow_4_9_8_with_any_replies(BrokerOuterAPI):
    """Hypothesis: 1-4 NameServers answering in any order, late, never, or with errors; shrunk."""
    @generated.checks(max_examples=60)
    @given(st.lists(_reply, min_size=1, max_size=4), st.sampled_from((3.0, 6.0)), st.booleans())
    def registrations(replies, timeout, compressed):
        told = {f"ns-{i}": r for i, r in enumerate(replies)}
        try:
            check_registration(BrokerOuterAPI, told, timeout, compressed)
        except AssertionError as e:
            raise AssertionError(f"{e}\n    {generated.the_case('case')}: {_told(told, timeout)}") from None
    registrations()


@needs(test_unregisters_from_each_in_turn)
def test_unregistrations_follow_4_9_8_with_any_replies(BrokerOuterAPI):
    @generated.checks(max_examples=30)
    @given(st.lists(_reply, min_size=1, max_size=4))
    def unregistrations(replies):
        told = {f"ns-{i}": r for i, r in enumerate(replies)}
        try:
            check_unregistration(BrokerOuterAPI, told)
        except AssertionError as e:
            raise AssertionError(f"{e}\n    {generated.the_case('case')}: {_told(told, UNREGISTER_TIMEOUT)}") \
                from None
    unregistrations()


TESTS = [test_registers_with_every_nameserver, test_the_request_says_who_and_what, test_compressed_when_asked,
         test_every_call_is_bounded_by_the_timeout, test_a_failing_nameserver_costs_only_itself,
         test_registers_with_all_at_once, test_the_result_is_a_success, test_unregisters_from_each_in_turn,
         test_registrations_follow_4_9_8_with_any_replies, test_unregistrations_follow_4_9_8_with_any_replies]
