"""What an application did, read from the frames on its relayed links: the app.* records.

One ConnWatch per connection the app opens to a NameServer or a broker (chaos's TcpNetwork calls it
for every frame: chaos/network.py LinkWatch). A request is noted as it leaves the app, before any
fault acts on it; its answer is read as it reaches the app, after every fault (a latency toxic, a
delayed reply): the latency is the app's own. A request still unanswered when the connection ends
is recorded then, with result null. Records (node = the app's name; docs/apps.md):

    app.conn       {peer, state: "open" | "close"}
    app.request    {peer, code, request, ms, result, oneway}         one per request the app sent
    app.route      {peer, topic, result, brokers, queues}            GET_ROUTEINFO_BY_TOPIC replies
    app.heartbeat  {peer, client_id, producer_groups, consumer_groups}
    app.send       {peer, group, topic, result, ms, queue, offset, msg_id, uniq_key[, uniq_keys]}
    app.deliver    {peer, group, topic, queue, messages: [[offset, uniq_key], ...]}   pulls FOUND
    app.commit     {peer, group, topic, queue, offset}               UPDATE_CONSUMER_OFFSET, pull commits

Replies from NameServers have their broker addresses rewritten to the app's relays (`rewrite`), so
the app reaches brokers through the lab's links too.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from typing import Callable

import msgpack

from nameserver.protocol import FLAG_ONEWAY, FLAG_RESPONSE, FrameDecoder, RemotingCommand, RequestCode, \
    ResponseCode, SerializeType
from nameserver.protocol.fastjson import loads

from lab.events import EventLog
from lab.remoting.message import decode_batch, decode_messages, decode_properties
from lab.remoting.wire_codec import REMOTING, Frame

log = logging.getLogger("lab.apps")

SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
# SendMessageRequestHeaderV2's short keys (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE) for what is recorded
V2_KEYS = {"producerGroup": "a", "topic": "b", "queueId": "e", "properties": "i"}
PULL_COMMIT_OFFSET = 0x1  # PullSysFlag.FLAG_COMMIT_OFFSET
UNIQ_KEY = "UNIQ_KEY"  # MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
ROUTE_CODES = (RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_BROKER_CLUSTER_INFO)
_WORDS = struct.Struct(">ii")


def decode(frame: Frame) -> RemotingCommand | None:
    try:
        commands = FrameDecoder().feed(frame.data)
    except Exception:  # a frame the peer could not read either: it is passed on, not recorded
        return None
    return commands[0] if commands else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _send_field(cmd: RemotingCommand, name: str) -> str | None:
    value = cmd.field(name)
    return value if value is not None or cmd.code == RequestCode.SEND_MESSAGE else cmd.field(V2_KEYS[name])


def with_body(frame: Frame, body: bytes) -> Frame:
    """The frame with another body: its length word says so, its header is the same."""
    length, word = _WORDS.unpack_from(frame.data, 0)
    header_end = 8 + (word & 0xFFFFFF)
    data = _WORDS.pack(header_end - 4 + len(body), word) + frame.data[8:header_end] + body
    return frame._replace(data=data)


def rewrite_addresses(body: bytes, serialize_type: int, addresses: dict[str, str]) -> bytes:
    """A route (or cluster) body with every broker address in `addresses` replaced by its value."""
    if not addresses or not body:
        return body
    if serialize_type == SerializeType.MSGPACK:
        try:
            obj = msgpack.unpackb(body, raw=False, strict_map_key=False)
        except Exception:
            return body
        return msgpack.packb(_replaced(obj, addresses))
    for old, new in addresses.items():
        body = body.replace(f'"{old}"'.encode(), f'"{new}"'.encode())
    return body


def _replaced(obj, addresses: dict[str, str]):
    if isinstance(obj, str):
        return addresses.get(obj, obj)
    if isinstance(obj, dict):
        return {k: _replaced(v, addresses) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_replaced(v, addresses) for v in obj]
    return obj


@dataclass
class _Pending:
    code: int
    t: float
    fields: dict = field(default_factory=dict)  # what the request said that its record needs


class ConnWatch:
    """One connection of the app's, to `peer` (a NameServer or a broker)."""

    def __init__(self, app: str, peer: str, peer_role: str, events: EventLog, *,
                 addresses: Callable[[], dict[str, str]], node_of: Callable[[str], str]):
        """addresses(): broker address -> the app's relay to that broker (for NameServer replies);
        node_of(address): the node at an address (a broker's own or the app's relay to it)."""
        self.app, self.peer, self.peer_role, self.events = app, peer, peer_role, events
        self.addresses, self.node_of = addresses, node_of
        self.pending: dict[int, _Pending] = {}
        self._closed = False
        self.emit("app.conn", state="open")

    def emit(self, kind: str, **fields) -> None:
        self.events.emit(self.app, kind, peer=self.peer, **fields)

    # --- LinkWatch ----------------------------------------------------------------------------------

    def sent(self, src: str, dst: str, frame: Frame) -> Frame:
        try:
            if src == self.app:
                if not frame.flag & FLAG_RESPONSE:
                    self._request(frame)
            elif frame.flag & FLAG_RESPONSE and self.peer_role == "nameserver":
                pending = self.pending.get(frame.opaque)
                if pending is not None and pending.code in ROUTE_CODES:
                    return self._relayed(frame)
        except Exception:  # what the app sent must reach its peer whatever this makes of it
            log.exception("app %s: a frame to %s could not be read", self.app, dst)
        return frame

    def arrived(self, src: str, dst: str, frame: Frame) -> None:
        if dst != self.app or not frame.flag & FLAG_RESPONSE:
            return
        pending = self.pending.pop(frame.opaque, None)
        if pending is None:  # a second copy of a reply (a duplicating fault), or an answer to nothing
            return
        try:
            self._reply(pending, frame)
        except Exception:
            log.exception("app %s: a reply from %s could not be read", self.app, src)

    def ended(self, src: str, dst: str) -> None:
        if src == self.app:  # the app closed the connection: it gave up on what it had not got back
            self.closed()

    def closed(self) -> None:
        if self._closed:
            return
        self._closed = True
        pending, self.pending = self.pending, {}
        for p in pending.values():
            self._answered(p, None, None)
        self.emit("app.conn", state="close")

    # --- requests -----------------------------------------------------------------------------------

    def _request(self, frame: Frame) -> None:
        now = self.events.now()
        oneway = bool(frame.flag & FLAG_ONEWAY)
        code = frame.code
        pending = _Pending(code, now)
        if code in SEND_CODES or code in (RequestCode.PULL_MESSAGE, RequestCode.UPDATE_CONSUMER_OFFSET,
                                          RequestCode.HEART_BEAT, RequestCode.GET_ROUTEINFO_BY_TOPIC):
            cmd = decode(frame)
            if cmd is not None:
                self._noted(cmd, pending)
        if oneway:
            self.emit("app.request", code=code, request=REMOTING.request_name(code), ms=None, result=None,
                      oneway=True)
        else:
            self.pending[frame.opaque] = pending

    def _noted(self, cmd: RemotingCommand, pending: _Pending) -> None:
        """What a request says, kept for its reply's record or recorded at once."""
        code, f = cmd.code, pending.fields
        if code in SEND_CODES:
            f["group"], f["topic"] = _send_field(cmd, "producerGroup"), _send_field(cmd, "topic")
            properties = decode_properties(_send_field(cmd, "properties") or "")
            f["uniq_key"] = properties.get(UNIQ_KEY)
            if code == RequestCode.SEND_BATCH_MESSAGE and cmd.body:
                try:
                    f["uniq_keys"] = [props.get(UNIQ_KEY) for _flag, _body, props in decode_batch(cmd.body)]
                except ValueError:
                    f["uniq_keys"] = []
        elif code == RequestCode.PULL_MESSAGE:
            f["group"], f["topic"], f["queue"] = cmd.field("consumerGroup"), cmd.field("topic"), _int(cmd.field("queueId"))
            flags, commit = _int(cmd.field("sysFlag")) or 0, _int(cmd.field("commitOffset"))
            if flags & PULL_COMMIT_OFFSET and commit is not None:
                self.emit("app.commit", group=f["group"], topic=f["topic"], queue=f["queue"], offset=commit)
        elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
            self.emit("app.commit", group=cmd.field("consumerGroup"), topic=cmd.field("topic"),
                      queue=_int(cmd.field("queueId")), offset=_int(cmd.field("commitOffset")))
        elif code == RequestCode.HEART_BEAT:
            body = loads(cmd.body) if cmd.body and cmd.serialize_type != SerializeType.MSGPACK else \
                msgpack.unpackb(cmd.body or b"\x80", raw=False, strict_map_key=False)
            body = body if isinstance(body, dict) else {}
            self.emit("app.heartbeat", client_id=body.get("clientID"),
                      producer_groups=_groups(body.get("producerDataSet")),
                      consumer_groups=_groups(body.get("consumerDataSet")))
        elif code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            f["topic"] = cmd.field("topic")

    # --- replies --------------------------------------------------------------------------------------

    def _relayed(self, frame: Frame) -> Frame:
        """A NameServer's route (or cluster) reply, its broker addresses the app's relays."""
        length, word = _WORDS.unpack_from(frame.data, 0)
        body = frame.data[8 + (word & 0xFFFFFF):]
        rewritten = rewrite_addresses(body, frame.serialize_type, self.addresses())
        return frame if rewritten == body else with_body(frame, rewritten)

    def _reply(self, pending: _Pending, frame: Frame) -> None:
        code = pending.code
        cmd = decode(frame) if code in SEND_CODES or code in (RequestCode.PULL_MESSAGE,
                                                              RequestCode.GET_ROUTEINFO_BY_TOPIC) else None
        self._answered(pending, frame.code, cmd)

    def _answered(self, p: _Pending, result: int | None, cmd: RemotingCommand | None) -> None:
        """The request's records: answered (result, its reply `cmd` when decoded) or not (None)."""
        now = self.events.now()
        ms = round((now - p.t) * 1000, 3) if result is not None else None
        self.emit("app.request", code=p.code, request=REMOTING.request_name(p.code), ms=ms, result=result,
                  oneway=False)
        f = p.fields
        if p.code in SEND_CODES:
            record = dict(group=f.get("group"), topic=f.get("topic"), result=result, ms=ms,
                          queue=_int(cmd.field("queueId")) if cmd else None,
                          offset=_int(cmd.field("queueOffset")) if cmd else None,
                          msg_id=cmd.field("msgId") if cmd else None, uniq_key=f.get("uniq_key"))
            if "uniq_keys" in f:
                record["uniq_keys"] = f["uniq_keys"]
            self.emit("app.send", **record)
        elif p.code == RequestCode.PULL_MESSAGE and result == ResponseCode.SUCCESS and cmd is not None:
            try:
                messages = [[m.queue_offset, m.properties.get(UNIQ_KEY)] for m in decode_messages(cmd.body or b"")]
            except ValueError:
                messages = []
            self.emit("app.deliver", group=f.get("group"), topic=f.get("topic"), queue=f.get("queue"),
                      messages=messages)
        elif p.code == RequestCode.GET_ROUTEINFO_BY_TOPIC and result is not None:
            brokers, queues = self._route(cmd) if result == ResponseCode.SUCCESS and cmd is not None else ([], {})
            self.emit("app.route", topic=f.get("topic"), result=result, brokers=brokers, queues=queues)

    def _route(self, cmd: RemotingCommand) -> tuple[list[str], dict[str, int]]:
        try:
            body = loads(cmd.body) if cmd.serialize_type != SerializeType.MSGPACK else \
                msgpack.unpackb(cmd.body, raw=False, strict_map_key=False)
        except Exception:
            return [], {}
        if not isinstance(body, dict):
            return [], {}
        brokers, master = [], {}
        for data in body.get("brokerDatas") or []:
            addrs = data.get("brokerAddrs") or {} if isinstance(data, dict) else {}
            for broker_id, address in sorted(addrs.items(), key=lambda kv: int(kv[0]) if str(kv[0]).lstrip("-").isdigit() else 0):
                node = self.node_of(str(address))
                brokers.append(node)
                if str(broker_id) == "0":
                    master[data.get("brokerName")] = node
        queues = {}
        for data in body.get("queueDatas") or []:
            if isinstance(data, dict):
                name = data.get("brokerName")
                queues[master.get(name, name)] = data.get("writeQueueNums")
        return brokers, queues


def _groups(data_set) -> list[str]:
    return [d.get("groupName") for d in data_set or [] if isinstance(d, dict)]
