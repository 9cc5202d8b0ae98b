"""What a learner's code receives and returns: the lab's data types, and nothing that decides.

Briefs and starters import from here. Each name below is a plain record type or a helper with no
answer in it; the lab's own version of what an exercise has you write is not importable while your
code is checked (it runs in a process of its own, where asking for it raises ImportError).

Exercise 10 (RouteInfoManager) — the NameServer's five tables, by RocketMQ's names:
    topic_queue_table    topic -> {broker_name: QueueData}
    broker_addr_table    broker_name -> BrokerData(cluster, broker_name, broker_addrs={broker_id: addr})
    cluster_addr_table   cluster -> set of broker names (a dict used as an ordered set works too)
    broker_live_table    broker_addr -> BrokerLiveInfo(last_update_timestamp, data_version, channel, ha_server_addr)
    filter_server_table  broker_addr -> [filter server address]
  and returns RegisterBrokerResult / RemovedBroker (reason "expired" | "channel_closed" | "unregistered").

Exercise 11 (NamesrvSelector) — a client's choice of NameServer; `rng` is a random.Random.

Exercise 12 (BrokerOuterAPI) — a broker's calls to the NameServers: `channels.invoke(address,
command, timeout)` sends one request and returns the reply (raising RemotingError on a timeout or a
dead connection); `request(code, header, body)` builds one; `encode_register_body(...)` the body.
"""

from lab.broker.outer_api import BrokerIdentity
from lab.broker.outer_api import RegisterBrokerResult as BrokerRegisterResult
from lab.clients.route_cache import MessageQueue
from lab.clients.selection import ThreadLocalIndex
from lab.remoting.channels import LAB_SERIALIZE_TYPE, request
from nameserver.bodies import (RegisterBrokerBody, SerializeType, data_version_to_wire, encode_register_body,
                               topic_config_to_wire)
from nameserver.client import RemotingError
from nameserver.protocol import RequestCode, ResponseCode, crc32
from nameserver.routes import (MASTER_ID, BrokerData, BrokerLiveInfo, DataVersion, QueueData,
                               RegisterBrokerResult, RemovedBroker, TopicConfig)

__all__ = [
    "BrokerData", "BrokerIdentity", "BrokerLiveInfo", "BrokerRegisterResult", "DataVersion", "LAB_SERIALIZE_TYPE",
    "MASTER_ID", "MessageQueue", "QueueData", "RegisterBrokerBody", "RegisterBrokerResult", "RemotingError",
    "RemovedBroker", "RequestCode", "ResponseCode", "SerializeType", "ThreadLocalIndex", "TopicConfig", "crc32",
    "data_version_to_wire", "encode_register_body", "request", "topic_config_to_wire",
]
