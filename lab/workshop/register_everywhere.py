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

from lab.broker.outer_api import BrokerIdentity, RegisterBrokerResult as BrokerRegisterResult
from lab.remoting.channels import LAB_SERIALIZE_TYPE
from nameserver.bodies import RegisterBrokerBody
from nameserver.client import RemotingError, RemotingTimeoutError
from nameserver.protocol import RequestCode, ResponseCode, crc32
from nameserver.routes import DataVersion, TopicConfig

from .override import ContractError
from .warmups import needs

UNREGISTER_TIMEOUT = 3.0  # 4.9.8's unregisterBroker: 3 s per NameServer
KINDS = {RequestCode.REGISTER_BROKER: "broker.register", RequestCode.UNREGISTER_BROKER: "broker.unregister"}


class ReportingChannels:
    """The broker's ChannelTable as the learner sees it: `invoke` only, each call one event."""

    def __init__(self, node, channels):
        self.node, self._channels = node, channels
        self.trigger: str | None = None

    async def invoke(self, address, command, timeout):
        kind = KINDS.get(command.code)
        fields = {"trigger": self.trigger} if kind == "broker.register" else {}
        start = trio.current_time()
        try:
            reply = await self._channels.invoke(address, command, timeout)
        except RemotingError as e:
            if kind:
                self.node.emit(kind, ns=address, ok=False, error=str(e),
                               latency=round(trio.current_time() - start, 6), **fields)
            raise
        if kind:
            self.node.emit(kind, ns=address, ok=reply.code == ResponseCode.SUCCESS, code=reply.code,
                           latency=round(trio.current_time() - start, 6), **fields)
        return reply


def adapt(learner_cls: type, errors=None) -> type:
    class LearnersBrokerOuterAPI:
        def __init__(self, node, channels, namesrv_addrs):
            self.channels = ReportingChannels(node, channels)
            self.learner = learner_cls(self.channels, list(namesrv_addrs))

        async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout,
                                      trigger, same_body=None):  # the learner's encodes every time
            self.channels.trigger = trigger
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
    """`do(api)` under a MockClock that jumps whenever every task waits; (fake, what do returned)."""
    fake = FakeNameServers(behaviour)
    api = learner_cls(fake, list(behaviour))
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


TESTS = [test_registers_with_every_nameserver, test_the_request_says_who_and_what, test_compressed_when_asked,
         test_every_call_is_bounded_by_the_timeout, test_a_failing_nameserver_costs_only_itself,
         test_registers_with_all_at_once, test_the_result_is_a_success, test_unregisters_from_each_in_turn]
