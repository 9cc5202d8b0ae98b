"""DefaultRequestProcessor: every request code a 4.9.8 NameServer handles, sans-I/O.

`process_request(command, channel, now)` returns the reply, or None when nothing is to be sent
(oneway requests). Housekeeping (channel destroyed, expiry scan) goes through here too, so every
change to the tables is reported to one listener.

Unknown codes are answered with 3 REQUEST_CODE_NOT_SUPPORTED as 5.x does. 4.9.8 sends nothing and
lets the caller wait out its timeout (3 s for a client, 6 s for a broker), which teaches nothing and
stalls a lab; every 4.9 client handles code 3 as an ordinary error.
"""

from __future__ import annotations

import logging
from typing import Callable

from . import bodies
from .config import NamesrvConfig, parse_properties
from .kvconfig import KVConfigManager
from .protocol import HeaderError, crc32, RemotingCommand, RequestCode, ResponseCode
from .protocol.codes import FAQ_URL_NO_ROUTE, NAMESPACE_ORDER_TOPIC_CONFIG, V3_0_11, V4_9_4
from .routes import RemovedBroker, RouteInfoManager

log = logging.getLogger("nameserver.processor")

Listener = Callable[[str, dict], None]


_NO_ANSWER = object()


def _no_listener(kind: str, fields: dict) -> None:
    pass


def removal_fields(removed: RemovedBroker) -> dict:
    return {
        "broker_addr": removed.broker_addr, "reason": removed.reason,
        "broker_name": removed.broker_name, "broker_id": removed.broker_id,
        "cluster": removed.cluster_name, "broker_name_removed": removed.broker_name_removed,
        "removed_topics": removed.removed_topics,
    }


