"""A connection carries objects when its builder says so, whatever the stream says of itself; so
does a remoting client, which also takes its timers from its builder."""

import pytest
import trio
import trio.testing

from nameserver.client import RemotingClient, RemotingTimeoutError
from nameserver.connection import Connection
from nameserver.protocol import RemotingCommand, RequestCode, ResponseCode


class ObjectsStream(trio.abc.Stream):
    """A stream that says it carries objects (and would take them), and names its peer."""

    carries_objects = True
    remote_addr = "peer-0"

    def __init__(self):
        self.sent = []

    def send_object(self, payload, size):
        self.sent.append(payload)

    async def send_all(self, data):
        self.sent.append(bytes(data))

    async def wait_send_all_might_not_block(self):
        pass

    async def receive_some(self, max_bytes=None):
        return b""

    async def aclose(self):
        pass


async def test_the_builders_word_decides_what_a_connection_carries():
    stream = ObjectsStream()
    assert not Connection(stream, objects=False).objects
    assert Connection(stream, objects=True).objects
    bytes_connection = Connection(stream, objects=False)
    await bytes_connection.send(RemotingCommand(ResponseCode.SUCCESS, 7, 1, None, None, None))
    assert type(stream.sent[0]) is bytes, "a connection told bytes writes frames"


async def test_the_builder_names_the_peer_where_the_stream_has_no_socket():
    stream = ObjectsStream()
    assert Connection(stream, objects=True, remote_addr="broker-a-0").remote_addr == "broker-a-0"
    assert Connection(trio.testing.MemoryReceiveStream(), objects=False).remote_addr == "?"


async def test_unsaid_a_connection_is_a_byte_stream_whatever_the_stream_says_of_itself():
    connection = Connection(ObjectsStream())  # it says it carries objects and names its peer
    assert not connection.objects and connection.remote_addr == "?"


async def test_a_remoting_client_is_what_its_builder_says_and_times_out_by_the_timers_it_is_given(
        nursery, autojump_clock):
    stream = ObjectsStream()
    stream.call_at = lambda when, fn: pytest.fail("a timer taken from the stream")
    plain = RemotingClient(stream)
    assert (plain.connection.objects, plain.connection.remote_addr) == (False, "?")
    said = RemotingClient(stream, objects=True, remote_addr="broker-a-0")
    assert (said.connection.objects, said.connection.remote_addr) == (True, "broker-a-0")

    timers = []
    client_stream, _server_stream = trio.testing.memory_stream_pair()
    client = RemotingClient(client_stream, call_at=lambda when, fn: timers.append((when, fn)))
    nursery.start_soon(client.run)
    await trio.testing.wait_all_tasks_blocked()
    replies = []
    client.invoke_async(RemotingCommand.request(RequestCode.PULL_MESSAGE, {}), 2.0, replies.append)
    assert [when for when, _ in timers] == [trio.current_time() + 2.0]
    await trio.sleep(5)
    assert replies == [], "no task of its own expired the call: the timers given do"
    timers[-1][1]()
    assert len(replies) == 1 and isinstance(replies[0], RemotingTimeoutError)
