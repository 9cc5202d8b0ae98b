"""Request and response bodies of the NameServer codes, wire <-> route objects.

JSON and ROCKETMQ frames carry fastjson bodies; MSGPACK frames (nslab's own nodes) carry the same
structures, keys and all, in msgpack. A compressed REGISTER_BROKER body is RocketMQ's own binary
form whatever the header type.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Mapping
from typing import Iterable, Iterator

import msgpack
import msgspec

from .protocol import fastjson
from .protocol.frames import FRAME_MAX_LENGTH
from .protocol.fastjson import JavaMap
from .protocol.headers import UTF8_AS_JAVA
from .protocol.codes import SerializeType
from .routes import BrokerData, DataVersion, QueueData, TopicConfig, TopicRouteData


class BodyError(ValueError):
    """A body that does not decode as the structure its request code calls for."""


# What a compressed body may inflate to. 4.9.8 inflates without a bound (a 1 MiB zlib bomb is
# 1 GiB of heap); the frame cap is the lab's bound for the inflated body too, far above any real
# registration (10,000 topics inflate to ~0.4 MB).
MAX_INFLATED_BODY = FRAME_MAX_LENGTH


def inflate(body: bytes, what: str, limit: int = MAX_INFLATED_BODY) -> bytes:
    """A zlib body inflated, never more than limit + 1 bytes of it: BodyError, naming `what` and
    the limit, for a body that inflates beyond it or is not a whole zlib stream."""
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(body, limit + 1)
    except zlib.error as e:
        raise BodyError(f"undecodable {what}: {e}") from None
    if len(raw) > limit:
        raise BodyError(f"{what} inflates to more than {limit} bytes ({limit / 2**20:g} MiB), the limit")
    if not inflater.eof:
        raise BodyError(f"undecodable {what}: incomplete or truncated zlib stream")
    return raw


# --- generic --------------------------------------------------------------------------------------

def dump(obj: object, serialize_type: SerializeType, *, standard: bool = True) -> bytes:
    """Null map values are omitted in every encoding, as fastjson omits them. A lone surrogate in
    a string goes out as "?", as Java's String.getBytes(UTF-8) writes it."""
    if serialize_type == SerializeType.MSGPACK:
        return msgpack.packb(_without_nulls(obj), unicode_errors=UTF8_AS_JAVA)
    return fastjson.dumps(obj, standard=standard).encode("utf-8", UTF8_AS_JAVA)


def _without_nulls(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _without_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_without_nulls(v) for v in obj]
    return obj


def load(body: bytes, serialize_type: SerializeType) -> object:
    try:
        if serialize_type == SerializeType.MSGPACK:
            return msgpack.unpackb(body, raw=False, strict_map_key=False)
        return fastjson.loads(body)
    except Exception as e:  # json and msgpack raise several unrelated types for bad input
        raise BodyError(f"undecodable body: {e}") from None


def _obj(value: object, what: str) -> dict:
    if not isinstance(value, dict):
        raise BodyError(f"{what} is not an object")
    return value


# --- small structures -------------------------------------------------------------------------------

def data_version_to_wire(dv: DataVersion) -> dict:
    return {"counter": dv.counter, "timestamp": dv.timestamp}


def data_version_from_wire(obj: object) -> DataVersion:
    if obj is None:
        return DataVersion()
    d = _obj(obj, "dataVersion")
    try:
        return DataVersion(int(d.get("timestamp") or 0), int(d.get("counter") or 0))
    except (TypeError, ValueError):
        raise BodyError(f"bad dataVersion {d!r}") from None


def topic_config_to_wire(tc: TopicConfig) -> dict:
    return {
        "order": tc.order, "perm": tc.perm, "readQueueNums": tc.read_queue_nums,
        "topicFilterType": tc.topic_filter_type, "topicName": tc.topic_name,
        "topicSysFlag": tc.topic_sys_flag, "writeQueueNums": tc.write_queue_nums,
    }


