"""MQClientAPIImpl and the NameServer half of NettyRemotingClient: every request a client sends,
built and read per the wire protocol, over the node's ChannelTable.

A call's timeout covers its connect, as invokeSync's does: a connect that eats the budget ends
the call with a timeout. NameServer calls go to the chosen NameServer (namesrv.NamesrvSelector);
when its channel is gone the next ones are tried in turn, and a change emits `client.ns_switch`.
"""

from __future__ import annotations

from typing import NamedTuple

import trio

from lab.remoting.channels import LAB_SERIALIZE_TYPE, ChannelTable, Node, request
from lab.remoting.flow import Step, in_task
from nameserver import bodies
from nameserver.client import RemotingError, RemotingTimeoutError
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode, SerializeType
from nameserver.routes import TopicRouteData

from . import route_parsers
from .decoded import DecodedBodies
from .errors import MQBrokerError, MQClientError, RemotingConnectError
from .namesrv import NamesrvSelector
from .route_cache import MessageQueue

DEFAULT_TOPIC = "TBW102"  # the template a broker may auto-create an unknown topic from
DEFAULT_TOPIC_QUEUE_NUMS = 4
SEND_STATUS = {  # broker codes that still store the message
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}
SEND_REPLY_CODES = tuple(SEND_STATUS)
PULL_CODES = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
              ResponseCode.PULL_OFFSET_MOVED)


class SendResult(NamedTuple):
    send_status: str
    msg_id: str  # the client's UNIQ_KEY
    offset_msg_id: str  # the broker's: store host + commit-log offset
    message_queue: MessageQueue
    queue_offset: int


class PullResult(NamedTuple):
    code: int  # one of PULL_CODES
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    body: bytes | None


def _read_reply(response: RemotingCommand, code: int, addr: str | None, read, ok: tuple[int, ...]):
    if response.code not in ok:
        raise MQBrokerError(response.code, response.remark)
    if read is None:
        return None
    try:
        return read(response)
    except (ValueError, KeyError, TypeError) as e:  # HeaderError, BodyError, a body of the wrong shape
        raise MQClientError(f"bad reply to request {code} from {addr or 'the NameServer'}: {e}") from None


class _AsyncReply:
    """Where an asynchronous call's reply goes: read as _call reads it, then to `on_result`, the
    result or the exception. An object with slots, not a closure: one waits per pending call, and
    a large cluster's consumers keep 80,000 pulls pending."""

    __slots__ = ("code", "addr", "read", "ok", "on_result")

    def __init__(self, code: int, addr: str | None, read, ok: tuple[int, ...], on_result) -> None:
        self.code, self.addr, self.read, self.ok, self.on_result = code, addr, read, ok, on_result

    def __call__(self, response: RemotingCommand | RemotingError) -> None:
        # An error goes on as a value, with no traceback: one would keep this frame and its callers'
        # alive in a cycle till the next collection, and a closed connection ends every pending
        # pull at once.
        if isinstance(response, RemotingError):
            result = response
        else:
            try:
                result = _read_reply(response, self.code, self.addr, self.read, self.ok)
            except (RemotingError, MQClientError, MQBrokerError) as e:
                result = e.with_traceback(None)
        self.on_result(result)


