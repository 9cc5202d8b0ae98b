"""How a clustering consumer group splits a topic's queues (AllocateMessageQueueAveragely). Pure.

Every member computes the split on its own from the same two sorted lists — the topic's
subscribe queues and the group's consumer ids from a broker — so the members agree without
talking to each other, as long as they see the same lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

Q = TypeVar("Q")


def allocate_averagely(current_cid: str, mq_all: Sequence[Q], cid_all: Sequence[str]) -> list[Q]:
    """Contiguous blocks over the sorted queues; the first `len(mq) % len(cid)` consumers get one
    more. A consumer not in the list (not yet seen by the broker) gets nothing."""
    mq_all, cid_all = sorted(mq_all), sorted(cid_all)
    if current_cid not in cid_all or not mq_all:
        return []
    index = cid_all.index(current_cid)
    mod = len(mq_all) % len(cid_all)
    if len(mq_all) <= len(cid_all):
        average_size = 1
    elif mod > 0 and index < mod:
        average_size = len(mq_all) // len(cid_all) + 1
    else:
        average_size = len(mq_all) // len(cid_all)
    start_index = index * average_size if mod > 0 and index < mod else index * average_size + mod
    size = min(average_size, len(mq_all) - start_index)
    return [mq_all[(start_index + i) % len(mq_all)] for i in range(size)]