def topic_config_from_wire(name: str, obj: object) -> TopicConfig:
    d = _obj(obj, f"topic config {name!r}")
    try:
        return TopicConfig(
            topic_name=str(d.get("topicName") or name),
            read_queue_nums=int(d.get("readQueueNums", 16)),
            write_queue_nums=int(d.get("writeQueueNums", 16)),
            perm=int(d.get("perm", 6)),
            topic_filter_type=str(d.get("topicFilterType") or "SINGLE_TAG"),
            topic_sys_flag=int(d.get("topicSysFlag") or 0),
            order=bool(d.get("order", False)),
        )
    except (TypeError, ValueError):
        raise BodyError(f"bad topic config {name!r}: {d!r}") from None


# --- REGISTER_BROKER --------------------------------------------------------------------------------

class RegisterBrokerBody:
    """A decoded REGISTER_BROKER body whose topic table is parsed only when first read.

    A master re-registering with an unchanged dataVersion (every 30 s, per NameServer) needs only
    the dataVersion and the filter-server list, both found without parsing a topic table that may
    hold tens of thousands of entries.
    """

    def __init__(self, data_version: DataVersion, filter_server_list: list[str] | None, table_loader,
                 rows_loader=None):
        self.data_version = data_version
        self.filter_server_list = filter_server_list
        self.topic_config_table: Mapping[str, TopicConfig] = _LazyTable(table_loader)
        # What the NameServer applies: each entry has TopicConfig's attributes but for
        # topic_filter_type and order, which no table keeps (a row's empty topic_name means the
        # map key's). The topic table itself where no faster decoder is given.
        self.queue_rows: Mapping[str, object] = (
            _LazyTable(rows_loader) if rows_loader is not None else self.topic_config_table)

    @classmethod
    def decode(cls, body: bytes | None, serialize_type: SerializeType, *,
               compressed: bool = False, legacy: bool = False) -> RegisterBrokerBody:
        """legacy: a broker older than V3_0_11 sends a bare TopicConfigSerializeWrapper."""
        if not body:
            return cls(DataVersion(), None if legacy else [], dict)
        if compressed:
            return _decode_compressed(body)
        if serialize_type != SerializeType.MSGPACK:
            peeked = _peek_json(body, legacy)
        else:
            peeked = _peek_msgpack(body, legacy)
        if peeked is not None:
            return peeked
        return _decode_full(load(body, serialize_type), legacy)

    def encode(self, serialize_type: SerializeType, *, compressed: bool = False) -> bytes:
        return encode_register_body(self.topic_config_table, self.data_version,
                                    self.filter_server_list or [], serialize_type,
                                    compressed=compressed)


class _LazyTable(Mapping):
    __slots__ = ("_loader", "_table")

    def __init__(self, loader):
        self._loader, self._table = loader, None

    def _get(self) -> dict[str, TopicConfig]:
        if self._table is None:
            self._table = self._loader()
        return self._table

    def __getitem__(self, key: str) -> TopicConfig:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    # Mapping's mixin views call __getitem__ once per key; a registration reads 10,000+ entries
    # in one go, so hand out the parsed dict's own views.
    def keys(self):
        return self._get().keys()

    def items(self):
        return self._get().items()

    def values(self):
        return self._get().values()


_new_topic_config = tuple.__new__  # TopicConfig from a ready tuple, skipping NamedTuple's __new__


def _table_from_wire(obj: object) -> dict[str, TopicConfig]:
    if obj is None:
        return {}
    table = {}
    for name, tc in _obj(obj, "topicConfigTable").items():
        # Fast path for the well-typed entries brokers send (about 3x cheaper per topic, see
        # benchmarks/bench_register.py): the same values topic_config_from_wire computes, taken only
        # when no conversion is needed; anything else goes through it, to be converted or refused.
        if type(tc) is dict:
            get = tc.get
            topic_name = get("topicName") or name
            read, write, perm = get("readQueueNums", 16), get("writeQueueNums", 16), get("perm", 6)
            filter_type = get("topicFilterType") or "SINGLE_TAG"
            sys_flag = get("topicSysFlag") or 0
            order = get("order", False)
            if (type(topic_name) is str and type(read) is int and type(write) is int
                    and type(perm) is int and type(filter_type) is str and type(sys_flag) is int
                    and (order is True or order is False)):
                table[name] = _new_topic_config(
                    TopicConfig, (topic_name, read, write, perm, filter_type, sys_flag, order))
                continue
        table[name] = topic_config_from_wire(name, tc)
    return table


