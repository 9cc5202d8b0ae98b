"""MQClientAPIImpl and the NameServer half of NettyRemotingClient: every request a client sends,
built and read per the wire protocol, over the node's ChannelTable.

A call's timeout covers its connect, as invokeSync's does: a connect that eats the budget ends
the call with a timeout. NameServer calls go to the chosen NameServer (namesrv.NamesrvSelector);
when its channel is gone the next ones are tried in turn, and a change emits `client.ns_switch`.
"""

from __future__ import annotations

from typing import NamedTuple

import trio

from lab.remoting.channels import ChannelTable, Node, request
from lab.remoting.flow import Step, in_task
from nameserver import bodies
from nameserver.client import RemotingError, RemotingTimeoutError
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode, SerializeType

from . import route_parsers
from .decoded import DecodedBodies
from .errors import ClientFailure, MQBrokerError, MQClientError, RemotingConnectError
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
OK = (ResponseCode.SUCCESS,)
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


class _AsyncReply:
    """How a call's reply is read (`result`), and where an asynchronous call's goes: to
    `on_result`, the result or the exception. An object with slots, not a closure: one waits per
    pending call, and a large cluster's consumers keep 80,000 pulls pending."""

    __slots__ = ("code", "addr", "read", "ok", "on_result")

    def __init__(self, code: int, addr: str | None, read=None, ok: tuple[int, ...] = OK, on_result=None) -> None:
        self.code, self.addr, self.read, self.ok, self.on_result = code, addr, read, ok, on_result

    def result(self, response: RemotingCommand):
        """The reply read by `read(response)`; MQBrokerError for a code not in `ok`, MQClientError
        for a reply that lacks what it should carry."""
        if response.code not in self.ok:
            raise MQBrokerError(response.code, response.remark)
        if self.read is None:
            return None
        try:
            return self.read(response)
        except (ValueError, KeyError, TypeError) as e:  # HeaderError, BodyError, a body of the wrong shape
            raise MQClientError(f"bad reply to request {self.code} from {self.addr or 'the NameServer'}: {e}") from None

    def __call__(self, response: RemotingCommand | RemotingError) -> None:
        # An error goes on as a value, with no traceback: one would keep this frame and its callers'
        # alive in a cycle till the next collection, and a closed connection ends every pending
        # pull at once.
        if isinstance(response, RemotingError):
            result = response
        else:
            try:
                result = self.result(response)
            except ClientFailure as e:
                result = e.with_traceback(None)
        self.on_result(result)


