"""The `nslab` command."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import trio

from nameserver import cli as nameserver_cli

from .config import ConfigError, load_config
from .runner import RunOptions, deterministic_scheduling, make_clock, run_cluster


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nslab", description="A lab for RocketMQ's NameServer.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ns = sub.add_parser("nameserver", help="run one RocketMQ-compatible NameServer",
                        description="Run one RocketMQ 4.9-compatible NameServer until SIGINT/SIGTERM.")
    nameserver_cli.add_arguments(ns)
    ns.set_defaults(run=nameserver_cli.run)

    up = sub.add_parser("up", help="run the lab cluster", description=(
        "Run the default cluster (or --config FILE): NameServers, brokers, producers, consumers."))
    up.add_argument("--headless", action="store_true", help="no UI: run until --duration ends or Ctrl-C")
    up.add_argument("--sim", action="store_true",
                    help="simulated network and virtual time (deterministic for a seed)")
    up.add_argument("--seed", type=int, help="seed for every random choice (default: random, printed)")
    up.add_argument("--speed", type=float, help="time runs this many times faster than real time")
    up.add_argument("--duration", type=nameserver_cli.duration, metavar="D", help="stop after D (e.g. 10m)")
    up.add_argument("--events", type=Path, metavar="FILE", help="write the event log to FILE")
    up.add_argument("--config", type=Path, metavar="FILE", help="cluster configuration (TOML)")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key, e.g. client.pollNameServerInterval=10s (repeatable)")
    up.set_defaults(run=run_up)
    return parser


def run_up(args: argparse.Namespace) -> int:
    if not args.headless:
        print("nslab up: the terminal UI is not built yet; run with --headless", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config, args.set)
    except ConfigError as e:
        print(f"nslab up: {e}", file=sys.stderr)
        return 2
    options = RunOptions(sim=args.sim, speed=args.speed, duration=args.duration, events_path=args.events)
    if args.seed is not None:
        options.seed = args.seed
    if options.sim:
        deterministic_scheduling(options.seed)

    def ready(cluster) -> None:
        if not options.sim:
            print("NAMESRV_ADDR=" + ";".join(cluster.namesrv_addrs), flush=True)
        print(f"seed={options.seed} mode={'sim' if options.sim else 'sockets'}", flush=True)

    async def main():
        stop = trio.Event()
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                async def until_signal():
                    async for _ in signals:
                        stop.set()  # graceful: brokers unregister, the log is flushed
                        return
                nursery.start_soon(until_signal)
                result = await run_cluster(config, options, on_ready=ready, stop=stop)
                print(f"ran {result.virtual_seconds:.1f} virtual s in {result.wall_seconds:.2f} wall s, "
                      f"{result.event_count} events, sha256 {result.event_log_sha256}", flush=True)
                nursery.cancel_scope.cancel()

    trio.run(main, clock=make_clock(options))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
