"""The `nslab` command."""

from __future__ import annotations

import argparse
import sys

from nameserver import cli as nameserver_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nslab", description="A lab for RocketMQ's NameServer.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ns = sub.add_parser("nameserver", help="run one RocketMQ-compatible NameServer",
                        description="Run one RocketMQ 4.9-compatible NameServer until SIGINT/SIGTERM.")
    nameserver_cli.add_arguments(ns)
    ns.set_defaults(run=nameserver_cli.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