def route_query(topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC as the lab's clients ask it."""
    return request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def route_reply(decoded: DecodedBodies, topic: str, on_result=None) -> _AsyncReply:
    """Where a route query's reply goes; errors name the NameServer as _call's do."""
    return _AsyncReply(RequestCode.GET_ROUTEINFO_BY_TOPIC, None,
                       lambda r: decoded.route(topic, r.body or b"", r.serialize_type), OK, on_result)


def consumer_list_query(consumer_group: str) -> RemotingCommand:
    return request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": consumer_group})


def consumer_ids_reply(decoded: DecodedBodies, addr: str, on_result=None) -> _AsyncReply:
    return _AsyncReply(RequestCode.GET_CONSUMER_LIST_BY_GROUP, addr,
                       lambda r: decoded.consumer_ids(r.body or b"", r.serialize_type), OK, on_result)


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

    async def _call(self, addr: str | None, command: RemotingCommand, timeout: float,
                    reply: _AsyncReply | None = None):
        """invokeSync to `addr` (None: the chosen NameServer), a connect first counting against
        `timeout`: what `reply` reads of the answer; by default, that it succeeded."""
        target = addr
        if target is None or not self.channels.is_connected(target):
            begin = trio.current_time()
            if target is None:
                target = await self._namesrv_channel()
            else:
                await self.connect(target)
            left = timeout - (trio.current_time() - begin)
            if left <= 0:
                raise RemotingTimeoutError(f"invokeSync call timeout: connecting to {target} took the whole "
                                           f"{timeout:g} s")
            timeout = left
        response = await self.channels.invoke(target, command, timeout)
        return (reply or _AsyncReply(command.code, addr)).result(response)

    def _step(self, addr: str | None, command: RemotingCommand, timeout: float, reply: _AsyncReply) -> Step:
        """_call as a Step (lab/remoting/flow.py): in a flow, by invokeAsync on the open channel to
        `addr` (None: the chosen NameServer), `reply` resuming the flow, or else by a task that
        connects (or fails over) first; in a task, _call."""
        def start(resume) -> None:
            if addr is None:  # the selector decides whether the chosen one is still the one to ask
                target, ready = self.namesrv.chosen, self.namesrv.is_sticky(self.channels.is_connected)
            else:
                target, ready = addr, self.channels.is_connected(addr)
            if ready:
                reply.on_result = resume
                self.channels.invoke_async(target, command, timeout, reply)
            else:
                in_task(self.channels.nursery, self._call, addr, command, timeout, reply).start(resume)
        return Step(start, lambda: self._call(addr, command, timeout, reply))

    # --- NameServer -------------------------------------------------------------------------------

    def get_topic_route_info_from_name_server(self, topic: str, timeout: float) -> Step:
        """The route; MQBrokerError(17) when the NameServer knows none; RemotingError when none
        answers. The same body gives the same TopicRouteData (DecodedBodies.route)."""
        parser = self.node.config.client.routeParser
        if parser == "fastjson":
            return self._step(None, route_query(topic), timeout, route_reply(self.decoded, topic))
        # A client in another language: JSON, its version, its parser.
        code = RequestCode.GET_ROUTEINFO_BY_TOPIC
        asked = RemotingCommand.request(code, {"topic": topic}, serialize_type=SerializeType.JSON,
                                        version=route_parsers.VERSION[parser])
        return self._step(None, asked, timeout, _AsyncReply(code, None, lambda r: bodies.route_from_wire(
            route_parsers.load_route(r.body or b"", parser))))

    def send_message(self, addr: str, mq: MessageQueue, producer_group: str, body: bytes, properties: str,
                     born_timestamp: int, msg_id: str, timeout: float) -> Step:
        """SEND_MESSAGE_V2 with its short keys (sendMessage): the SendResult."""
        fields = {
            "a": producer_group, "b": mq.topic, "c": DEFAULT_TOPIC, "d": DEFAULT_TOPIC_QUEUE_NUMS,
            "e": mq.queue_id, "f": 0, "g": born_timestamp, "h": 0, "i": properties, "j": 0,
            "k": "false", "m": "false", "n": mq.broker_name,
        }
        code = RequestCode.SEND_MESSAGE_V2
        return self._step(addr, request(code, fields, body), timeout, _AsyncReply(code, addr, lambda r: SendResult(
            SEND_STATUS[r.code], msg_id, r.require("msgId"),
            MessageQueue(mq.topic, mq.broker_name, r.require_int("queueId")), r.require_int("queueOffset")),
            tuple(SEND_STATUS)))

    # --- broker: consumer -------------------------------------------------------------------------

    def pull_message_async(self, addr: str, fields: dict, timeout: float, on_result, renew=None) -> None:
        """pullMessageAsync, on the open channel to `addr` (RemotingError at once without one):
        `on_result` gets the PullResult, or the exception the pull ended with. `renew`: whether an
        empty answer would be followed by the same pull (ChannelTable.invoke_async)."""
        self.channels.invoke_async(addr, request(RequestCode.PULL_MESSAGE, fields), timeout,
                                   _AsyncReply(RequestCode.PULL_MESSAGE, addr, _pull_result, PULL_CODES, on_result),
                                   renew=renew)

    def get_consumer_id_list_by_group(self, addr: str, consumer_group: str, timeout: float) -> Step:
        return self._step(addr, consumer_list_query(consumer_group), timeout, consumer_ids_reply(self.decoded, addr))

    def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue, timeout: float) -> Step:
        """The offset; MQBrokerError (22 QUERY_NOT_FOUND, say) when the broker has none for it."""
        code = RequestCode.QUERY_CONSUMER_OFFSET
        return self._step(addr, request(code, {"consumerGroup": group, **_queue_fields(mq)}), timeout,
                          _AsyncReply(code, addr, _offset))

    def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float) -> Step:
        code = RequestCode.GET_MAX_OFFSET
        return self._step(addr, request(code, _queue_fields(mq)), timeout, _AsyncReply(code, addr, _offset))

    async def update_consumer_offset_oneway(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        if not self.channels.is_connected(addr):
            await self.connect(addr)
        await self.channels.invoke_oneway(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, **_queue_fields(mq), "commitOffset": offset}, oneway=True))

    # --- broker: both -----------------------------------------------------------------------------

    async def send_heartbeat(self, addr: str, body: bytes, timeout: float) -> None:
        """body: the encoded HeartbeatData (MQClientInstance._heartbeat_body)."""
        await self._call(addr, request(RequestCode.HEART_BEAT, None, body), timeout)

    async def unregister_client(self, addr: str, client_id: str, producer_group: str | None,
                                consumer_group: str | None, timeout: float) -> None:
        await self._call(addr, request(RequestCode.UNREGISTER_CLIENT, {
            "clientID": client_id, "producerGroup": producer_group, "consumerGroup": consumer_group}), timeout)
