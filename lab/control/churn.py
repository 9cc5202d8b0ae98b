"""Clients that come and go abruptly: raw RocketMQ consumers (and would-be slaves) against a broker.

Each churn client dials the broker's port directly, as a real client does, heartbeats as a member
of a consumer group, long-polls queues at their end (so the broker holds its pulls), now and then
holds an HA transfer as a slave would, and after a random lifetime leaves — mostly by RST (SO_LINGER
0: a process killed mid-conversation), else by an orderly close. Used by the fault-isolation tests
and the soak benchmark: whatever these clients do, every other connection must be served as before.
"""

from __future__ import annotations

import json
import random
import socket
import struct
from dataclasses import dataclass, field

import msgpack
import trio

from nameserver.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode, encode

from lab.broker.ha import HA_TRANSFER
from lab.broker.pull import FLAG_SUSPEND


@dataclass
class ChurnStats:
    clients: int = 0  # that connected
    resets: int = 0  # left by RST
    closes: int = 0  # left by an orderly close
    pulls_held: int = 0  # long-polls sent that the broker held (answered later or never)
    transfers: int = 0  # HA transfers sent
    errors: list[str] = field(default_factory=list)  # what went wrong on a churn client's own side


class _Client:
    def __init__(self, stream: trio.SocketStream):
        self.stream = stream
        self.decoder = FrameDecoder()
        self.arrived: list[RemotingCommand] = []
        self.opaque = 0

    async def call(self, command: RemotingCommand) -> RemotingCommand:
        """Send and wait for the reply (skipping notifications the broker sends us)."""
        await self.send(command)
        while True:
            reply = await self.frame()
            if reply.is_response and reply.opaque == self.opaque:
                return reply

    async def send(self, command: RemotingCommand) -> None:
        self.opaque += 1
        command.opaque = self.opaque
        await self.stream.send_all(encode(command))

    async def frame(self) -> RemotingCommand:
        while not self.arrived:
            data = await self.stream.receive_some(65536)
            if not data:
                raise trio.BrokenResourceError("closed by the broker")
            self.arrived += self.decoder.feed(data)
            if self.decoder.error is not None:
                raise ValueError(f"the broker sent an undecodable frame: {self.decoder.error}")
        return self.arrived.pop(0)

    async def leave(self, rst: bool) -> None:
        if rst:
            self.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await trio.aclose_forcefully(self.stream)


async def churn_client(address: str, name: str, rng: random.Random, stats: ChurnStats, *, topics: list[str],
                       queues: int, groups: int = 3, lifetime: tuple[float, float] = (0.05, 0.5),
                       ha_share: float = 0.1, rst_share: float = 0.7) -> None:
    host, _, port = address.rpartition(":")
    try:
        client = _Client(await trio.open_tcp_stream(host, int(port)))
    except OSError as e:
        stats.errors.append(f"{name}: connect: {e}")
        return
    stats.clients += 1
    rst = rng.random() < rst_share
    with trio.move_on_after(rng.uniform(*lifetime)):
        try:
            await _behave(client, name, rng, stats, rng.choice(topics), queues, groups, ha_share)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ValueError) as e:
            stats.errors.append(f"{name}: {e}")
    await client.leave(rst)
    if rst:
        stats.resets += 1
    else:
        stats.closes += 1


async def _behave(client: _Client, name: str, rng: random.Random, stats: ChurnStats, topic: str,
                  queues: int, groups: int, ha_share: float) -> None:
    group = f"churn-{rng.randrange(groups)}"
    consumer = {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                "subscriptionDataSet": [{"topic": topic, "subString": "*"}]}
    beat = await client.call(RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(
        {"clientID": f"127.0.0.1@{name}", "consumerDataSet": [consumer]}).encode()))
    if beat.code != ResponseCode.SUCCESS:
        raise ValueError(f"heartbeat answered {beat.code}")
    if rng.random() < ha_share:  # a slave catches up, then is up to date: the master holds its transfer
        stats.transfers += 1
        state = {"offset": 0, "syncOffsets": False}
        while True:
            reply = await client.call(RemotingCommand.request(HA_TRANSFER, body=msgpack.packb(state)))
            data = msgpack.unpackb(reply.body or b"\x80")
            if not data.get("commitLog") and "topicConfig" not in data:
                break
            state["offset"] += len(data.get("commitLog", b""))
            if "topicConfig" in data:
                state["dataVersion"] = data["topicConfig"]["dataVersion"]
        await client.send(RemotingCommand.request(HA_TRANSFER, body=msgpack.packb(state)))  # held till data
    queue_id = rng.randrange(queues)
    reply = await client.call(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}))
    offset = reply.require_int("offset")
    while True:  # a consumer's long polls, one after another, from the queue's end
        stats.pulls_held += 1
        reply = await client.call(RemotingCommand.request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
            "sysFlag": FLAG_SUSPEND, "commitOffset": 0, "suspendTimeoutMillis": 15000, "subVersion": 0}))
        if reply.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            offset = reply.require_int("nextBeginOffset")
        else:
            raise ValueError(f"pull answered {reply.code}: {reply.remark}")


async def churn(address: str, *, clients: int, concurrency: int, seed: int, topics: list[str], queues: int,
                **behaviour) -> ChurnStats:
    """`clients` churn clients against the broker at `address`, `concurrency` at a time."""
    rng = random.Random(seed)
    stats = ChurnStats()
    limit = trio.CapacityLimiter(concurrency)

    async def one(i: int) -> None:
        async with limit:
            await churn_client(address, f"churn-{seed}-{i}", random.Random(rng.random()), stats, topics=topics,
                               queues=queues, **behaviour)

    async with trio.open_nursery() as nursery:
        for i in range(clients):
            nursery.start_soon(one, i)
    return stats


async def churn_steadily(addresses: list[str], *, alive: int, seconds: float, seed: int, topics: list[str],
                         queues: int, **behaviour) -> ChurnStats:
    """`alive` churn clients at all times for `seconds`, each replaced by a new one when it leaves,
    spread over the brokers at `addresses`."""
    rng = random.Random(seed)
    stats = ChurnStats()
    names = iter(range(1 << 62))

    async def worker(deadline: float) -> None:
        while trio.current_time() < deadline:
            await churn_client(rng.choice(addresses), f"churn-{seed}-{next(names)}", random.Random(rng.random()),
                               stats, topics=topics, queues=queues, **behaviour)

    deadline = trio.current_time() + seconds
    async with trio.open_nursery() as nursery:
        for _ in range(alive):
            nursery.start_soon(worker, deadline)
    return stats


def main(argv: list[str] | None = None) -> None:
    """python -m lab.control.churn --alive N --seconds S --topics A,B --queues Q BROKER_ADDR...: churn the
    brokers from a process of its own, then print the stats as one JSON line."""
    import argparse
    from dataclasses import asdict

    parser = argparse.ArgumentParser(prog="python -m lab.control.churn", description=main.__doc__)
    parser.add_argument("addresses", nargs="+")
    parser.add_argument("--alive", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--topics", required=True)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--lifetime", type=float, nargs=2, default=(0.5, 5.0))
    args = parser.parse_args(argv)
    stats = trio.run(lambda: churn_steadily(args.addresses, alive=args.alive, seconds=args.seconds, seed=args.seed,
                                            topics=args.topics.split(","), queues=args.queues,
                                            lifetime=tuple(args.lifetime)))
    result = asdict(stats)
    result["errors"] = len(stats.errors)
    result["first_errors"] = stats.errors[:5]
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
