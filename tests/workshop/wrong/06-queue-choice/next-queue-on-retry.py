"""On a retry, the next queue in turn: still broker-a's, most of the time.
expect-fail: test_queue_choice_avoids_failed
expect-not: test_queue_choice_round_robin
"""


def select_one_message_queue(queues, index, last_broker_name=None):
    return queues[index.increment_and_get() % len(queues)]