def _decode_full(obj: object, legacy: bool) -> RegisterBrokerBody:
    obj = _obj(obj, "register body")
    if legacy:
        wrapper, filters = obj, None
    else:
        wrapper = _obj(obj.get("topicConfigSerializeWrapper") or {}, "topicConfigSerializeWrapper")
        filters = obj.get("filterServerList") or []
        if not isinstance(filters, list):
            raise BodyError("filterServerList is not a list")
    table = _table_from_wire(wrapper.get("topicConfigTable"))
    return RegisterBrokerBody(data_version_from_wire(wrapper.get("dataVersion")), filters, lambda: table)


_DATA_VERSION_KEY = re.compile(rb'"dataVersion"\s*:\s*\{')
_FILTER_LIST_KEY = re.compile(rb'"filterServerList"\s*:\s*\[')


def _data_version_key_after(body: bytes, start: int) -> bool:
    """`_DATA_VERSION_KEY.search(body, start) is not None`, found faster: every match has the key's
    'V' 5 bytes in, and 'V' is rare in a register body, so memchr (bytes.find of one byte) visits
    the candidates. Over a 1.5 MB body with none: ~0.03 ms instead of the regex's ~1 ms, which was
    most of an unchanged-dataVersion registration (benchmarks/bench_register.py). After 64 'V's
    that start no key (topic names full of V), the regex scans the rest as before."""
    i = body.find(b"V", start + 5)
    for _ in range(64):
        if i < 0:
            return False
        if _DATA_VERSION_KEY.match(body, i - 5) is not None:
            return True
        i = body.find(b"V", i + 1)
    return i >= 0 and _DATA_VERSION_KEY.search(body, i - 5) is not None


def _peek_json(body: bytes, legacy: bool) -> RegisterBrokerBody | None:
    """Find dataVersion and filterServerList without parsing the topic table, or None to fall back
    to a full parse. Topic names cannot contain quotes, so the keys cannot appear inside them."""
    m = _DATA_VERSION_KEY.search(body)
    if m is None:
        return None
    end = body.find(b"}", m.end())
    if end < 0:
        return None
    if _data_version_key_after(body, end):
        return None  # a topic named "dataVersion": which match is the wrapper's is unclear
    try:
        data_version = data_version_from_wire(json.loads(body[m.end() - 1:end + 1]))
        filters = None
        if not legacy:
            f = _FILTER_LIST_KEY.search(body)
            filters = []
            if f is not None:
                close = body.find(b"]", f.end())
                filters = json.loads(body[f.end() - 1:close + 1]) if close >= 0 else None
            if not isinstance(filters, list):
                return None
    except (ValueError, BodyError):
        return None

    def load_table() -> dict[str, TopicConfig]:
        return _decode_full(load(body, SerializeType.JSON), legacy).topic_config_table._get()

    return RegisterBrokerBody(data_version, filters, load_table, _rows_loader(body, _JSON_ROWS, legacy, load_table))


_SKIPPED = object()


def _read_map_skipping_table(unpacker: msgpack.Unpacker, descend: str | None) -> dict:
    """One msgpack map from a streaming unpacker, "topicConfigTable" skipped unbuilt; the map
    under the key `descend` is read the same way."""
    out = {}
    for _ in range(unpacker.read_map_header()):
        key = unpacker.unpack()
        if key == "topicConfigTable":
            unpacker.skip()
            out[key] = _SKIPPED
        elif descend is not None and key == descend:
            out[key] = _read_map_skipping_table(unpacker, None)
        else:
            out[key] = unpacker.unpack()
    return out


