"""Removes a broker's name but leaves its queues in topicQueueTable: routes keep a dead broker.
expect-fail: test_unregister_the_last_address_takes_the_name
"""

from _reference_10 import Reference


class RouteInfoManager(Reference):
    def _remove_topics_of(self, broker_name):
        return []
