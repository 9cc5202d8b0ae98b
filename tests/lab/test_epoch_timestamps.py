"""Message born/store timestamps are epoch milliseconds (lab/remoting/epoch.py): the wall clock
over real sockets; SIM_EPOCH_MS plus virtual time in simulation, so a seed still replays byte-exact.

Before, both were the run's clock from 0, which tools print as 1970-01-01 00:00:01,114."""

import random
import time

import trio

from lab.broker.store import MessageStore
from lab.clients.instance import MQClientInstance
from lab.clients.producer import Producer
from lab.config import LabConfig
from lab.remoting.channels import Node
from lab.remoting.epoch import SIM_EPOCH_MS, epoch_base_ms, epoch_ms
from lab.remoting.message import decode_messages
from lab.run.runner import RunOptions, run

TOPIC = "TopicTest"


def test_over_sockets_a_node_s_timestamps_are_never_behind_the_wall_clock(monkeypatch):
    # A C++ client stamps bornTimestamp with System.currentTimeMillis; the broker's store time,
    # made later on the same machine, must not come out a millisecond earlier (mqadmin shows both).
    from chaos.network import TcpNetwork
    rng = random.Random(7)
    network = object.__new__(TcpNetwork)  # only its type matters
    for _ in range(2000):
        wall_at_zero = 1_795_000_000 + rng.random()  # the wall clock when the run's clock read 0
        made, later = rng.uniform(0, 5), rng.uniform(0, 600)
        monkeypatch.setattr(time, "time", lambda: wall_at_zero + made)
        base = epoch_base_ms(network, made)
        now = made + later
        born = int((wall_at_zero + now) * 1000)  # currentTimeMillis at the same instant
        assert born <= epoch_ms(base, now) <= born + 3


def test_epoch_ms_adds_the_node_s_base_to_the_clock():
    assert epoch_ms(SIM_EPOCH_MS, 1.1149) == SIM_EPOCH_MS + 1114
    assert epoch_ms(SIM_EPOCH_MS, 0) == 1_700_000_000_000  # 2023-11-14T22:13:20Z


async def test_over_sockets_born_and_store_timestamps_are_the_wall_clock(tcp):
    ns = await tcp.start_nameserver(port=0)
    broker = await tcp.start_broker()
    node = Node("producer-0", tcp.network, tcp.events, LabConfig(), random.Random(0))
    assert abs(node.now_ms() - time.time() * 1000) < 1000
    producer = Producer(node, MQClientInstance(node, [ns], tcp.nursery), [TOPIC])
    await producer.start()
    before = time.time() * 1000
    await producer.send(TOPIC, b"now")
    after = time.time() * 1000
    store: MessageStore = broker.broker.store
    (msg,) = decode_messages(store.read_commit_log(0, 1 << 20))
    # Today's date, not 1970. Each node fixes its base once, from its own reading of both clocks:
    # the producer's and the broker's may differ by a few ms, so born may pass stored by as much.
    assert before - 1000 <= msg.born_timestamp <= after + 1000
    assert before - 1000 <= msg.store_timestamp <= after + 1000
    assert msg.born_timestamp <= msg.store_timestamp + 5
    # and what the pull hands a consumer is the same record
    pulled = await tcp.pull(broker.address, queue_id=msg.queue_id)
    assert decode_messages(pulled.body)[0].store_timestamp == msg.store_timestamp


def simulated_run(seed: int) -> tuple[str, bytes]:
    clusters = []
    result = run(LabConfig(), RunOptions(sim=True, seed=seed, duration=15.0), on_ready=clusters.append)
    logs = b"".join(store.read_commit_log(0, 1 << 30) for _, store in sorted(clusters[0].stores.items()))
    return result.event_log_sha256, logs


def test_in_simulation_timestamps_are_a_fixed_epoch_plus_virtual_time_and_replay_byte_exact():
    sha, logs = simulated_run(7)
    messages = decode_messages(logs)
    assert messages
    for msg in messages:
        assert SIM_EPOCH_MS <= msg.born_timestamp <= msg.store_timestamp <= SIM_EPOCH_MS + 30_000  # 15 s, then the shutdown
    assert simulated_run(7) == (sha, logs)  # same seed: same events, same stored bytes


def test_a_simulated_node_s_base_is_the_fixed_epoch_and_a_socket_node_s_the_wall_clock():
    async def main():
        from chaos.network import SimNetwork, TcpNetwork
        sim_base = epoch_base_ms(SimNetwork(seed=1), trio.current_time())
        async with trio.open_nursery() as nursery:
            tcp_base = epoch_base_ms(TcpNetwork(nursery), trio.current_time())
            nursery.cancel_scope.cancel()
        return sim_base, tcp_base + int(trio.current_time() * 1000)

    sim_base, wall = trio.run(main)
    assert sim_base == SIM_EPOCH_MS
    assert abs(wall - time.time() * 1000) < 1000
