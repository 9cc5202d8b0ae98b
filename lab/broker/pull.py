"""What a broker answers to PULL_MESSAGE and QUERY_CONSUMER_OFFSET: pure decisions, no I/O.

Follows DefaultMessageStore.getMessage (status and next offset) and PullMessageProcessor (response
code, suggestWhichBrokerId) of RocketMQ 4.9.8, with offsetCheckInSlave=false, its default.
A pull without anything to read is never answered with an empty SUCCESS: clients treat that as an error.
"""

from __future__ import annotations

from typing import NamedTuple

from nameserver.protocol import ResponseCode

MASTER_ID = 0
SLAVE_ID = 1  # SubscriptionGroupConfig.whichBrokerWhenConsumeSlowly

# PullSysFlag bits
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2

# RocketMQ suggests the slave once the data a consumer has still to read no longer fits in memory:
# more than accessMessageInMemoryMaxRatio (40 %) of the machine's RAM in commit-log bytes. The lab
# has no page cache to run out of, so it counts messages instead, few enough that a stopped consumer
# crosses the line within a minute of a lab run and the switch to the slave shows.
CONSUME_SLOWLY_LAG = 256


class PullResult(NamedTuple):
    code: int
    next_begin_offset: int
    suggest_which_broker_id: int
    found: int  # how many messages to read from the requested offset (code 0 only)


def decide_pull(*, offset: int, max_nums: int, min_offset: int, max_offset: int, is_slave: bool,
                slave_read_enable: bool, slave_available: bool,
                lag_threshold: int = CONSUME_SLOWLY_LAG) -> PullResult:
    """slave_available: a master knows a slave replicating from it (a slave is its own)."""
    code, next_offset, found = _status(offset, max_nums, min_offset, max_offset)
    if is_slave:
        # offsetCheckInSlave=false: a slave never moves a consumer's offset, it sends it back.
        if code != ResponseCode.SUCCESS:
            next_offset = offset
        if code == ResponseCode.PULL_OFFSET_MOVED:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
    # slaveReadEnable only steers the suggestion: the role's PULL_RETRY_IMMEDIATELY for a slave
    # without it is overwritten by the status's code in PullMessageProcessor, so a slave still serves.
    lagging = found and max_offset - next_offset > lag_threshold
    suggest = SLAVE_ID if slave_read_enable and lagging and (slave_available or is_slave) else MASTER_ID
    return PullResult(code, next_offset, suggest, found)


def _status(offset: int, max_nums: int, min_offset: int, max_offset: int) -> tuple[int, int, int]:
    """(response code, nextBeginOffset, messages found) as a master computes them."""
    if max_offset == 0:  # NO_MESSAGE_IN_QUEUE
        code = ResponseCode.PULL_NOT_FOUND if offset == 0 else ResponseCode.PULL_OFFSET_MOVED
        return code, 0, 0
    if offset < min_offset:  # OFFSET_TOO_SMALL
        return ResponseCode.PULL_OFFSET_MOVED, min_offset, 0
    if offset == max_offset:  # OFFSET_OVERFLOW_ONE: the consumer is up to date
        return ResponseCode.PULL_NOT_FOUND, offset, 0
    if offset > max_offset:  # OFFSET_OVERFLOW_BADLY
        return ResponseCode.PULL_OFFSET_MOVED, min_offset if min_offset == 0 else max_offset, 0
    found = min(max_nums, max_offset - offset)
    if found <= 0:  # maxMsgNums 0: nothing matched what was asked
        return ResponseCode.PULL_RETRY_IMMEDIATELY, offset, 0
    return ResponseCode.SUCCESS, offset + found, found


def consumer_offset_reply(stored: int | None, min_offset: int) -> int | None:
    """QUERY_CONSUMER_OFFSET: the stored offset; for a group new to the queue 0 when the queue
    still starts at 0 (ConsumerManageProcessor), else None: 22 QUERY_NOT_FOUND."""
    if stored is not None:
        return stored
    return 0 if min_offset <= 0 else None
