"""No round robin: the first queue not on the failed broker, every time.
expect-fail: test_queue_choice_round_robin
expect-not: test_queue_choice_avoids_failed
"""


def select_one_message_queue(queues, index, last_broker_name=None):
    for mq in queues:
        if mq.broker_name != last_broker_name:
            return mq
    return queues[0]
