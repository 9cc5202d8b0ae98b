"""The `nslab` command."""

from __future__ import annotations

import argparse
import gc
import json
import math
import signal
import sys
import tempfile
import time
from pathlib import Path

import trio

from chaos.trio_internals import deterministic_scheduling
from nameserver import cli as nameserver_cli

# lab.control.scenarios and chaos.scenario are imported by the commands that use them: `nslab up` without a
# scenario need not load them.
from .control import live
from .config import ConfigError, load_config
from .control.actions import LabControl, vocabulary
from .control.feed import EventFeed
from .run import lifeline
from .run.runner import RunOptions, collector_tuned_for_a_run, make_clock, run_cluster
from .tui import launch
from .pipeline.cli import add_commands as add_pipeline_commands
from .workshop.cli import add_commands as add_workshop_commands



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nslab", description="A lab for RocketMQ's NameServer.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ns = sub.add_parser("nameserver", help="run one RocketMQ-compatible NameServer",
                        description="Run one RocketMQ 4.9-compatible NameServer until SIGINT/SIGTERM.")
    nameserver_cli.add_arguments(ns)
    ns.set_defaults(run=nameserver_cli.run)

    up = sub.add_parser("up", help="run the lab cluster in the terminal UI (the default command)", description=(
        "Run the default cluster (or --config FILE): NameServers, brokers, producers, consumers, in "
        "the terminal UI at --speed 4 (a 120 s expiry takes 30 s). Break it with the UI's keys or "
        "from another terminal with `nslab chaos`."))
    up.add_argument("--headless", action="store_true", help="no UI: run until --duration ends or Ctrl-C")
    up.add_argument("--scenario", metavar="NAME", help="play a scenario's timeline in the UI, its expectations "
                                                       "shown as they are decided")
    up.add_argument("--duration", type=_run_duration, metavar="D",
                    help="with --headless: stop after D (e.g. 10m)")
    up.add_argument("--config", type=Path, metavar="FILE", help="cluster configuration (TOML)")
    up.add_argument("--sim", action="store_true",
                    help="simulated network and virtual time (deterministic for a seed)")
    up.add_argument("--processes", action="store_true",
                    help="run each NameServer and broker as its own child process (kill = SIGKILL, freeze = SIGSTOP)")
    _run_options(up)
    up.set_defaults(run=run_up)

    run = sub.add_parser("run", help="run a chaos scenario and give a verdict", description=(
        "Run a scenario (a bundled name or a .toml file) and check its expectations as it goes. "
        "Exit 0 when every expectation holds, 1 when one fails, 2 when the run could not be judged."))
    run.add_argument("scenario", metavar="FILE-or-NAME")
    run.add_argument("--sockets", action="store_true", help="real loopback sockets instead of the simulation")
    run.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML for CI systems")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    run.add_argument("--app", action="append", default=[], metavar="[NAME=]CMD",
                     help="run your RocketMQ application as a node of the lab (repeatable): CMD is split into "
                          "words as a shell would (no shell runs it: write sh -c '...' if it needs one), {namesrv} "
                          "in it and NAMESRV_ADDR in its environment are the NameServers' addresses through the "
                          "lab's relays. It fills the scenario's [[app]] without a command, else is a new node "
                          "named app, app-2, ... or NAME. Implies --sockets at real time; SIGTERM at the "
                          "timeline's end, SIGKILL 10 s later; output in RUN_DIR/apps/ (or EVENTS.apps/)")
    _run_options(run)
    run.set_defaults(run=run_scenario)

    rp = sub.add_parser("replay", help="open a recorded event log in the UI", description=(
        "Open an event log (nslab up/run --events FILE) in the lab's views: play, pause, step, jump."))
    rp.add_argument("events", type=Path, metavar="EVENTS")
    rp.add_argument("--speed", type=_speed, default=launch.TUI_SPEED, help="playback speed (default %(default)g)")
    rp.add_argument("--export-scenario", type=Path, metavar="FILE",
                    help="write the run's chaos actions, at their virtual times, with its seed and configuration, "
                         "as a scenario FILE (a simulated run: `nslab run FILE` repeats it), instead of opening the UI")
    rp.set_defaults(run=run_replay)

    sd = sub.add_parser("seeds", help="run scenarios over many seeds: their verdicts must hold on every one",
                        description="Run scenarios (default: every bundled one) simulated, once per seed, a "
                                    "process per core. Exit 0 when every run is valid, 1 when one is invalid, "
                                    "2 when one could not be judged.")
    sd.add_argument("scenarios", nargs="*", metavar="FILE-or-NAME")
    sd.add_argument("--seeds", default="1-20", help="e.g. 1-20 (default), 7, or 1,5,9-12")
    sd.add_argument("--jobs", type=int, help="processes (default: one per core)")
    sd.set_defaults(run=run_seeds)

    sc = sub.add_parser("scenarios", help="list the bundled scenarios, a line each")
    sc.set_defaults(run=list_scenarios)

    chaos = sub.add_parser("chaos", help="break a running lab from another terminal", description=(
        "Act on the lab running on this machine: status | kill NODE | freeze NODE | unfreeze NODE | "
        "restart NODE | stop NODE | partition A,B / C,D | isolate NODE | heal | ns-down NODE|all | "
        "ns-up NODE|all | wipe-perm BROKER | add-perm BROKER | toxic NODE[:PEER] KIND [k=v] | "
        "new-client producer|consumer | grow-topics BROKER count=N"),
        epilog="verbs:\n" + vocabulary().help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    chaos.add_argument("--lab", metavar="PID", help="which lab, when several run (before or after the verb)")
    chaos.add_argument("words", nargs=argparse.REMAINDER, metavar="VERB ...", action=_VerbWords)
    chaos.set_defaults(run=run_chaos)

    at = sub.add_parser("attach", help="open the terminal UI on a lab another process runs", description=(
        "Open the terminal UI on a lab running on this machine (`nslab up`, `nslab up --headless`, "
        "`nslab serve`): it catches up with the run so far, then follows it live. The chaos keys act on "
        "that lab, as `nslab chaos` does; its time is its own (no pause or speed here), and q leaves the "
        "lab running."))
    at.add_argument("--lab", metavar="PID", help="which lab, when several run")
    at.add_argument("--read-only", action="store_true", help="watch only: the chaos keys are hidden")
    at.set_defaults(run=run_attach)

    sv = sub.add_parser("serve", help="run a lab and serve its UI to browsers (a classroom)", description=(
        "Run one lab (headless, as `nslab up --headless` with the options below, at speed 4 unless --speed) "
        "and serve its terminal UI "
        "over HTTP: each browser tab gets its own view of that same lab. The first line printed is the "
        "teacher's URL, whose tab drives the lab; the next is the viewers' URL, whose tabs watch. Nothing "
        "is fetched from the internet. Loopback only unless --host; on any other address every URL "
        "carries a token. For a projector, add fontsize=N to a URL (default 16): `…/?key=K&fontsize=24`, "
        "`…/?fontsize=24` — bigger letters, fewer columns."))
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s; "
                                                         "0.0.0.0 for the room)")
    sv.add_argument("--port", type=int, default=8000, help="port (default %(default)s; 0 picks a free one)")
    sv.add_argument("--allow-control", action="store_true", help="viewers may drive the lab too")
    sv.add_argument("--max-sessions", type=int, default=launch.MAX_SESSIONS, metavar="N",
                    help="browser tabs at once, one kept for the teacher's link (default %(default)s; ~45 MB each)")
    sv.add_argument("--config", type=Path, metavar="FILE", help="cluster configuration (TOML)")
    sv.add_argument("--sim", action="store_true", help="simulated network and virtual time")
    sv.add_argument("--processes", action="store_true", help="each NameServer and broker as its own process")
    sv.add_argument("--duration", type=_run_duration, metavar="D", help="stop the lab after D")
    _run_options(sv)
    sv.set_defaults(run=run_serve)
    add_pipeline_commands(sub)
    add_workshop_commands(sub)
    return parser


