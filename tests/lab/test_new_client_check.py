"""new_client judges a new client's own topics: a new consumer group's retry topic has no route
until the group's first heartbeat creates it on a broker (4.9.8), so its failed first fetch is no
failure of the NameServers."""

from __future__ import annotations

from chaos.scenario import ExpectSpec
from lab.control.expectations import ClusterView, NewClient


def judge(routes: list[tuple[str, bool]]):
    check = NewClient(ExpectSpec("new_client", {"name": "new"}, 0), ClusterView(), fails=None, succeeds=(10.0, 20.0))
    for topic, ok in routes:
        check.observe({"t": 12.0, "node": "consumer-9", "kind": "client.route", "topic": topic, "ok": ok,
                       "ns": "127.0.0.1:9876"})
    check.observe({"t": 12.5, "node": "consumer-9", "kind": "client.start", "ok": True})
    check.finish(30.0)
    return check.result


def test_a_new_groups_retry_topic_without_a_route_is_no_failure():
    result = judge([("TopicTest", True), ("%RETRY%group-new", False)])
    assert result.ok is True, result.detail


def test_a_new_client_whose_own_topic_got_no_route_fails():
    result = judge([("TopicTest", False), ("%RETRY%group-new", False)])
    assert result.ok is False and "TopicTest" in result.detail and "RETRY" not in result.detail
