"""RocketMQ 4.9.8 numbers: request and response codes, languages, serialize types, versions."""

from enum import IntEnum


class SerializeType(IntEnum):
    """High byte of the header-length word.

    JSON and ROCKETMQ are RocketMQ's own. MSGPACK is nslab's, for its own nodes: 0x4D ('M') is far
    from RocketMQ's values so a future RocketMQ type cannot collide with it. A server answers in the
    request's type, so a Java or C++ peer never sees a MSGPACK frame unless it sends one.
    """

    JSON = 0
    ROCKETMQ = 1
    MSGPACK = 0x4D


class RequestCode(IntEnum):
    # broker codes used by producers and consumers
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    GET_CONSUMER_LIST_BY_GROUP = 38
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    GET_CONSUMER_RUNNING_INFO = 307  # broker -> client, forwarded from mqadmin consumerStatus
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    # NameServer codes (4.9.8 DefaultRequestProcessor)
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25


LANGUAGES = (
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY",
    "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS",
)  # index = the LanguageCode byte of a ROCKETMQ header
LANGUAGE_CODE = {name: i for i, name in enumerate(LANGUAGES)}

# MQVersion.Version ordinals the NameServer branches on.
V3_0_11 = 37  # REGISTER_BROKER body is RegisterBrokerBody from here on
V4_9_4 = 401  # route bodies with quoted brokerAddrs keys from here on
V4_9_8 = 409
CURRENT_VERSION = V4_9_8

FLAG_RESPONSE = 1
FLAG_ONEWAY = 2

# PermName bits
PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

# TopicSysFlag bits
FLAG_UNIT = 1
FLAG_UNIT_SUB = 2

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
FAQ_URL_NO_ROUTE = "http://rocketmq.apache.org/docs/faq/"
