"""A connection carries objects when its builder says so, whatever the stream says of itself."""

import trio
import trio.testing

from nameserver.connection import Connection
from nameserver.protocol import RemotingCommand, ResponseCode


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
