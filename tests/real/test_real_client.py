"""The real RocketMQ C++ client (rocketmq==0.4.4) against `nslab up --headless` in socket mode, at
real time, faults injected live with `nslab chaos`."""

import time

import pytest

from real_harness import TOPIC, send



def test_every_message_sent_is_consumed_once(lab, clients):
    # The consumer starts first: a new group starts at offset 0 anyway, but this way nothing
    # depends on when the first route poll happens.
    consumer = clients("consume", lab.namesrv, TOPIC, "CG-real", "real-")
    producer = clients("produce", lab.namesrv, TOPIC, "real-")
    results = send(producer, 20)
    assert all_ok(results)
    consumed = []
    deadline = time.monotonic() + 30
    while len(consumed) < 20 and time.monotonic() < deadline:
        consumed.append(consumer.record(timeout=30)["body"])
    time.sleep(1)  # a duplicate would arrive here
    while not consumer.lines.empty():
        line = consumer.lines.get()
        if line and line.startswith("{"):
            consumed.append(line)
    assert sorted(consumed) == sorted(f"real-{i}" for i in range(20))


def statuses(results):
    return [r["status"] for r in results]


def all_ok(results) -> bool:
    assert statuses(results) == ["OK"] * len(results), results  # SendStatus.OK is SEND_OK
    return True


def test_killed_broker_sends_fail_over_at_once(lab, clients):
    producer = clients("produce", lab.namesrv, TOPIC, "kill-")
    assert all_ok(send(producer, 8))  # both broker groups' queues in use
    assert lab.chaos("kill", "broker-a-0").stdout.strip() == "broker-a-0 killed"
    results = send(producer, 16)
    # The port is closed: the attempt on broker-a is refused at once and the retry lands on broker-b.
    assert all_ok(results)
    assert max(r["ms"] for r in results) < 1000, results
    assert "broker-a-0   broker     killed" in lab.chaos("status").stdout


def test_frozen_broker_sends_pay_the_timeout_then_go_elsewhere(lab, clients):
    timeout_ms = 1000  # Producer(timeout=): each attempt's budget (3 s by default)
    producer = clients("produce", lab.namesrv, TOPIC, "freeze-", "--timeout", timeout_ms)
    assert all_ok(send(producer, 8))
    assert "frozen" in lab.chaos("freeze", "broker-a-0").stdout
    try:
        results = send(producer, 8)
        # No latency-based avoidance in this client: round-robin keeps picking broker-a's queues,
        # and each such send waits out one timeout before its retry succeeds on broker-b.
        assert all_ok(results)
        slow = [r for r in results if r["ms"] >= timeout_ms * 0.9]
        fast = [r for r in results if r["ms"] < timeout_ms * 0.5]
        assert slow and fast and len(slow) + len(fast) == 8, results
        assert max(r["ms"] for r in results) < 2 * timeout_ms + 500, results
        assert "broker-a-0   broker     frozen" in lab.chaos("status").stdout
    finally:
        lab.chaos("unfreeze", "broker-a-0")


def test_every_nameserver_down_sends_go_on_from_the_cache(lab, clients):
    producer = clients("produce", lab.namesrv, TOPIC, "nsdown-")
    started = time.monotonic()
    assert all_ok(send(producer, 4))  # the route is cached now
    assert lab.chaos("ns-down", "all").stdout.strip() == "ns-0, ns-1 down"
    # The client polls routes at start + 3 s (then every 30 s whatever the lab's config): keep
    # sending across that poll, which fails, and check the cached route outlives it.
    results = send(producer, 10, gap=0.5)  # 10 x 0.5 s: well past the poll, whatever the start cost
    assert time.monotonic() - started > 4
    assert all_ok(results)
    assert max(r["ms"] for r in results) < 1000, results


@pytest.mark.parametrize("leaves", ["quit", "killed"])
@pytest.mark.parametrize("mode", ["in-process", "processes"])
def test_a_consumer_that_left_never_fails_a_new_producer(lab_for, clients, leaves, mode):
    """A consumer leaves with its long polls held by the brokers (shutting down, or killed: the
    kernel resets its connections); a new producer then sends at once. Before, every attempt was
    answered SYSTEM_ERROR by a broker that tried to answer the dead consumer's held pull."""
    lab = lab_for(mode)
    consumer = clients("consume", lab.namesrv, TOPIC, f"CG-leave-{leaves}", "leave-")
    time.sleep(3)  # its pulls are out and held: the lab's producers keep the queues moving
    if leaves == "quit":
        consumer.close()
    else:
        consumer.proc.kill()
        consumer.proc.wait()
    producer = clients("produce", lab.namesrv, TOPIC, "leave-")
    assert all_ok(send(producer, 30))
    status = lab.chaos("status").stdout
    assert "crashed" not in status and status.count(" up ") >= 10, status