class _VerbWords(argparse.Action):
    """`nslab chaos`'s verb and its words, which take `--lab PID` among them too: `nslab chaos status
    --lab 42` as well as `nslab chaos --lab 42 status` (everything after the verb reaches here)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        words, rest = [], iter(values)
        for word in rest:
            if word != "--lab" and not word.startswith("--lab="):
                words.append(word)
                continue
            lab = next(rest, None) if word == "--lab" else word.removeprefix("--lab=")
            if not lab:
                parser.error("argument --lab: expected one argument")
            if namespace.lab not in (None, lab):
                parser.error(f"--lab given twice: {namespace.lab} and {lab}")
            namespace.lab = lab
        setattr(namespace, self.dest, words)


MIN_SPEED, MAX_SPEED = 0.01, 1000.0  # 0 would stop the clock for good; past 1000 timers outrun the loop


def _run_duration(text: str) -> float:
    """--duration: at most a week, as a scenario's (trio's deadlines misbehave near 1e17 s)."""
    from chaos.scenario import MAX_DURATION

    seconds = nameserver_cli.duration(text)
    if not 0 < seconds <= MAX_DURATION:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range: more than 0, at most {MAX_DURATION:g}s (a week)")
    return seconds


def _speed(text: str) -> float:
    try:
        speed = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range {MIN_SPEED:g}..{MAX_SPEED:g}")
    return speed


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, help="seed for every random choice (printed; replays the run)")
    parser.add_argument("--speed", type=_speed, help="time runs this many times faster than real time")
    parser.add_argument("--events", type=Path, metavar="FILE", help="write the event log to FILE")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. client.pollNameServerInterval=10s (repeatable)")
    parser.add_argument("--run-dir", type=Path, metavar="DIR",
                        help="keep the brokers' stores (sockets mode) in DIR after the run; by default they go "
                             "in a temporary folder removed when the run ends")


def _fail(command: str, error: Exception, code: int = 2) -> int:
    print(f"nslab {command}: {error}", file=sys.stderr)
    return code


# --- nslab up -----------------------------------------------------------------------------------

def run_up(args: argparse.Namespace) -> int:
    try:
        live.runtime_dir()  # where `nslab chaos` will reach it: refused now, if not the user's own
    except live.LiveError as e:
        return _fail("up", e)
    play = None
    if args.scenario:
        if args.headless:
            return _fail("up", "a headless scenario is `nslab run NAME`")
        from chaos.scenario import ScenarioError

        from .control import scenarios
        try:
            play = scenarios.Play(scenarios.prepare(args.scenario, seed=args.seed, overrides=args.set))
        except (ScenarioError, ConfigError) as e:
            return _fail("up", e)
        config = play.prepared.config
    else:
        try:
            config = load_config(args.config, args.set)
        except ConfigError as e:
            return _fail("up", e)
    options = RunOptions(sim=args.sim, speed=args.speed, duration=args.duration, events_path=args.events,
                         processes=args.processes, run_dir=args.run_dir)
    if play is not None:
        options.seed = play.prepared.seed
    elif args.seed is not None:
        options.seed = args.seed
    if not args.headless:
        return launch.run_tui(config, options, play)
    if options.sim:
        deterministic_scheduling(options.seed)
    mode = "sim" if options.sim else "sockets"

    async def main():
        stop = trio.Event()
        began = time.monotonic()
        up = False  # every node is up: from then on a signal stops the cluster gracefully
        run = trio.CancelScope()  # the whole run: a signal during start-up, or a second signal, ends it here

        async def drive(cluster, events, nursery):
            nonlocal up
            up = True
            addrs = ";".join(cluster.namesrv_addrs)
            if not options.sim:
                print(f"NAMESRV_ADDR={addrs}", flush=True)
            print(f"seed={options.seed} mode={mode}", flush=True)
            if options.run_dir is not None and not options.sim:
                print(f"run_dir={options.run_dir} (kept)", flush=True)
            # Each client fetches every route it uses before it is up: on a large cluster, seconds.
            started = f"{events.now():.1f} virtual s ({time.monotonic() - began:.2f} wall s)" if options.sim \
                else f"{time.monotonic() - began:.2f} s"
            print(f"every node up after {started}", flush=True)
            server = live.ControlServer(cluster, LabControl(cluster, nursery),
                                        {"mode": mode, "seed": options.seed, "namesrv_addr": addrs}, feed)
            async with trio.open_nursery() as control:
                await control.start(server.serve)
                with trio.move_on_after(options.duration if options.duration is not None else math.inf):
                    await stop.wait()
                control.cancel_scope.cancel()

        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                async def until_signal():
                    nonlocal interrupted
                    async for signum in signals:
                        interrupted = signal.Signals(signum).name
                        if up and not stop.is_set():
                            stop.set()  # graceful: brokers unregister, the log is flushed
                        else:  # a start-up has nothing to stop gracefully; a second signal will not wait
                            run.cancel()
                interrupted = None
                nursery.start_soon(until_signal)
                result = None
                with run:
                    try:
                        result = await run_cluster(config, options, driver=drive, subscribers=[feed.record])
                    finally:
                        feed.close()  # after run.end: viewers get the whole run
                if result is None:
                    log = f": {options.events_path} ends there, without run.end" if options.events_path else ""
                    print(f"stopped by {interrupted} {'while stopping' if up else 'before every node was up'}{log}",
                          file=sys.stderr, flush=True)
                else:
                    print(f"ran {result.virtual_seconds:.1f} virtual s in {result.wall_seconds:.2f} wall s, "
                          f"{result.event_count} events, sha256 {result.event_log_sha256}", flush=True)
                nursery.cancel_scope.cancel()

    feed = EventFeed(live.events_path())  # every record from the first, for `nslab attach`
    feed.start()
    with collector_tuned_for_a_run():
        trio.run(main, clock=make_clock(options))
    return 0


def run_replay(args: argparse.Namespace) -> int:
    from .tui.replay import ReplayError, open_log

    try:
        records, warning = open_log(args.events)
    except ReplayError as e:
        return _fail("replay", e)
    except OSError as e:
        return _fail("replay", f"{args.events}: cannot read: {e.strerror or e}")
    if warning is not None:  # before the screen takes the terminal, and again on it
        print(f"nslab replay: warning: {warning}", file=sys.stderr, flush=True)
    if args.export_scenario is not None:
        from .control.export import export_scenario
        try:
            text = export_scenario(records, origin=str(args.events))
            args.export_scenario.write_text(text, encoding="utf-8")
        except (ValueError, OSError) as e:
            return _fail("replay", e)
        steps = text.count("[[timeline]]")
        print(f"{args.export_scenario}: {steps} step{'s' * (steps != 1)}; run it with `nslab run {args.export_scenario}`")
        return 0
    return launch.run_replay(records, args.speed, warning)


# --- nslab run / scenarios ----------------------------------------------------------------------

def run_scenario(args: argparse.Namespace) -> int:
    from chaos.scenario import ScenarioError

    from .control import scenarios

    try:
        prepared = scenarios.prepare(args.scenario, seed=args.seed, overrides=args.set, apps=args.app)
    except (ScenarioError, ConfigError) as e:
        return _fail("run", e)
    scenario = prepared.scenario
    if prepared.apps:  # an application runs over sockets (lab/apps)
        args.sockets = True
    options = RunOptions(sim=not args.sockets, speed=args.speed, events_path=args.events, run_dir=args.run_dir)
    if prepared.apps:
        problem = scenarios.app_problem(prepared, options)
        if problem is not None:
            return _fail("run", problem)
        from .apps.process import logs_dir
        options.apps_dir = logs_dir(args.run_dir, args.events) or Path(tempfile.mkdtemp(prefix="nslab-apps-"))
    say = (lambda *a: None) if args.json else (lambda *a: print(*a, flush=True))
    say(f"scenario {scenario.name}: {scenario.teaches}")
    say(f"seed {prepared.seed}  (replay: nslab run {args.scenario} --seed {prepared.seed}"
        + "".join(f" --set {s}" for s in args.set) + ")")
    say(f"mode {'sockets' if args.sockets else 'sim'}, {scenario.duration:g}s")
    if args.run_dir is not None and args.sockets:
        say(f"run dir {args.run_dir} (kept)")
    for app in prepared.apps:
        say(f"app {app.name}: {app.command}  (output in {options.apps_dir}/{app.name}.stdout, .stderr)")
    say("fault profile:")
    for line in scenario.profile() or ["(no faults)"]:
        say(f"  {line}")
    say("expectations, as they are decided:")
    verdict = scenarios.run(prepared, options, signals=True, on_result=lambda r: say(
        f"  {r.mark} {r.name}: {r.detail}"))
    if args.junit:
        args.junit.write_text(verdict.junit())
    if args.json:
        print(json.dumps(verdict.to_dict()))
    else:
        label = {True: "VALID", False: "INVALID", None: "UNKNOWN"}[verdict.valid]
        if verdict.error:
            say(f"the run could not be judged: {verdict.error}")
        unjudged = sum(r.ok is None for r in verdict.results)
        say(f"{label}: {sum(r.ok is True for r in verdict.results)}/{len(verdict.results)} expectations held"
            + (f", {unjudged} could not be judged" if unjudged else "") + "; "
            f"{verdict.virtual_seconds:.0f} virtual s in {verdict.wall_seconds:.1f} wall s, "
            f"{verdict.event_count} events, sha256 {verdict.event_log_sha256}")
    return verdict.exit_code


def run_seeds(args: argparse.Namespace) -> int:
    from chaos.scenario import ScenarioError

    from .control import scenarios, seeds
    try:
        chosen = seeds.parse_seeds(args.seeds)
        names = args.scenarios or [p.stem for p in scenarios.bundled()]
        return seeds.gate(names, chosen, jobs=args.jobs)
    except (ValueError, ScenarioError, ConfigError) as e:
        return _fail("seeds", e)


def list_scenarios(args: argparse.Namespace) -> int:
    from chaos.scenario import load_scenario

    from .control import scenarios

    for path in scenarios.bundled():
        scenario = load_scenario(path, vocabulary())
        print(f"{scenario.name:<26} {scenario.teaches}")
    print("\nYour application under chaos (sockets, real time: nslab run NAME --app 'CMD'; docs/apps.md):")
    for path in scenarios.app_scenarios():
        scenario = load_scenario(path, vocabulary())
        print(f"{scenario.name:<26} {scenario.teaches}")
    return 0


# --- nslab chaos --------------------------------------------------------------------------------

def run_chaos(args: argparse.Namespace) -> int:
    if not args.words:
        return _fail("chaos", "say what to do, e.g. `nslab chaos status` or `nslab chaos kill broker-a-0`")
    # Ctrl-C must reach this command even when it was started with SIGINT ignored (as a shell's
    # background job is, or a child of a process that ignores it): Python then installs no handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        reply = live.send(args.words, args.lab)
    except (live.LiveError, OSError) as e:
        return _fail("chaos", e)
    except KeyboardInterrupt:  # Ctrl-C before the answer: the lab drops it and runs on
        return _fail("chaos", "interrupted: the lab may still carry it out (see `nslab chaos status`)", 130)
    print(reply["message"], file=sys.stdout if reply["ok"] else sys.stderr)
    for row in reply.get("status", []):
        extra = "".join(f"  {k}={','.join(v) if isinstance(v, list) else v}" for k, v in row.items()
                        if k not in ("node", "role", "state", "address"))
        print(f"  {row['node']:<12} {row['role']:<10} {row['state']:<10} {row['address'] or '-':<22}{extra}")
    for error in reply.get("control_errors", []):  # what went wrong answering other clients
        print(f"control error: {error}")
    viewers = reply.get("viewers")  # `nslab attach` views and browser tabs on this lab, when any
    if viewers and (viewers["attached"] or viewers["dropped"] or viewers["errors"]):
        print(f"viewers: {viewers['attached']} attached"
              + "".join(f"\n  dropped: {why}" for why in viewers["dropped"])
              + "".join(f"\n  error: {why}" for why in viewers["errors"]))
    return 0 if reply["ok"] else 2


# --- nslab attach / serve -------------------------------------------------------------------------

def run_attach(args: argparse.Namespace) -> int:
    try:
        info = live.pick_lab(args.lab)
    except live.LiveError as e:
        return _fail("attach", e)
    if "events" not in info:
        return _fail("attach", f"lab {info['pid']} streams no events (an older nslab): restart it")
    return launch.run_attach(info, control=not args.read_only)


def run_serve(args: argparse.Namespace) -> int:
    from .tui import serve

    return serve.main(args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # plain `nslab` opens the lab
        args = parser.parse_args(["up"])
    return args.run(args)


def entry() -> None:
    """The `nslab` console script: main() in a process of its own."""
    lifeline.from_environment()  # started by `nslab serve`: end with it
    code = main()
    # Exiting, the interpreter garbage-collects every object left: ~50 ms after a run. Frozen, they
    # are skipped; exit handlers, thread joins, stdio flushing and module teardown still run. Garbage
    # in reference cycles goes unfinalized (the OS closes its files and sockets), so no file may count
    # on the collector to flush it: the event log is closed, a store flushes every write.
    # Not in main(): tests call that in-process.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