def _peek_msgpack(body: bytes, legacy: bool) -> RegisterBrokerBody | None:
    """msgpack's _peek_json: dataVersion and filterServerList with the topic table skipped, not
    built (a 10,000-topic body: ~0.4 ms instead of ~12 ms, see benchmarks/bench_register.py), or
    None to fall back to a full parse, which decodes or refuses the body as it always did."""
    try:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(body))
        unpacker.feed(body)
        obj = _read_map_skipping_table(unpacker, None if legacy else "topicConfigSerializeWrapper")
        if unpacker.tell() != len(body):
            return None  # trailing bytes: unpackb refuses them
        if legacy:
            wrapper, filters = obj, None
        else:
            wrapper = obj.get("topicConfigSerializeWrapper") or {}
            filters = obj.get("filterServerList") or []
            if not isinstance(wrapper, dict) or not isinstance(filters, list):
                return None
        data_version = data_version_from_wire(wrapper.get("dataVersion"))
    except Exception:  # msgpack raises several unrelated types for bad input; BodyError too
        return None

    def load_table() -> dict[str, TopicConfig]:
        return _decode_full(load(body, SerializeType.MSGPACK), legacy).topic_config_table._get()

    return RegisterBrokerBody(data_version, filters, load_table,
                              _rows_loader(body, _MSGPACK_ROWS, legacy, load_table))


# --- the rows a registration applies, decoded fast ----------------------------------------------------
#
# msgspec decodes a body straight into these, skipping what no table keeps, in a third of
# json.loads' time for the whole body and without a dict per topic (benchmarks/bench_register.py).
# Strictly typed: a body it refuses (a quoted number, a null, fastjson's unquoted keys, another
# encoding than UTF-8, ...) goes the general way, which converts it as before or refuses it with
# the same error, so what a registration accepts and applies is unchanged.


class _QueueRow(msgspec.Struct, gc=False):
    topic_name: str = msgspec.field(name="topicName", default="")
    read_queue_nums: int = msgspec.field(name="readQueueNums", default=16)
    write_queue_nums: int = msgspec.field(name="writeQueueNums", default=16)
    perm: int = 6
    topic_sys_flag: int = msgspec.field(name="topicSysFlag", default=0)


class _RowsWrapper(msgspec.Struct, gc=False):
    topicConfigTable: dict[str, _QueueRow] | None = None


class _RowsBody(msgspec.Struct, gc=False):
    topicConfigSerializeWrapper: _RowsWrapper | None = None
    filterServerList: list | None = None


_JSON_ROWS = (msgspec.json.Decoder(_RowsBody), msgspec.json.Decoder(_RowsWrapper))
_MSGPACK_ROWS = (msgspec.msgpack.Decoder(_RowsBody), msgspec.msgpack.Decoder(_RowsWrapper))


def as_topic_configs(table: Mapping[str, object]) -> dict[str, object]:
    """A dict of the table, a registration's queue_rows made plain TopicConfigs (topicFilterType
    and order at their defaults: the rows skip them), for code that wants records (the workshop's
    learner process); other values as they are."""
    return {name: row if type(row) is not _QueueRow else TopicConfig(
        row.topic_name or name, row.read_queue_nums, row.write_queue_nums, row.perm, "SINGLE_TAG",
        row.topic_sys_flag) for name, row in table.items()}


def _rows_loader(body: bytes, decoders: tuple, legacy: bool, load_table):
    def load_rows() -> Mapping[str, object]:
        try:
            if legacy:  # a bare TopicConfigSerializeWrapper
                wrapper = decoders[1].decode(body)
            else:
                wrapper = decoders[0].decode(body).topicConfigSerializeWrapper
        except (msgspec.DecodeError, RecursionError):
            return load_table()
        if wrapper is None or wrapper.topicConfigTable is None:
            return {}
        return wrapper.topicConfigTable
    return load_rows


