"""Every topic routed as readable and writable (perm 6), whatever the broker sent: a read-only topic takes sends.
expect-fail: test_tables_follow_4_9_8_on_generated_requests
"""

from _reference_10 import Reference

from lab.workshop.interfaces import QueueData


class RouteInfoManager(Reference):
    def register_broker(self, *args):
        result = super().register_broker(*args)
        for queues in self.topic_queue_table.values():
            for name, q in list(queues.items()):
                queues[name] = QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums, 6, q.topic_sys_flag)
        return result
