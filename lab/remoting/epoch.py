"""Epoch milliseconds for what goes on the wire: message born/store timestamps, DataVersions,
a broker's bootTimestamp. Pure: the clock reading and the network are arguments.

RocketMQ puts System.currentTimeMillis() in these fields, and tools print them as dates (mqadmin
queryMsgById: "Born Timestamp"). The lab's clock counts seconds from the run's start, so a node
turns its clock into epoch ms with a base fixed when the node is made:

- sockets mode (real or accelerated clock): the wall clock at the clock's zero, so a real-time
  run writes today's wall clock, and an accelerated one today's date running faster;
- simulated mode: SIM_EPOCH_MS, a constant, plus virtual time — no wall clock, so the same seed
  still gives a byte-identical event log and identical records.

The event log's `t` stays seconds since the run started; only wire fields use this.
"""

from __future__ import annotations

import math
import time

from chaos.network import Network, SimNetwork

# 2023-11-14T22:13:20Z: the epoch a simulated run starts at (t = 0). Any fixed value keeps replays
# byte-exact; this one is after every date RocketMQ's tools sanity-check against.
SIM_EPOCH_MS = 1_700_000_000_000


def epoch_base_ms(network: Network, clock_now: float) -> int:
    """What to add to clock milliseconds to get epoch milliseconds on this node."""
    if isinstance(network, SimNetwork):
        return SIM_EPOCH_MS
    # Rounded up, and a millisecond more for epoch_ms truncating the clock: a timestamp made
    # here is never behind the wall clock, so a broker never stores a message before a client on
    # the same machine (System.currentTimeMillis) says it was born.
    return math.ceil(time.time() * 1000 - clock_now * 1000) + 1


def epoch_ms(base_ms: int, clock_now: float) -> int:
    """The clock reading `clock_now` (seconds) as epoch milliseconds."""
    return base_ms + int(clock_now * 1000)
