"""Exercise 6: which queue a producer sends to (TopicPublishInfo.selectOneMessageQueue).

queues: the topic's MessageQueue list (topic, broker_name, queue_id), in route order.
index: a ThreadLocalIndex; index.increment_and_get() gives the next number of the round robin.
last_broker_name: None for a first attempt; on a retry, the broker the previous attempt failed on.

Check: nslab workshop check 6
"""


def select_one_message_queue(queues, index, last_broker_name=None):
    # The naive choice: round robin, and a retry may land on the broker that just failed.
    # TODO: on a retry, prefer a queue on another broker (when there is one).
    return queues[index.increment_and_get() % len(queues)]
