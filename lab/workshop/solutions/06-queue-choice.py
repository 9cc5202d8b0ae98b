"""Reference solution for exercise 6."""


def select_one_message_queue(queues, index, last_broker_name=None):
    if last_broker_name is not None:
        # One round at most: the first queue on another broker.
        for _ in range(len(queues)):
            mq = queues[index.increment_and_get() % len(queues)]
            if mq.broker_name != last_broker_name:
                return mq
    # A first attempt, or no other broker: plain round robin.
    return queues[index.increment_and_get() % len(queues)]