_JAVA_INT = struct.Struct(">i")


def _chunk(raw: bytes, pos: int) -> tuple[int, bytes]:
    """The int32-length-prefixed chunk at pos, and the position after it."""
    (n,) = _JAVA_INT.unpack_from(raw, pos)
    if n < 0 or pos + 4 + n > len(raw):
        raise BodyError("bad length in compressed register body")
    return pos + 4 + n, raw[pos + 4:pos + 4 + n]


def _decode_compressed(body: bytes) -> RegisterBrokerBody:
    """RocketMQ's compressed RegisterBrokerBody: zlib of length-prefixed DataVersion JSON, topic
    configs as 'name read write perm filterType' strings, and the filter-server JSON list.

    The filter list comes after every topic, so decoding walks the topic chunks' lengths, but
    parses the strings only when the table is read, as the JSON and msgpack paths do: a broker
    re-registering with an unchanged dataVersion costs ~5x less (benchmarks/bench_register.py)."""
    raw = inflate(body, "compressed register body")
    try:
        pos, data_version_json = _chunk(raw, 0)
        data_version = data_version_from_wire(json.loads(data_version_json))
        (count,) = _JAVA_INT.unpack_from(raw, pos)
        topics_at = pos = pos + 4
        size, unpack_from = len(raw), _JAVA_INT.unpack_from
        for _ in range(count):
            (n,) = unpack_from(raw, pos)
            if n < 0 or pos + 4 + n > size:
                raise BodyError("bad length in compressed register body")
            pos += 4 + n
        filters = json.loads(_chunk(raw, pos)[1])
    except (struct.error, ValueError) as e:
        raise BodyError(f"undecodable compressed register body: {e}") from None
    if not isinstance(filters, list):
        raise BodyError("filterServerList is not a list")

    def load_table() -> dict[str, TopicConfig]:
        table = {}
        pos = topics_at
        try:
            for _ in range(count):
                pos, text = _chunk(raw, pos)
                # 4.9.8 writes 5 fields; 5.x appends a 6th (attributes JSON), which is ignored.
                parts = text.decode().split(" ")
                if len(parts) < 5:
                    raise BodyError(f"bad topic config {' '.join(parts)!r} in compressed register body")
                name = parts[0]
                table[name] = TopicConfig(name, int(parts[1]), int(parts[2]), int(parts[3]), parts[4])
        except ValueError as e:  # BodyError included, as before: the same message either way
            raise BodyError(f"undecodable compressed register body: {e}") from None
        return table

    return RegisterBrokerBody(data_version, filters, load_table)


def encode_compressed_register_body(topic_config_table: Mapping[str, TopicConfig], data_version: DataVersion,
                                    filter_server_list: list[str]) -> bytes:
    """RegisterBrokerBody.encode(true): length-prefixed chunks, deflated. A plain function so the
    workshop (exercise 9) can swap in a learner's version."""
    def chunk(b: bytes) -> bytes:
        return struct.pack(">i", len(b)) + b
    parts = [chunk(json.dumps(data_version_to_wire(data_version), separators=(",", ":")).encode()),
             struct.pack(">i", len(topic_config_table))]
    for tc in topic_config_table.values():
        parts.append(chunk(f"{tc.topic_name} {tc.read_queue_nums} {tc.write_queue_nums} "
                           f"{tc.perm} {tc.topic_filter_type}".encode()))
    parts.append(chunk(json.dumps(filter_server_list).encode()))
    return zlib.compress(b"".join(parts), 9)


def encode_register_body(topic_config_table: Mapping[str, TopicConfig], data_version: DataVersion,
                         filter_server_list: list[str], serialize_type: SerializeType, *,
                         compressed: bool = False) -> bytes:
    if compressed:
        return encode_compressed_register_body(topic_config_table, data_version, filter_server_list)
    return dump({
        "filterServerList": filter_server_list,
        "topicConfigSerializeWrapper": {
            "dataVersion": data_version_to_wire(data_version),
            "topicConfigTable": {n: topic_config_to_wire(tc) for n, tc in topic_config_table.items()},
        },
    }, serialize_type)


