"""Every control on a running (simulated) lab, used as a person would: keys and dialogs, the
command palette, `nslab chaos` from another terminal — and `q` leaves nothing running."""

from __future__ import annotations

import asyncio

import pytest
from tui_support import live_app, run_app, screen_text, started, wait_until
from textual.widgets import OptionList

from lab.control import live
from lab.tui.screens.partition import PartitionScreen
from lab.tui.screens.pick import PickScreen


async def choose(pilot, words: list[str]) -> None:
    """In each dialog that opens, move down to the option and press enter."""
    for word in words:
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, PickScreen), f"a dialog offers {word}")
        options = pilot.app.screen.query_one(OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        await pilot.press(*["down"] * ids.index(word), "enter")


def state(name):
    return lambda m: m.nodes[name].shown_state


def toxics(m):
    return m.nodes["broker-a-0"].toxics


def nameservers(m):
    return {m.nodes[n].state for n in m.nameservers}


def wiped(m):
    return {"broker-a" in ns.wiped for ns in m.nameservers.values()}


def grown(m):
    return any(r["node"] == "broker-b-0" and "grow 1000" in r.get("reason", "") for r in m.events("broker.topic"))


# key, choices, what the model shows after, what the Brokers view shows (if it does), the undo
CONTROLS = {
    "kill": ("k", ["broker-a-0"], state("broker-a-0"), "killed", "killed", ("r", ["broker-a-0"], "up")),
    "freeze": ("f", ["broker-a-0"], state("broker-a-0"), "frozen", "frozen", ("u", ["broker-a-0"], "up")),
    "isolate": ("i", ["broker-b-0"], state("broker-b-0"), "cut off", "cut off", ("h", [], "up")),
    "toxic": ("t", ["broker-a-0", "latency 500ms"], toxics, {"latency 500ms"}, None, ("h", [], set())),
    "toxic:request": ("t", ["broker-a-0", "drop REGISTER_BROKER (registrations lost, routes flow)"], toxics,
                      {"drop REGISTER_BROKER"}, None, ("h", [], set())),
    "ns-down": ("n", ["all"], nameservers, {"killed"}, None, ("N", ["all"], {"up"})),
    "wipe-perm": ("w", ["broker-a"], wiped, {True}, "wiped@ns-0,ns-1", ("W", ["broker-a"], {False})),
    "stop": ("s", ["producer-0"], state("producer-0"), "stopped", None, None),
    "new-client": ("c", ["consumer"], state("consumer-2"), "up", None, None),
    "grow-topics": ("g", ["broker-b-0", "1,000 topics"], grown, True, None, None),
}


@pytest.mark.parametrize("verb", CONTROLS)
def test_each_chaos_key_acts_on_the_running_cluster_and_shows_it(verb):
    key, choices, shown, expected, on_screen, undo = CONTROLS[verb]
    app = live_app()

    async def body(pilot):
        model = pilot.app.source.model
        await started(pilot)
        await pilot.press(key)
        await choose(pilot, choices)
        fault = verb.partition(":")[0]
        await wait_until(pilot, lambda: fault in {r.get("verb") for r in model.events("chaos.fault")},
                         f"{verb} is in the event log")
        await wait_until(pilot, lambda: shown(model) == expected, f"the lab shows {verb}: {expected}")
        if on_screen:
            await wait_until(pilot, lambda: on_screen in screen_text(app), f"the Brokers view says {on_screen}")
        if undo is not None:
            undo_key, undo_choices, undone = undo
            await pilot.press(undo_key)
            await choose(pilot, undo_choices)
            await wait_until(pilot, lambda: shown(model) == undone, f"{undo_key} undoes {verb}")

    run_app(app, body)


def test_partition_dialog_cuts_the_ticked_side_from_the_rest_and_heal_joins_them():
    async def body(pilot):
        model = pilot.app.source.model
        await started(pilot)
        await pilot.press("p")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, PartitionScreen), "the partition dialog")
        await pilot.press("space", "down", "down", "space", "enter")  # ns-0 and broker-a-0
        await wait_until(pilot, lambda: model.nodes["ns-0"].cut_from, "ns-0 is cut off")
        assert model.nodes["broker-a-0"].cut_from == model.nodes["ns-0"].cut_from
        assert "ns-1" in model.nodes["ns-0"].cut_from and "broker-a-0" in model.nodes["ns-1"].cut_from
        await pilot.press("h")
        await wait_until(pilot, lambda: not model.nodes["ns-0"].cut_from, "heal joins the sides")

    run_app(live_app(), body)


def test_a_bad_choice_is_refused_with_a_message_and_the_lab_runs_on():
    async def body(pilot):
        await started(pilot)
        await pilot.app.run_chaos(["kill", "broker-z-0"])
        await wait_until(pilot, lambda: "no nameserver or" in screen_text(pilot.app), "the error shows")
        assert pilot.app.source.error is None

    run_app(live_app(), body)


