"""RocketMQ-style clients (4.9.8 Java client behaviour): the routing every client shares, a producer
and a clustering push consumer.

Pure decision logic (no trio, `now` passed in):
    namesrv      NameServer address sources (the address server's reply too) and the sticky choice
    route_cache  last good routes, route -> publish/subscribe queues, broker address lookup
    selection    producer queue choice, retry policy, latency fault tolerance
    rebalance    AllocateMessageQueueAveragely
trio edges:
    api          MQClientAPIImpl: the wire requests a client sends
    instance     MQClientInstance: channels, route refresh, heartbeats, the periodic tasks
    producer, consumer

The clients know nothing of the simulator, whose classes for the simulated network subclass
MQClientInstance and Consumer on their plain, overridable steps.
"""

from .consumer import Consumer
from .errors import MQBrokerError, MQClientError, NoRouteInfoError
from .instance import MQClientInstance
from .producer import Producer, SendStats

__all__ = ["Consumer", "MQBrokerError", "MQClientError", "MQClientInstance", "NoRouteInfoError", "Producer",
           "SendStats"]