def route_query(topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC as the lab's clients ask it."""
    return request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def route_reply(decoded: DecodedBodies, topic: str, on_result) -> _AsyncReply:
    """Where a route query's reply goes; errors name the NameServer as _call's do."""
    return _AsyncReply(RequestCode.GET_ROUTEINFO_BY_TOPIC, None,
                       lambda r: decoded.route(topic, r.body or b"", r.serialize_type), (ResponseCode.SUCCESS,),
                       on_result)


def consumer_list_query(consumer_group: str) -> RemotingCommand:
    return request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": consumer_group})


def consumer_ids_reply(decoded: DecodedBodies, addr: str, on_result) -> _AsyncReply:
    return _AsyncReply(RequestCode.GET_CONSUMER_LIST_BY_GROUP, addr,
                       lambda r: decoded.consumer_ids(r.body or b"", r.serialize_type), (ResponseCode.SUCCESS,),
                       on_result)


def _pull_result(response: RemotingCommand) -> PullResult:
    return PullResult(response.code, *response.require_ints(
        "nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"), response.body)


def _offset(response: RemotingCommand) -> int:
    return response.require_int("offset")


def _queue_fields(mq: MessageQueue) -> dict:
    """The header fields that name a queue (bname: its broker, for a proxy to route by)."""
    return {"topic": mq.topic, "queueId": mq.queue_id, "bname": mq.broker_name}


class MQClientAPI:
    def __init__(self, node: Node, channels: ChannelTable, namesrv: NamesrvSelector,
                 decoded: DecodedBodies | None = None):
        """`decoded`: the run's shared decoded bodies (lab/clients/decoded.py); its own by default."""
        self.node = node
        self.decoded = decoded if decoded is not None else DecodedBodies()
        self.channels = channels
        self.namesrv = namesrv
        self.namesrv_in_use: str | None = None  # the NameServer the last call went to
        self._namesrv_lock = trio.Lock()

    # --- channels ---------------------------------------------------------------------------------

    async def connect(self, addr: str) -> None:
        try:
            await self.channels.connect(addr)
        except RemotingError as e:
            raise RemotingConnectError(str(e)) from None

    async def _namesrv_channel(self) -> str:
        """getAndCreateNameserverChannel: the chosen NameServer while its channel is open, else
        the first of the others (in turn) that connects."""
        if self.namesrv.is_sticky(self.channels.is_connected):
            return self.namesrv.chosen  # nearly every call: no lock, whose checkpoint costs a pass of trio's loop
        async with self._namesrv_lock:
            if self.namesrv.is_sticky(self.channels.is_connected):
                return self.namesrv.chosen
            if not self.namesrv.addr_list:
                raise RemotingConnectError("no NameServer address: set namesrvAddr or NAMESRV_ADDR, "
                                           "or check the address server")
            previous, skipped = self.namesrv_in_use, []
            for addr in self.namesrv.candidates():
                try:
                    await self.connect(addr)
                except RemotingConnectError:
                    skipped.append(addr)
                    continue
                if addr != previous:
                    reason = ("start" if previous is None
                              else "channel_closed" if previous in self.namesrv.addr_list
                              else "address_list_changed")
                    self.node.emit("client.ns_switch", **{"from": previous, "to": addr, "reason": reason,
                                                          "skipped": skipped})
                self.namesrv_in_use = addr
                return addr
            raise RemotingConnectError(f"cannot reach any NameServer of {self.namesrv.addr_list}")

    async def invoke(self, addr: str | None, command: RemotingCommand, timeout: float) -> RemotingCommand:
        """addr None: the chosen NameServer. A connect first counts against `timeout`."""
        if addr is None or not self.channels.is_connected(addr):
            begin = trio.current_time()
            if addr is None:
                addr = await self._namesrv_channel()
            else:
                await self.connect(addr)
            left = timeout - (trio.current_time() - begin)
            if left <= 0:
                raise RemotingTimeoutError(f"invokeSync call timeout: connecting to {addr} took the whole {timeout:g} s")
            timeout = left
        return await self.channels.invoke(addr, command, timeout)

    async def _call(self, addr: str | None, code: int, fields: dict | None, timeout: float, read=None, *,
                    body: bytes | None = None, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)):
        """The reply read by `read(response)`; MQBrokerError for a code not in `ok`,
        MQClientError for a reply that lacks what it should carry."""
        response = await self.invoke(addr, request(code, fields, body), timeout)
        return _read_reply(response, code, addr, read, ok)

    def _call_async(self, addr: str, code: int, fields: dict, timeout: float, read, on_result, *,
                    body: bytes | None = None, ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
                    renew=None) -> None:
        """_call as invokeAsync, on an open channel: `on_result` gets what _call would return, or
        the exception it would raise — in trio's loop, so it must not block. A failure to send at
        all (no open channel) raises RemotingError here."""
        self.channels.invoke_async(addr, request(code, fields, body), timeout,
                                   _AsyncReply(code, addr, read, ok, on_result), renew=renew)

    def _step(self, addr: str, code: int, fields: dict, timeout: float, read, *, body: bytes | None = None,
              ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> Step:
        """_call as a Step (lab/remoting/flow.py): in a flow, by invokeAsync on the open channel to
        `addr` (its reply resumes the flow), or by a task that connects first; in a task, _call."""
        def start(resume) -> None:
            if self.channels.is_connected(addr):
                self._call_async(addr, code, fields, timeout, read, resume, body=body, ok=ok)
            else:
                in_task(self.channels.nursery, call).start(resume)

        def call():
            return self._call(addr, code, fields, timeout, read, body=body, ok=ok)
        return Step(start, call)

    async def invoke_oneway(self, addr: str, code: int, fields: dict) -> None:
        if not self.channels.is_connected(addr):
            await self.connect(addr)
        await self.channels.invoke_oneway(addr, request(code, fields, oneway=True))

    # --- NameServer -------------------------------------------------------------------------------

    def get_topic_route_info_from_name_server(self, topic: str, timeout: float) -> Step:
        """The route; MQBrokerError(17) when the NameServer knows none; RemotingError when none
        answers. The same body gives the same TopicRouteData (DecodedBodies.route). In a flow, by
        invokeAsync while the chosen NameServer's channel is open; else (a connect, a failover,
        a client of another language) as a task does it."""
        def start(resume) -> None:
            if self.node.config.client.routeParser == "fastjson" and self.namesrv.is_sticky(self.channels.is_connected):
                self.channels.invoke_async(self.namesrv.chosen, route_query(topic), timeout,
                                           route_reply(self.decoded, topic, resume))
            else:
                in_task(self.channels.nursery, self._route_by_task, topic, timeout).start(resume)
        return Step(start, lambda: self._route_by_task(topic, timeout))

    async def _route_by_task(self, topic: str, timeout: float) -> TopicRouteData:
        parser = self.node.config.client.routeParser
        if parser != "fastjson":  # a client in another language: JSON, its version, its parser
            code = RequestCode.GET_ROUTEINFO_BY_TOPIC
            asked = RemotingCommand.request(code, {"topic": topic}, serialize_type=SerializeType.JSON,
                                            version=route_parsers.VERSION[parser])
            return _read_reply(await self.invoke(None, asked, timeout), code, None,
                               lambda r: bodies.route_from_wire(route_parsers.load_route(r.body or b"", parser)),
                               (ResponseCode.SUCCESS,))
        return await self._call(None, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout,
                                lambda r: self.decoded.route(topic, r.body or b"", r.serialize_type))

    def send_message(self, addr: str, mq: MessageQueue, producer_group: str, body: bytes, properties: str,
                     born_timestamp: int, msg_id: str, timeout: float) -> Step:
        """SEND_MESSAGE_V2 with its short keys (sendMessage): the SendResult. A Step: by invokeAsync
        on the open channel to `addr`, else by a task that connects first (the connect counts
        against `timeout`)."""
        fields = {
            "a": producer_group, "b": mq.topic, "c": DEFAULT_TOPIC, "d": DEFAULT_TOPIC_QUEUE_NUMS,
            "e": mq.queue_id, "f": 0, "g": born_timestamp, "h": 0, "i": properties, "j": 0,
            "k": "false", "m": "false", "n": mq.broker_name,
        }
        return self._step(addr, RequestCode.SEND_MESSAGE_V2, fields, timeout, lambda r: SendResult(
            SEND_STATUS[r.code], msg_id, r.require("msgId"),
            MessageQueue(mq.topic, mq.broker_name, r.require_int("queueId")), r.require_int("queueOffset")),
            body=body, ok=SEND_REPLY_CODES)

    # --- broker: consumer -------------------------------------------------------------------------

    def pull_message_async(self, addr: str, fields: dict, timeout: float, on_result, renew=None) -> None:
        """pullMessageAsync: `on_result` gets the PullResult, or the exception the pull ended with.
        `renew`: whether an empty answer would be followed by the same pull (ChannelTable.invoke_async)."""
        self._call_async(addr, RequestCode.PULL_MESSAGE, fields, timeout, _pull_result, on_result,
                         ok=PULL_CODES, renew=renew)

    def get_consumer_id_list_by_group(self, addr: str, consumer_group: str, timeout: float) -> Step:
        return self._step(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": consumer_group},
                          timeout, lambda r: self.decoded.consumer_ids(r.body or b"", r.serialize_type))

    def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue, timeout: float) -> Step:
        """The offset; MQBrokerError (22 QUERY_NOT_FOUND, say) when the broker has none for it."""
        return self._step(addr, RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, **_queue_fields(mq)},
                          timeout, _offset)

    def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float) -> Step:
        return self._step(addr, RequestCode.GET_MAX_OFFSET, _queue_fields(mq), timeout, _offset)

    async def update_consumer_offset_oneway(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        await self.invoke_oneway(addr, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "commitOffset": offset,
            "bname": mq.broker_name})

    # --- broker: both -----------------------------------------------------------------------------

    @staticmethod
    def heartbeat_body(heartbeat_data: dict) -> bytes:
        """HeartbeatData encoded once per round: every broker gets the same bytes (with 2,000
        subscriptions, encoding it per broker cost more than sending it)."""
        return bodies.dump(heartbeat_data, LAB_SERIALIZE_TYPE)

    async def send_heartbeat(self, addr: str, body: bytes, timeout: float) -> None:
        """body: heartbeat_body(HeartbeatData)."""
        await self._call(addr, RequestCode.HEART_BEAT, None, timeout, body=body)

    async def unregister_client(self, addr: str, client_id: str, producer_group: str | None,
                                consumer_group: str | None, timeout: float) -> None:
        await self._call(addr, RequestCode.UNREGISTER_CLIENT, {
            "clientID": client_id, "producerGroup": producer_group, "consumerGroup": consumer_group}, timeout)
