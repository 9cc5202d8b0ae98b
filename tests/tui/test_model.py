"""The LabModel, fed records as live mode and replay feed them: what each view will show."""

from tui_support import BROKERS, EXPIRED_AT, NAMESERVERS, PARTITION_AT, build_log, tables

from lab.tui.model import LabModel


def model_at(t: float) -> LabModel:
    model = LabModel()
    for record in build_log():
        if record["t"] <= t:
            model.feed(record)
    model.now = t
    return model


def test_nameservers_that_agree_show_no_divergence():
    model = model_at(PARTITION_AT)
    assert model.diverged == {}
    assert set(model.nameservers["ns-2"].tables["brokerLiveTable"]) == set(BROKERS.values())


def test_a_row_differing_between_live_nameservers_is_marked_with_when_it_began():
    model = model_at(EXPIRED_AT + 12)
    addr = BROKERS["broker-a-0"]
    assert model.diverged[("brokerLiveTable", addr)] == EXPIRED_AT
    assert model.diverged[("topicQueueTable", "TopicOrder")] == EXPIRED_AT
    assert ("brokerLiveTable", BROKERS["broker-b-0"]) not in model.diverged
    assert model.now - model.diverged[("brokerAddrTable", "broker-a")] == 12


def test_divergence_ends_when_tables_agree_again_or_the_odd_nameserver_dies():
    model = model_at(EXPIRED_AT + 1)
    model.feed({"t": EXPIRED_AT + 2, "node": "ns-2", "kind": "ns.tables", **tables(list(BROKERS))})
    assert model.diverged == {}
    model = model_at(EXPIRED_AT + 1)
    model.feed({"t": EXPIRED_AT + 2, "node": "ns-2", "kind": "node.stop", "state": "killed"})
    assert model.diverged == {}, "a dead NameServer is out of the comparison"
    model.feed({"t": EXPIRED_AT + 3, "node": "ns-2", "kind": "node.start", "role": "nameserver",
                "address": NAMESERVERS["ns-2"]})
    assert model.nameservers["ns-2"].tables["brokerLiveTable"] == {}, "a restarted NameServer starts empty"
    assert model.diverged[("brokerLiveTable", BROKERS["broker-b-0"])] == EXPIRED_AT + 3


def test_heartbeat_ages_grow_until_the_next_registration():
    model = model_at(100.0)
    assert model.heartbeat_age("ns-0", BROKERS["broker-a-0"]) == 100.0 - 91.0
    assert model.heartbeat_age("ns-2", BROKERS["broker-a-0"]) == 100.0 - 31.0, "cut off since the partition"
    assert model.expiry == 120.0


def test_brokers_show_registration_results_per_nameserver_and_stored_messages():
    model = model_at(100.0)
    broker = model.brokers["broker-a-0"]
    assert broker.registrations["ns-0"][:2] == (True, "ok")
    assert broker.registrations["ns-2"][:2] == (False, "RemotingTimeoutException")
    assert broker.messages == 12  # three acks per 30 s period since t=0, from t=0..90
    assert model.nodes["broker-a-0"].shown_state == "cut off"


def test_clients_show_nameserver_route_age_sends_avoided_brokers_and_lag():
    model = model_at(PARTITION_AT + 2)
    producer, consumer = model.clients["producer-0"], model.clients["consumer-0"]
    assert producer.nameserver == "ns-0"
    assert model.now - producer.route_t == PARTITION_AT + 2 - 32.0
    assert (producer.ok, producer.failed, producer.retried) == (10, 0, 1)
    assert model.avoided("producer-0") == ["broker-a"]
    assert model.lag("consumer-0") == 2  # each broker's last message of the period is not consumed yet
    ok, failed = model.send_rates(10)
    assert sum(failed) == 0 and sum(ok) >= 1, "messages: the failed attempt was retried and acknowledged"


