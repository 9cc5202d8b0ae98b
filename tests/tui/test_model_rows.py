"""The LabModel fed `ns.tables` records of rows (schema 4): the views and the divergence monitor as
whole tables gave them."""

from tui_support import BROKERS, PARTITION_AT, build_log

from lab.tui.model import LabModel


def model_at(t: float) -> LabModel:
    model = LabModel()
    for record in build_log():
        if record["t"] <= t:
            model.feed(record)
    return model


def test_rows_deleted_and_set_again_move_the_view_and_the_divergence_monitor():
    model = model_at(PARTITION_AT)
    addr = BROKERS["broker-b-0"]
    row = model.nameservers["ns-2"].tables["brokerLiveTable"][addr]
    topics = {t for t, queues in model.nameservers["ns-2"].tables["topicQueueTable"].items() if "broker-b" in queues}

    model.feed({"t": PARTITION_AT + 1, "node": "ns-2", "kind": "ns.tables",
                "del": {"brokerLiveTable": [addr], "topicQueueTable": {t: ["broker-b"] for t in topics}}})
    ns = model.nameservers["ns-2"]
    assert addr not in ns.tables["brokerLiveTable"] and set(ns.tables["brokerLiveTable"]) == set(BROKERS.values()) - {addr}
    assert model.diverged[("brokerLiveTable", addr)] == PARTITION_AT + 1
    assert ns.gone[("brokerLiveTable", addr)] == PARTITION_AT + 1
    assert {("topicQueueTable", t) for t in topics} <= model.diverged.keys()
    logged = [r for r in model.log if r["kind"] == "ns.tables"][-1]
    assert logged["del"] == 1 + len(topics) and "brokerLiveTable" not in logged

    model.feed({"t": PARTITION_AT + 2, "node": "ns-2", "kind": "ns.tables",
                "set": {"brokerLiveTable": {addr: row}, "topicQueueTable": {t: {"broker-b": model.nameservers[
                    "ns-0"].tables["topicQueueTable"][t]["broker-b"]} for t in topics}}})
    assert model.diverged == {} and ("brokerLiveTable", addr) not in ns.gone