# --- routes and cluster info ---------------------------------------------------------------------

def queue_data_to_wire(qd: QueueData) -> dict:
    return {"brokerName": qd.broker_name, "perm": qd.perm, "readQueueNums": qd.read_queue_nums,
            "topicSysFlag": qd.topic_sys_flag, "writeQueueNums": qd.write_queue_nums}


# Java maps go out as JavaMap, in the order of the dicts given: RouteInfoManager hands them over in
# 4.9.8's HashMap order (its java_* methods), which plain fastjson keeps and MapSortField sorts.

def broker_data_to_wire(bd: BrokerData) -> dict:
    return {"brokerAddrs": JavaMap(bd.broker_addrs), "brokerName": bd.broker_name, "cluster": bd.cluster}


def route_to_wire(route: TopicRouteData) -> dict:
    return {
        "brokerDatas": [broker_data_to_wire(bd) for bd in route.broker_datas],
        "filterServerTable": JavaMap(route.filter_server_table),
        "orderTopicConf": route.order_topic_conf,
        "queueDatas": [queue_data_to_wire(qd) for qd in route.queue_datas],
    }


def _broker_data_from_wire(obj: object) -> BrokerData:
    d = _obj(obj, "brokerData")
    try:
        addrs = {int(k): str(v) for k, v in _obj(d.get("brokerAddrs") or {}, "brokerAddrs").items()}
    except ValueError:
        raise BodyError(f"bad brokerAddrs {d.get('brokerAddrs')!r}") from None
    return BrokerData(str(d.get("cluster") or ""), str(d.get("brokerName") or ""), addrs)


def route_from_wire(obj: object) -> TopicRouteData:
    d = _obj(obj, "topic route")
    try:
        queue_datas = [
            QueueData(str(q["brokerName"]), int(q["readQueueNums"]), int(q["writeQueueNums"]),
                      int(q["perm"]), int(q.get("topicSysFlag", q.get("topicSynFlag", 0)) or 0))
            for q in d.get("queueDatas") or []
        ]
    except (KeyError, TypeError, ValueError) as e:
        raise BodyError(f"bad queueDatas: {e}") from None
    broker_datas = [_broker_data_from_wire(b) for b in d.get("brokerDatas") or []]
    return TopicRouteData(queue_datas, broker_datas, dict(d.get("filterServerTable") or {}),
                          d.get("orderTopicConf"))


def cluster_info_to_wire(broker_addr_table: Mapping[str, BrokerData],
                         cluster_addr_table: Mapping[str, Iterable[str]]) -> dict:
    """ClusterInfo; pass RouteInfoManager.java_cluster_info() for 4.9.8's order."""
    return {
        "brokerAddrTable": JavaMap({n: broker_data_to_wire(bd) for n, bd in broker_addr_table.items()}),
        "clusterAddrTable": JavaMap({c: list(names) for c, names in cluster_addr_table.items()}),
    }


def topic_list_to_wire(topics: list[str], broker_addr: str | None = None) -> dict:
    """TopicList; its Set<String> is a fresh HashSet, so pass the topics in its order."""
    return {"topicList": topics, "brokerAddr": broker_addr}


def kv_table_to_wire(table: Mapping[str, str | None]) -> dict:
    """KVTable: the namespace's HashMap in its order; a key whose value is null goes unwritten."""
    return {"table": JavaMap(table)}


def cluster_info_from_wire(obj: object) -> tuple[dict[str, BrokerData], dict[str, list[str]]]:
    d = _obj(obj, "cluster info")
    brokers = {n: _broker_data_from_wire(b) for n, b in _obj(d.get("brokerAddrTable") or {}, "brokerAddrTable").items()}
    clusters = {c: list(names) for c, names in _obj(d.get("clusterAddrTable") or {}, "clusterAddrTable").items()}
    return brokers, clusters