def test_the_event_log_hides_chatty_kinds_unless_a_filter_asks():
    model = model_at(EXPIRED_AT)
    kinds = {r["kind"] for r in model.events()}
    assert "chaos.fault" in kinds and "producer.send" not in kinds
    assert {r["kind"] for r in model.events("producer.send")} == {"producer.send"}
    assert [r["t"] for r in model.events("remotingtimeout") if r["kind"] == "producer.send"] == [PARTITION_AT + 1]


def test_chaos_states_and_expectations():
    model = model_at(1.0)
    fault = {"t": 2.0, "node": "lab", "kind": "chaos.fault", "source": "tui"}
    model.feed({**fault, "verb": "freeze", "nodes": ["broker-b-0"]})
    model.feed({**fault, "verb": "toxic", "nodes": ["broker-a-0"], "toxic": "latency 500ms"})
    assert model.nodes["broker-b-0"].shown_state == "frozen"
    assert model.nodes["broker-a-0"].toxics == {"latency 500ms"}
    model.feed({**fault, "verb": "heal"})
    assert model.nodes["broker-a-0"].toxics == set() and model.nodes["broker-b-0"].shown_state == "frozen"
    model.expect(["broker_removed broker=broker-a-0"])
    assert model.expectations["broker_removed broker=broker-a-0"].ok is None
    model.feed({"t": 3.0, "node": "lab", "kind": "check.result", "name": "broker_removed broker=broker-a-0",
                "ok": False, "detail": "still held"})
    assert model.expectations["broker_removed broker=broker-a-0"].ok is False


def test_a_node_running_as_its_own_process_shows_its_pid():
    from lab.tui.widgets.brokers import state_cell
    model = model_at(PARTITION_AT)
    model.feed({"t": PARTITION_AT + 1, "node": "broker-a-0", "kind": "node.start", "role": "broker",
                "address": BROKERS["broker-a-0"], "pid": 4321})
    node = model.nodes["broker-a-0"]
    assert node.pid == 4321
    assert state_cell(node.shown_state, node.pid)[0] == f"{node.shown_state} pid 4321"
    model.feed({"t": PARTITION_AT + 2, "node": "broker-a-0", "kind": "node.stop", "state": "killed"})
    assert state_cell(model.nodes["broker-a-0"].shown_state, node.pid)[0] == "killed"


def test_an_ns_tables_record_of_some_tables_leaves_the_others_as_they_were():
    # Schema 3: an ns.tables carries only the tables that changed.
    model = model_at(PARTITION_AT)
    before = model.nameservers["ns-2"].tables
    live = dict(before["brokerLiveTable"])
    live.pop(BROKERS["broker-b-0"])
    model.feed({"t": PARTITION_AT + 1, "node": "ns-2", "kind": "ns.tables", "brokerLiveTable": live})
    after = model.nameservers["ns-2"].tables
    assert after["topicQueueTable"] == before["topicQueueTable"] and after["brokerAddrTable"] == before["brokerAddrTable"]
    assert set(after["brokerLiveTable"]) == set(BROKERS.values()) - {BROKERS["broker-b-0"]}
    assert model.diverged == {("brokerLiveTable", BROKERS["broker-b-0"]): PARTITION_AT + 1}


def test_a_route_poll_that_changed_nothing_still_freshens_the_clients_route_age():
    model = model_at(PARTITION_AT)
    client = model.clients["producer-0"]
    source = client.route_source
    model.feed({"t": PARTITION_AT + 5, "node": "producer-0", "kind": "client.route_poll", "began": PARTITION_AT + 4.99,
                "topics": 1, "unchanged": 1, "ns": NAMESERVERS["ns-0"]})
    assert client.route_t == PARTITION_AT + 5 and client.route_source == source
    model.feed({"t": PARTITION_AT + 35, "node": "producer-0", "kind": "client.route_poll", "began": PARTITION_AT + 34.99,
                "topics": 1, "unchanged": 0, "ns": NAMESERVERS["ns-0"]})
    assert client.route_t == PARTITION_AT + 5, "a round whose fetches each have a record says nothing more"
