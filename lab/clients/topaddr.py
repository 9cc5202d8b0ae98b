"""TopAddressing's fetch: GET the address server URL through the lab's network (so a simulated run
can serve it too) and hand the reply to the pure parser in namesrv.py."""

from __future__ import annotations

from urllib.parse import urlsplit

import trio

from lab.remoting.channels import Node

from .namesrv import addrs_from_address_server

MAX_REPLY = 1 << 20


def parse_http_reply(raw: bytes) -> tuple[int, bytes]:
    """(status, body) of an HTTP/1.x reply read to the end of the connection; status 0 when the
    bytes are not one."""
    head, _, body = raw.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        return 0, b""
    return int(parts[1]), body


async def fetch_namesrv_addr(node: Node, url: str, timeout: float = 3.0) -> list[str] | None:
    """The address server's list, or None when it cannot be reached or gives no list."""
    split = urlsplit(url)
    path = split.path + (f"?{split.query}" if split.query else "")
    address = split.netloc if split.port else f"{split.netloc}:80"
    with trio.move_on_after(timeout):
        try:
            stream = await node.network.connect(node.name, address)
            async with stream:
                await stream.send_all(f"GET {path or '/'} HTTP/1.0\r\nHost: {split.netloc}\r\n"
                                      "Connection: close\r\n\r\n".encode())
                raw = b""
                while len(raw) < MAX_REPLY and (chunk := await stream.receive_some(65536)):
                    raw += chunk
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            return None
        return addrs_from_address_server(*parse_http_reply(raw))
    return None
