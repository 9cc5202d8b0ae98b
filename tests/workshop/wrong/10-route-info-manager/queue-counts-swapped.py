"""QueueData built with the write and read queue counts swapped: clients read from queues that do not exist.
expect-fail: test_tables_follow_4_9_8_on_generated_requests
"""

from _reference_10 import Reference

from lab.workshop.interfaces import QueueData


class RouteInfoManager(Reference):
    def register_broker(self, *args):
        result = super().register_broker(*args)
        for queues in self.topic_queue_table.values():
            for name, q in list(queues.items()):
                queues[name] = QueueData(q.broker_name, q.write_queue_nums, q.read_queue_nums, q.perm, q.topic_sys_flag)
        return result
