"""`nslab nameserver` / `python -m nameserver`: one NameServer on TCP until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

import trio

from .config import NamesrvConfig, parse_duration
from .server import NameServer

log = logging.getLogger("nameserver")


def duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=9876, help="TCP port (default 9876; 0 picks a free one)")
    parser.add_argument("--scan-interval", type=duration, default=10.0, metavar="D",
                        help="scanNotActiveBroker period, e.g. 10s (default 10s)")
    parser.add_argument("--expiry", type=duration, default=120.0, metavar="D",
                        help="brokerChannelExpiredTime: remove a broker silent this long (default 120s)")
    parser.add_argument("--idle", type=duration, default=120.0, metavar="D",
                        help="serverChannelMaxIdleTimeSeconds: close a connection idle this long (default 120s)")
    parser.add_argument("--kv-config", metavar="FILE", default=None,
                        help="persist KV config to FILE (RocketMQ's kvConfig.json); default: memory only")
    parser.add_argument("--order-message-enable", action="store_true",
                        help="add orderTopicConf from the ORDER_TOPIC_CONFIG namespace to routes")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = NamesrvConfig(
        listenPort=args.port, kvConfigPath=args.kv_config, orderMessageEnable=args.order_message_enable,
        scanNotActiveBrokerInterval=args.scan_interval, brokerChannelExpiredTime=args.expiry,
        serverChannelMaxIdleTimeSeconds=args.idle,
    )
    failure = None
    try:
        trio.run(_main, NameServer(config), args.host, args.port)
    except* OSError as group:
        failure = group.exceptions[0]
    if failure is not None:
        print(f"nslab nameserver: cannot listen on {args.host}:{args.port}: {failure.strerror or failure}",
              file=sys.stderr)
        return 1
    return 0


async def _main(server: NameServer, host: str, port: int) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            bound = await nursery.start(server.serve_tcp, host, port)
            # The first line on stdout says where to point clients, as `nslab up` does.
            print(f"NAMESRV_ADDR={bound[0]}:{bound[1]}", flush=True)
            async for signum in signals:
                log.info("%s received, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nameserver", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
