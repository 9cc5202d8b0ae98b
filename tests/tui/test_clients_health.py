"""Health at a glance on the Clients tab: messages per second on one absolute scale, the current
rates as numbers, the real error of a client that could not start, and notifications in front."""

from __future__ import annotations

import asyncio

from tui_support import build_log, flood_log, live_app, replay_app, replay_of, run_app, screen_text, started, wait_until

from lab.run.supervisor import describe
from lab.tui.errors import readable
from lab.tui.health import bars, rate, rates_text, shared_top
from lab.tui.model import LabModel
from lab.tui.widgets.clients import client_rows

WRAPPED = "Exceptions from Trio nursery (1 sub-exception)"


def test_ok_and_failed_share_one_absolute_scale():
    all_failing_ok, all_failing_failed = [0] * 10, [10] * 10
    top = shared_top(all_failing_ok, all_failing_failed)
    assert bars(all_failing_ok, top) == " " * 10, "nothing acknowledged draws nothing"
    assert bars(all_failing_failed, top) == "█" * 10
    healthy_ok, one_failure = [10] * 10, [0] * 9 + [1]
    top = shared_top(healthy_ok, one_failure)
    assert bars(one_failure, top) == " " * 9 + "▁", "one failure among ten a second is a small bar"
    assert rates_text(rate([10] * 5), rate([10] * 5)) == "ok 10/s · failed 10/s (50 %)"
    assert rates_text(0, 0) == "ok 0/s · failed 0/s · no sends"


def test_sparklines_and_columns_count_the_same_thing_messages():
    model = LabModel()
    for record in flood_log(faults=1, failures=1000):
        model.feed(record)
    model.now = 120.5
    ok, failed = model.send_rates(5)
    assert ok == [0] * 5 and failed == [100] * 5, "failed messages a second (producer.failed), not attempts"
    assert sum(c.failed for c in model.clients.values()) == 1000


def test_the_clients_tab_says_what_it_counts_and_the_rates():
    app = replay_of(flood_log(faults=1, failures=2000), at=125.0)

    async def body(pilot):
        await pilot.press("2")
        await wait_until(pilot, lambda: "ok 0/s · failed 100/s (100 %)" in screen_text(app), "the rates show")
        text = screen_text(app)
        assert "msgs ok/failed" in text and "retries" in text and "msgs/s" in text

    run_app(app, body, size=(120, 40))


def test_a_client_that_cannot_start_shows_its_real_error_and_is_not_listed_as_live():
    try:
        raise ExceptionGroup("Exceptions from Trio nursery", [ConnectionRefusedError(111, "Connection refused")])
    except ExceptionGroup as group:
        assert describe(group) == "ConnectionRefusedError: [Errno 111] Connection refused"
    assert readable(WRAPPED, "OSError: no route") == "OSError: no route"
    model = LabModel()
    for record in build_log():
        model.feed(record)
    model.feed({"t": 170.0, "node": "producer-1", "kind": "node.stop", "state": "crashed",
                "error": "MQClientException: no NameServer answered"})
    model.feed({"t": 170.0, "node": "producer-1", "kind": "client.start", "ok": False, "error": WRAPPED})
    rows = client_rows(model)
    assert [r[0] for r in rows] == ["producer-0", "consumer-0", "producer-1"], "crashed ones after the live"
    assert rows[-1][1] == ("crashed", "bold red") and rows[-1][7][0] == "MQClientException: no NameServer answered"
    assert model.story[-2].text == "producer-1 crashed: MQClientException: no NameServer answered"
    assert model.story[-1].text == "producer-1 could not start: MQClientException: no NameServer answered"


def test_a_failed_action_raising_an_exception_group_says_the_leaf_error():
    app = live_app()

    async def body(pilot):
        await started(pilot)

        async def apply(words):
            raise ExceptionGroup("Exceptions from Trio nursery", [OSError("every NameServer refused")])

        app.source.apply = apply
        await app.run_chaos(["new-client", "producer"])
        await wait_until(pilot, lambda: "OSError: every NameServer refused" in screen_text(app), "the leaf shows")
        assert "Trio nursery" not in screen_text(app)

    run_app(app, body)


def test_notifications_on_the_clients_tab_are_not_drawn_over():
    app = replay_app(at=10)

    async def body(pilot):
        await pilot.press("2", "space")  # playing: the sparklines change under the toast
        app.notify("every link joined again", title="heal")
        for _ in range(6):
            await asyncio.sleep(0.25)
            await pilot.pause()
            assert "every link joined again" in screen_text(app)

    run_app(app, body, size=(80, 24))
