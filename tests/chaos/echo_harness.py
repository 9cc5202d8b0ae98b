"""The echo node and round trip the network tests share (test_network.py, test_relay_refuses.py)."""

import trio


async def echo(stream: trio.abc.Stream) -> None:
    """Serve one connection: every byte back, until the peer closes or the connection breaks."""
    try:
        while data := await stream.receive_some(65536):
            await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


async def round_trip(stream: trio.abc.Stream, data: bytes = b"ping") -> bytes:
    """Send `data` and read as many bytes back (a test that hangs here fails after 5 s instead)."""
    await stream.send_all(data)
    got = b""
    with trio.fail_after(5):
        while len(got) < len(data):
            chunk = await stream.receive_some(65536)
            assert chunk, "connection closed"
            got += chunk
    return got