def test_time_controls_pause_step_and_change_the_speed():
    async def body(pilot):
        source = pilot.app.source
        model = source.model
        await started(pilot)
        assert "running │ sim │ NAMESRV_ADDR=127.0.0.1:9876;127.0.0.1:9877 │ seed 1" in screen_text(pilot.app)
        await pilot.press("space")
        await wait_until(pilot, lambda: source.clock.rate == 0, "the clock stops")
        assert "paused" in screen_text(pilot.app)
        await pilot.pause(0.3)
        t0 = model.now
        await pilot.pause(0.5)
        assert model.now == t0, "paused time stands still"
        await pilot.press("full_stop")
        # A step is exactly 1.0 on the clock, but now is the clock less the run's origin, or a
        # record's time rounded to the microsecond: either can read a hair short of t0 + 1.0.
        await wait_until(pilot, lambda: model.now >= t0 + 1.0 - 1e-6, "a step moves time one second")
        await pilot.pause(0.3)
        assert model.now < t0 + 1.01 and source.clock.rate == 0
        await pilot.press("plus", "space")
        await wait_until(pilot, lambda: source.clock.rate == 8.0, "faster doubles the speed")
        await pilot.press("minus", "minus")
        await wait_until(pilot, lambda: source.clock.rate == 2.0, "slower halves it")
        assert "speed 2" in screen_text(pilot.app)

    run_app(live_app(), body)


def test_the_command_palette_offers_every_action_by_name():
    async def body(pilot):
        model = pilot.app.source.model
        await started(pilot)
        titles = [title for title, _, _ in pilot.app.commands()]
        for title in ("kill broker-a-0", "freeze broker-b-1", "ns-down all", "wipe-perm broker-b", "heal",
                      "partition…", "toxic…", "grow-topics…", "new-client producer", "step", "help"):
            assert title in titles
        await pilot.press("ctrl+p")
        await pilot.press(*"kill broker-b-0")
        await wait_until(pilot, lambda: "kill broker-b-0" in screen_text(pilot.app), "the palette finds it")
        await pilot.press("enter")
        await wait_until(pilot, lambda: model.nodes["broker-b-0"].state == "killed", "the palette kills broker-b-0")

    run_app(live_app(), body)


def test_nslab_chaos_from_another_terminal_drives_the_same_lab():
    async def body(pilot):
        model = pilot.app.source.model
        await started(pilot)
        status = await asyncio.to_thread(live.send, ["status"])
        assert {row["node"] for row in status["status"]} == set(model.nodes)
        reply = await asyncio.to_thread(live.send, ["freeze", "broker-b-1"])
        assert reply["ok"], reply
        await wait_until(pilot, lambda: model.nodes["broker-b-1"].shown_state == "frozen", "the TUI shows it")
        assert [r["source"] for r in model.events("chaos.fault")] == ["control"]

    run_app(live_app(), body)


def test_q_stops_every_node_and_leaves_nothing_running(tmp_path):
    app = live_app()

    async def body(pilot):
        await started(pilot)
        assert list(tmp_path.glob("nslab/*.sock"))
        await pilot.press("q")
        await wait_until(pilot, lambda: app.source.done.done(), "the run ends")

    run_app(app, body)
    model = app.source.model
    assert app.source.error is None
    assert model.ended
    assert {v.state for v in model.nodes.values()} == {"stopped"}
    assert not list(tmp_path.glob("nslab/*")), "the live-control socket and its info are gone"
    # A live lab has no checks to wait for: q stops it at once, not after a 30 s drain (7.5 s at speed 4).
    drain, end = model.events("run.drain")[0], model.events("run.end")[0]
    assert drain["seconds"] == 0 and end["t"] - drain["t"] < 5, f"q took {end['t'] - drain['t']:.1f} lab seconds"


def test_every_request_fault_preset_is_a_fault_the_vocabulary_reads():
    # What the toxic dialog offers on one request code: every kind, each a valid `nslab chaos` line.
    from chaos.request_faults import KINDS, RequestFault
    from lab.control.actions import vocabulary
    from lab.tui.chaos_menu import TOXICS

    parsed = [vocabulary().parse_words(["toxic", "broker-a-0", *words]).toxic for words in TOXICS.values()]
    assert {t.kind for t in parsed if isinstance(t, RequestFault)} == set(KINDS)


def test_bringing_up_nameservers_that_are_up_does_nothing_and_says_so():
    async def body(pilot):
        model = pilot.app.source.model
        await started(pilot)
        await pilot.press("N")
        await wait_until(pilot, lambda: "nothing to ns-up right now" in screen_text(pilot.app),
                         "N with every NameServer up says there is nothing to do")
        assert not isinstance(pilot.app.screen, PickScreen)
        await pilot.app.run_chaos(["ns-up", "all"])  # as `nslab chaos ns-up all` would
        await wait_until(pilot, lambda: "every NameServer is already up" in screen_text(pilot.app),
                         "ns-up all is refused")
        assert "ns-up" not in {r.get("verb") for r in model.events("chaos.fault")}, \
            "the story records an ns-up that changed nothing"

    run_app(live_app(), body)


def test_the_restart_dialog_offers_the_node_that_is_down_first():
    async def body(pilot):
        model = pilot.app.source.model
        await started(pilot)
        await pilot.press("k")
        await choose(pilot, ["broker-b-0"])
        await wait_until(pilot, lambda: model.nodes["broker-b-0"].state == "killed", "broker-b-0 is killed")
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, PickScreen), "the restart dialog")
        await pilot.press("enter")  # the first offer
        await wait_until(pilot, lambda: model.nodes["broker-b-0"].state == "up", "broker-b-0 is up again")
        restarted = [r["nodes"] for r in model.events("chaos.fault") if r.get("verb") == "restart"]
        assert restarted == [["broker-b-0"]], f"restart went to {restarted}, not the node that was down"

    run_app(live_app(), body)
