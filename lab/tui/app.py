"""The lab's App: the views, key bindings (each with an id), the command palette provider, and the
timer that redraws the views from the model four times a second — never per event, so the
cluster never waits for the screen. A key press goes the other way round: the source holds the
cluster's work until the screen has answered it (guest.py), and the process's garbage collector
and GIL are tuned for the screen (responsive.py)."""

from __future__ import annotations

from functools import partial

from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.screen import ModalScreen
from textual.widgets import Input, TabbedContent, TabPane

from chaos.faults import FaultError

from ..config import parse_duration
from ..run.supervisor import describe
from .chaos_menu import GROUPS, HELP, NO_TARGET, SECOND, palette_commands, targets

from .lesson import ended, lesson_for
from .responsive import Responsive
from .screens.ask import AskScreen
from .screens.help import HelpScreen
from .screens.partition import PartitionScreen
from .screens.pick import PickScreen
from .source import Source
from .widgets.brokers import BrokersTable
from .widgets.checks import ChecksView
from .widgets.clients import ClientsView
from .widgets.event_log import EventLogView
from .widgets.key_bar import KeyBar
from .widgets.nameservers import NameServers
from .widgets.status_bar import StatusBar

REFRESH = 0.25  # seconds between redraws
SHORT = 30  # rows below which the bottom pane shrinks for the NameServer panels (app.tcss)
PRESSES = (events.Key, events.MouseDown, events.MouseScrollUp, events.MouseScrollDown)


def _holding_driver(driver_class: type[Driver]) -> type[Driver]:
    """The terminal's driver, telling the source about a key the moment it is read: in the input
    thread, while the loop may still be inside one of trio's batches. Posting the key to the app
    takes two more turns of the loop, and trio would get another batch in between."""

    class HoldingDriver(driver_class):
        def __init__(self, app, *args, **kwargs) -> None:
            super().__init__(app, *args, **kwargs)
            self.lab_app = app  # a Driver is given its app, and keeps it only privately

        def process_message(self, message) -> None:
            if isinstance(message, PRESSES):
                self.lab_app.source.hold()  # thread-safe: it only notes the time
            super().process_message(message)

    return HoldingDriver


class LabCommands(Provider):
    """Every chaos action by name (`kill broker-a-0`, `partition…`), the time controls and help."""

    async def discover(self) -> Hits:
        for title, help, callback in self.app.commands():
            yield DiscoveryHit(title, callback, help=help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help, callback in self.app.commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help)


def chaos_binding(key: str, verb: str, description: str) -> Binding:
    return Binding(key, f"chaos('{verb}')", description, id=f"chaos.{verb}", tooltip=HELP[verb])


class LabApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "nslab"
    COMMANDS = App.COMMANDS | {LabCommands}
    BINDINGS = [
        Binding("question_mark,f1", "help", "Help", id="help"),
        Binding("space", "pause", "Pause", id="time.pause"),
        Binding("plus", "faster", "Faster", id="time.faster"),
        Binding("minus", "slower", "Slower", id="time.slower"),
        Binding("full_stop", "step", "Step", id="time.step"),
        Binding("j", "jump", "Jump", id="time.jump"),
        chaos_binding("k", "kill", "Kill"),
        chaos_binding("f", "freeze", "Freeze"),
        chaos_binding("u", "unfreeze", "Unfreeze"),
        chaos_binding("r", "restart", "Restart"),
        chaos_binding("s", "stop", "Stop"),
        chaos_binding("p", "partition", "Partition"),
        chaos_binding("i", "isolate", "Isolate"),
        chaos_binding("h", "heal", "Heal"),
        chaos_binding("t", "toxic", "Toxic"),
        chaos_binding("n", "ns-down", "NS down"),
        chaos_binding("N", "ns-up", "NS up"),
        chaos_binding("w", "wipe-perm", "Wipe perm"),
        chaos_binding("W", "add-perm", "Add perm"),
        chaos_binding("c", "new-client", "New client"),
        chaos_binding("g", "grow-topics", "Grow topics"),
        Binding("1", "tab('brokers')", "Brokers", show=False, id="view.brokers"),
        Binding("2", "tab('clients')", "Clients", show=False, id="view.clients"),
        Binding("3", "tab('events')", "Events", show=False, id="view.events"),
        Binding("4", "tab('checks')", "Checks", show=False, id="view.checks"),
        Binding("slash", "filter", "Filter events", show=False, id="view.filter"),
        Binding("escape", "leave_filter", "Leave filter", show=False, id="view.leave_filter"),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(self, source: Source, responsive: Responsive | None = None):
        """responsive: the process's garbage collector and GIL tuned for the screen while the app
        runs (`nslab up`, `nslab replay`); None leaves them alone (tests run many apps in one
        process)."""
        super().__init__()
        self.source = source
        self.responsive = responsive
        self.note = ""  # shown in the header instead of running/paused: "stopping…"
        self.lesson = None  # the scenario as a lesson (lesson.py), once it is known
        self._lesson_key: tuple = ()
        self._told_gone = False

    def get_driver_class(self) -> type[Driver]:
        return _holding_driver(super().get_driver_class())

    def post_message(self, message) -> bool:
        # Every input reaches the app here first (Pilot's too), before any widget sees it.
        if isinstance(message, PRESSES):
            self.source.hold()
            if self.responsive is not None:
                self.responsive.pressed()
        return super().post_message(message)

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield NameServers(id="nameservers")
        with TabbedContent(id="bottom"):
            with TabPane("Brokers", id="brokers"):
                yield BrokersTable()
            with TabPane("Clients", id="clients"):
                yield ClientsView()
            with TabPane("Events", id="events"):
                yield EventLogView()
            with TabPane("Checks", id="checks"):
                yield ChecksView()
        yield KeyBar(id="keys")

    async def on_mount(self) -> None:
        # The main screen's widgets: queries would search whichever dialog is on top.
        self.status_bar, self.nameservers = self.query_one(StatusBar), self.query_one(NameServers)
        self.bottom = self.query_one(TabbedContent)
        self.bottom_views = {"brokers": self.query_one(BrokersTable), "clients": self.query_one(ClientsView),
                             "events": self.query_one(EventLogView), "checks": self.query_one(ChecksView)}
        self.key_bar = self.query_one(KeyBar)
        self.set_class(self.size.height < SHORT, "-short")
        if self.source.scenario:
            self.bottom.active = "checks"
        if self.responsive is not None:
            self.responsive.start()
        await self.source.start()
        self.refresh_views()
        self.set_interval(REFRESH, self._timer)

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.height < SHORT, "-short")

    def _timer(self) -> None:
        self.refresh_views()
        if self.responsive is not None:  # here, never on a key's way to the screen
            self.responsive.tick()

    def refresh_views(self) -> None:
        source = self.source
        source.tick()
        if source.error is not None:
            self.exit(return_code=1, message=f"the lab stopped: {source.error!r}")
            return
        if source.gone is not None and not self._told_gone:
            self._told_gone = True
            self.notify(source.gone, title="nothing more will come", severity="warning", timeout=30)
        model = source.model
        self._update_lesson()
        try:
            self.status_bar.show(source, self.note, ended(self.lesson, model.now, model.drained))
            self.nameservers.show(model)
            self.bottom_views[self.bottom.active].show(model)
            self.key_bar.show()
        except NoMatches:  # a view's parts not mounted yet, or already gone as the app closes
            pass

    def _update_lesson(self) -> None:
        """Known from the start when the source has the scenario or the whole recording; from a
        lab in another process, rebuilt as its important records come."""
        source = self.source
        whole = source.scenario is not None or bool(getattr(source, "records", None))
        key = (source.model,) if whole else (source.model, len(source.model.kept))
        if key == self._lesson_key:
            return
        self._lesson_key = key
        self.lesson = lesson_for(source)
        self.bottom_views["checks"].lesson = self.lesson

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if isinstance(self.screen, HelpScreen):  # q, escape and ? close help: none of the app's keys
            return False
        if isinstance(self.screen, ModalScreen):  # a dialog is open: its keys only
            return action == "quit"
        if action == "chaos":
            return self.source.live
        if action in ("pause", "faster", "slower"):  # a lab in another process keeps its own time
            return not self.source.remote
        if action == "step":
            return self.source.can_step
        if action == "jump":
            return self.source.mode == "replay"
        return True

    # --- time -------------------------------------------------------------------------------------

    def action_pause(self) -> None:
        self.source.toggle_pause()
        self.refresh_views()

    def action_faster(self) -> None:
        self.source.faster()
        self.refresh_views()

    def action_slower(self) -> None:
        self.source.slower()
        self.refresh_views()

    def action_step(self) -> None:
        if not self.source.paused:
            self.notify("pause first (space), then step")
            return
        self.source.step()
        self.refresh_views()

    @work(exclusive=True, group="dialog")
    async def action_jump(self) -> None:
        answer = await self.push_screen_wait(AskScreen("Jump to which time? (90, 2m30s, end)", "2m"))
        if answer is None:
            return
        try:
            t = self.source.end if answer == "end" else parse_duration(answer)
        except ValueError as e:
            self.notify(str(e), severity="error")
            return
        self.source.jump(t)
        self.refresh_views()

    # --- views ------------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_tab(self, tab: str) -> None:
        # A focused widget in the pane being left would take focus back into it, and the tabbed
        # content would switch back to show it: 1-4 seemed to do nothing after Tab out of the filter.
        if self.focused is not None and self.bottom in self.focused.ancestors:
            self.set_focus(None)
        self.bottom.active = tab
        self.refresh_views()

    def action_filter(self) -> None:
        self.action_tab("events")
        self.query_one("#event-filter", Input).focus()

    def action_leave_filter(self) -> None:
        if isinstance(self.focused, Input):
            self.set_focus(None)

    # --- chaos ------------------------------------------------------------------------------------

    @work(exclusive=True, group="dialog")
    async def action_chaos(self, verb: str) -> None:
        words = await self._pick_words(verb)
        if words:
            await self.run_chaos(words)

    async def _pick_words(self, verb: str) -> list[str] | None:
        """The dialogs for one verb, ending in `nslab chaos` words (None: cancelled)."""
        model = self.source.model
        if verb in NO_TARGET:
            return [verb]
        if verb in GROUPS:
            nodes = [(name, f"{name}  {view.role}") for name, view in model.nodes.items()]
            groups = await self.push_screen_wait(PartitionScreen(nodes))
            return groups and [verb, ",".join(groups[0]), "/", ",".join(groups[1])]
        choices = targets(verb, model)
        if not choices:
            self.notify(f"nothing to {verb} right now", severity="warning")
            return None
        target = await self.push_screen_wait(PickScreen(f"{verb}: {HELP[verb]}", choices))
        if target is None or verb not in SECOND:
            return target and [verb, target]
        question, presets = SECOND[verb]
        preset = await self.push_screen_wait(PickScreen(question, [(label, label) for label in presets]))
        return preset and [verb, target, *presets[preset]]

    async def run_chaos(self, words: list[str]) -> None:
        try:
            message = await self.source.apply(words)
        except Exception as e:  # a bad target, or the fault failed on the cluster: the lab runs on
            why = str(e) if isinstance(e, FaultError) else describe(e)
            self.notify(why, title=" ".join(words), severity="error")
            return
        self.refresh_views()  # takes in the records the action made
        failed = " could not start: " in message
        self.notify(message, title=" ".join(words), severity="error" if failed else "information")

    def commands(self) -> list[tuple[str, str, object]]:
        """(title, help, callback) for the command palette."""
        commands = [("help", "what every table and timer means", self.action_help),
                    ("quit", "leave this view: the lab runs on" if self.source.remote
                     else "stop every node cleanly and leave", self.action_quit)]
        if not self.source.remote:
            commands[:0] = [("pause / resume", "stop or restart time", self.action_pause),
                            ("faster", "double the speed", self.action_faster),
                            ("slower", "halve the speed", self.action_slower)]
        if self.source.can_step:
            commands.append(("step", "one second of run time (while paused)", self.action_step))
        if self.source.mode == "replay":
            commands.append(("jump to a time", "anywhere in the recorded run", self.action_jump))
        if self.source.live:
            for title, words, help in palette_commands(self.source.model):
                callback = partial(self.run_chaos, words) if words else partial(self.action_chaos, title.rstrip("…"))
                commands.append((title, help, callback))
        return commands

    async def action_quit(self) -> None:
        self.note = "stopping…"
        self.refresh_views()
        await self.source.stop()
        self.exit()

    async def on_unmount(self) -> None:
        await self.source.stop()  # however the app ends, no node outlives it
        if self.responsive is not None:
            self.responsive.stop()