class DefaultRequestProcessor:
    def __init__(self, config: NamesrvConfig | None = None, *, listener: Listener | None = None):
        self.config = config or NamesrvConfig()
        self.routes = RouteInfoManager(self.config.brokerChannelExpiredTime)
        self.kv = KVConfigManager(self.config.kvConfigPath)
        self.listener = listener or _no_listener
        # Encoded route bodies, reused until the tables or the KV config change.
        self._route_cache: dict[tuple, bytes | None] = {}
        self._route_cache_key: tuple = ()
        # What each topic was last answered (its _route_cache key -> body, None for 17), and the
        # queries since the last `ns.routes`.
        self._last_answer: dict[tuple, bytes | None] = {}
        self.answers_version = 0  # bumped with every answer unlike the last for its topic (ns.route)
        self._route_queries = self._route_not_found = self._route_unchanged = 0
        self._handlers = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kvlist_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_topic_list,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
        }

    # --- entry points -----------------------------------------------------------------------------

    def process_request(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand | None:
        if request.is_response:
            log.warning("dropping a response (opaque %s) sent to the NameServer", request.opaque)
            return None
        handler = self._handlers.get(request.code)
        if handler is None:
            log.warning("request type %s not supported", request.code)
            # Answered even when oneway, as RocketMQ's remoting layer does on this path.
            return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                    f" request type {request.code} not supported")
        try:
            reply = handler(request, channel, now)
        except (HeaderError, bodies.BodyError) as e:
            log.warning("bad request %s from %s: %s", request.code, getattr(channel, "remote_addr", "?"), e)
            reply = request.response(ResponseCode.SYSTEM_ERROR, str(e))
        except Exception as e:  # a bug must cost one request, never the server
            log.exception("processing request %s failed", request.code)
            reply = request.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
        return None if request.is_oneway else reply

    def on_channel_destroy(self, channel: object, remote_addr: str, detail: str = "") -> RemovedBroker | None:
        removed = self.routes.on_channel_destroy(channel, remote_addr)
        if removed is not None:
            self.listener("ns.remove", {**removal_fields(removed), "detail": detail})
        return removed

    def scan_not_active_broker(self, now: float, limit: int | None = None) -> list[object]:
        """Expire silent brokers (at most `limit`); return their channels, one per broker removed,
        which the caller must close. Reports the route queries answered since the last scan first
        (`ns.routes`)."""
        self.report_route_queries()
        channels = []
        for removed, channel in self.routes.scan_not_active_broker(now, limit):
            self.listener("ns.remove", removal_fields(removed))
            channels.append(channel)
        return channels

    # --- brokers ----------------------------------------------------------------------------------

    def register_broker(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        broker_addr = request.require("brokerAddr")
        broker_name = request.require("brokerName")
        cluster_name = request.require("clusterName")
        ha_server_addr = request.require("haServerAddr")
        broker_id = request.require_int("brokerId")
        body = request.body
        crc = request.int_field("bodyCrc32", 0)
        if crc and crc32(body or b"") != crc:  # UtilAll.crc32(null) is 0: a crc without a body fails
            log.warning("receive registerBroker request, crc32 not match")
            # Built with RegisterBrokerResponseHeader, as every reply of this handler: extFields {}.
            return request.response(ResponseCode.SYSTEM_ERROR, "crc32 not match", ext_fields={})
        legacy = request.version < V3_0_11
        parsed = bodies.RegisterBrokerBody.decode(
            body, request.serialize_type, compressed=request.bool_field("compressed"), legacy=legacy)
        result = self.routes.register_broker(
            cluster_name, broker_addr, broker_name, broker_id, ha_server_addr, parsed.data_version,
            parsed.queue_rows, parsed.filter_server_list, channel, now)
        self.listener("ns.register", {
            "broker_addr": broker_addr, "broker_name": broker_name, "broker_id": broker_id,
            "cluster": cluster_name, "data_version": list(parsed.data_version),
            "first": result.first, "topics_applied": result.topics_applied,
        })
        # The namespace's KVTable, as GET_KVLIST_BY_NAMESPACE sends it; no body without the
        # namespace. A namespace holding only null values still sends {"table":{}}.
        order_conf = self.kv.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        return request.response(
            ResponseCode.SUCCESS,
            ext_fields={"haServerAddr": result.ha_server_addr, "masterAddr": result.master_addr},
            body=self._plain(bodies.kv_table_to_wire(order_conf), request) if order_conf is not None else None,
        )

    @staticmethod
    def _plain(obj: object, request: RemotingCommand) -> bytes:
        """A body as RemotingSerializable.encode writes it: plain JSON.toJSONString, so text goes
        out as UTF-8, unescaped, and maps in their Java order. Only route data uses the
        browser-compatible form (see get_route_info_by_topic)."""
        return bodies.dump(obj, request.serialize_type, standard=False)

    def unregister_broker(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        removed = self.routes.unregister_broker(
            request.require("clusterName"), request.require("brokerAddr"),
            request.require("brokerName"), request.require_int("brokerId"))
        self.listener("ns.remove", removal_fields(removed))
        return request.response(ResponseCode.SUCCESS)

    def query_data_version(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        for name in ("brokerName", "clusterName", "brokerId"):
            request.require(name)
        broker_addr = request.require("brokerAddr")
        data_version = bodies.data_version_from_wire(
            bodies.load(request.body, request.serialize_type) if request.body else None)
        changed = self.routes.is_broker_topic_config_changed(broker_addr, data_version)
        if not changed:
            self.routes.update_broker_info_update_timestamp(broker_addr, now)
        stored = self.routes.query_broker_topic_config(broker_addr)
        return request.response(
            ResponseCode.SUCCESS, ext_fields={"changed": changed},
            body=self._plain(bodies.data_version_to_wire(stored), request) if stored else None)

    def wipe_write_perm_of_broker(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        broker_name = request.require("brokerName")
        count = self.routes.wipe_write_perm_of_broker(broker_name)
        self.listener("ns.perm", {"broker_name": broker_name, "op": "wipe", "topics": count})
        return request.response(ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": count})

    def add_write_perm_of_broker(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        broker_name = request.require("brokerName")
        count = self.routes.add_write_perm_of_broker(broker_name)
        self.listener("ns.perm", {"broker_name": broker_name, "op": "add", "topics": count})
        return request.response(ResponseCode.SUCCESS, ext_fields={"addTopicCount": count})

    # --- routes -----------------------------------------------------------------------------------

    def get_route_info_by_topic(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        topic = request.require("topic")
        standard = request.version >= V4_9_4 or request.bool_field("acceptStandardJsonOnly")
        key = (topic, request.serialize_type, standard)
        body = self._route_body(key)
        self._count_route_query(key, body)
        if body is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {topic}\nSee {FAQ_URL_NO_ROUTE} for further details.")
        return request.response(ResponseCode.SUCCESS, body=body)

    def _count_route_query(self, key: tuple, body: bytes | None) -> None:
        """`ns.route` for an answer unlike the last one this NameServer gave for the topic (the
        first included); the others are only counted, and `ns.routes` reports the counts with each
        scan. Clients poll every topic every 30 s: at 2,000 topics a record per answer made the
        event log mostly copies of the answer before."""
        self._route_queries += 1
        if body is None:
            self._route_not_found += 1
        last = self._last_answer.get(key, _NO_ANSWER)
        if last is body or (last is not _NO_ANSWER and last == body):
            self._route_unchanged += 1
            return
        self._last_answer[key] = body
        self.answers_version += 1
        self.listener("ns.route", {"topic": key[0], "found": body is not None})

    def report_route_queries(self) -> None:
        """`ns.routes`: the route queries answered since the last report, when there were any."""
        if self._route_queries:
            self.listener("ns.routes", {"queries": self._route_queries, "not_found": self._route_not_found,
                                        "unchanged": self._route_unchanged})
            self._route_queries = self._route_not_found = self._route_unchanged = 0

    def route_generation(self) -> tuple:
        """Changes whenever a route answer may: the routes, the KV config, orderMessageEnable
        (which UPDATE_NAMESRV_CONFIG can switch)."""
        return self.routes.generation, self.kv.generation, self.config.orderMessageEnable

    def last_route_answer(self, key: tuple) -> bytes | None:
        """The body the topic was last answered with (key: as route_body's), None for none or 17."""
        return self._last_answer.get(key)

    def count_repeated_route_queries(self, n: int) -> None:
        """n route queries answered with their topics' last answers, outside process_request:
        counted as _count_route_query counts a repeat."""
        self._route_queries += n
        self._route_unchanged += n

    def route_body(self, key: tuple) -> bytes | None:
        """The body GET_ROUTEINFO_BY_TOPIC answers now; key: (topic, serialize type, standard JSON
        only). None: no route (17)."""
        return self._route_body(key)

    def _route_body(self, key: tuple) -> bytes | None:
        """key: (topic, serialize type, standard JSON only)."""
        generation = self.route_generation()
        if generation != self._route_cache_key:
            self._route_cache.clear()
            self._route_cache_key = generation
        topic, serialize_type, standard = key
        try:
            return self._route_cache[key]
        except KeyError:
            pass
        route = self.routes.pickup_topic_route_data(topic)
        body = None
        if route is not None:
            if self.config.orderMessageEnable:
                route.order_topic_conf = self.kv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
            body = bodies.dump(bodies.route_to_wire(route), serialize_type, standard=standard)
        if len(self._route_cache) < 100_000:
            self._route_cache[key] = body
        return body

    def get_broker_cluster_info(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        # Always fastjson's legacy form (unquoted brokerAddrs keys), in 4.9.8 as in 5.x; maps in
        # their HashMap order.
        info = bodies.cluster_info_to_wire(*self.routes.java_cluster_info())
        return request.response(ResponseCode.SUCCESS, body=self._plain(info, request))

    def _topic_list(self, request: RemotingCommand, topics: list[str], broker_addr: str | None = None) -> RemotingCommand:
        body = bodies.topic_list_to_wire(topics, broker_addr)
        return request.response(ResponseCode.SUCCESS, body=self._plain(body, request))

    def get_all_topic_list(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        return self._topic_list(request, self.routes.get_all_topic_list())

    def get_topics_by_cluster(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        return self._topic_list(request, self.routes.get_topics_by_cluster(request.require("cluster")))

    def get_system_topic_list(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        topics, broker_addr = self.routes.get_system_topic_list()
        return self._topic_list(request, topics, broker_addr)

    def get_unit_topic_list(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        return self._topic_list(request, self.routes.get_unit_topics())

    def get_has_unit_sub_topic_list(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        return self._topic_list(request, self.routes.get_has_unit_sub_topic_list())

    def get_has_unit_sub_ununit_topic_list(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        return self._topic_list(request, self.routes.get_has_unit_sub_un_unit_topic_list())

    def delete_topic_in_namesrv(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        topic = request.require("topic")
        cluster = request.field("clusterName")
        self.routes.delete_topic(topic, cluster.strip() if cluster and cluster.strip() else None)
        self.listener("ns.delete_topic", {"topic": topic, "cluster": cluster})
        return request.response(ResponseCode.SUCCESS)

    # --- KV config and NameServer config ---------------------------------------------------------

    def put_kv_config(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        namespace, key = request.field("namespace"), request.field("key")
        if namespace is None or key is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        # A missing value is stored as Java stores it: null. GET_KV_CONFIG then answers 22, and
        # lists, register replies and the KV file leave the key out (fastjson drops null values).
        self.kv.put_kv_config(namespace, key, request.field("value"))
        return request.response(ResponseCode.SUCCESS)

    def get_kv_config(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        namespace, key = request.require("namespace"), request.require("key")
        value = self.kv.get_kv_config(namespace, key)
        if value is None:
            # Java builds this reply with GetKVConfigResponseHeader: a custom header with no value
            # still makes extFields an empty HashMap, which fastjson writes as {}.
            return request.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}",
                                    ext_fields={})
        return request.response(ResponseCode.SUCCESS, ext_fields={"value": value})

    def delete_kv_config(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        self.kv.delete_kv_config(request.require("namespace"), request.require("key"))
        return request.response(ResponseCode.SUCCESS)

    def get_kvlist_by_namespace(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        namespace = request.require("namespace")
        table = self.kv.get_kv_list_by_namespace(namespace)
        if table is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return request.response(ResponseCode.SUCCESS, body=self._plain(bodies.kv_table_to_wire(table), request))

    def update_config(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        if not request.body:
            return request.response(ResponseCode.SUCCESS)
        try:
            text = request.body.decode()
        except UnicodeDecodeError:
            return request.response(ResponseCode.SYSTEM_ERROR, "body is not UTF-8")
        properties = parse_properties(text)
        if set(properties) & self.config.black_list():
            return request.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            applied = self.config.update_from_properties(text)
        except ValueError as e:
            return request.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {e}")
        self.routes.broker_channel_expired_time = self.config.brokerChannelExpiredTime
        log.info("updateConfig, %s", applied)
        return request.response(ResponseCode.SUCCESS)

    def get_config(self, request: RemotingCommand, channel: object, now: float) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, body=self.config.to_properties().encode())
