"""Where a client finds its NameServers and which one it talks to (ClientConfig, TopAddressing,
NettyRemotingClient's namesrvAddrList / namesrvAddrChoosed / namesrvIndex). Pure.

Sources, first found wins: the explicit `namesrvAddr` ("a:9876;b:9876"), the property
`rocketmq.namesrv.addr`, the environment variable NAMESRV_ADDR, and otherwise the HTTP address
server, whose URL is built from `rocketmq.namesrv.domain` / `rocketmq.namesrv.domain.subgroup`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

DEFAULT_NAMESRV_DOMAIN = "jmenv.tbsite.net"
DEFAULT_NAMESRV_SUBGROUP = "nsaddr"
MAX_INITIAL_INDEX = 999  # namesrvIndex starts at a random value in [0, 998]


@dataclass(frozen=True)
class NamesrvSource:
    addrs: list[str]  # a fixed list, or empty when the list comes from the address server
    ws_addr: str | None = None  # the address server URL, fetched at start and every 2 min


def parse_namesrv_addr(text: str) -> list[str]:
    """'a:9876;http://b:9876' -> ['a:9876', 'b:9876']: split on ';', an http:// prefix dropped."""
    addrs = []
    for item in text.split(";"):
        item = item.strip()
        if item.startswith("http://"):
            item = item[len("http://"):]
        if item:
            addrs.append(item)
    return addrs


def ws_addr(domain: str = DEFAULT_NAMESRV_DOMAIN, subgroup: str = DEFAULT_NAMESRV_SUBGROUP,
            unit_name: str | None = None) -> str:
    """MixAll.getWSAddr: :8080 unless the domain names a port; a unit asks for its own list."""
    url = f"http://{domain}{'' if ':' in domain else ':8080'}/rocketmq/{subgroup}"
    return f"{url}-{unit_name}?nofix=1" if unit_name else url


def namesrv_source(namesrv_addr: str | list[str] | None, *, properties: Mapping[str, str] | None = None,
                   env: Mapping[str, str] | None = None) -> NamesrvSource:
    """properties stand for Java system properties; env is the process environment."""
    properties, env = properties or {}, env or {}
    if isinstance(namesrv_addr, list):
        namesrv_addr = ";".join(namesrv_addr)
    for text in (namesrv_addr, properties.get("rocketmq.namesrv.addr"), env.get("NAMESRV_ADDR")):
        addrs = parse_namesrv_addr(text or "")
        if addrs:
            return NamesrvSource(addrs)
    return NamesrvSource([], ws_addr(properties.get("rocketmq.namesrv.domain", DEFAULT_NAMESRV_DOMAIN),
                                     properties.get("rocketmq.namesrv.domain.subgroup", DEFAULT_NAMESRV_SUBGROUP)))


def parse_http_reply(raw: bytes) -> tuple[int, bytes]:
    """(status, body) of an HTTP/1.x reply read to the end of the connection; status 0 when the
    bytes are not one."""
    head, _, body = raw.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        return 0, b""
    return int(parts[1]), body


def addrs_from_address_server(status: int, body: bytes) -> list[str] | None:
    """TopAddressing.fetchNSAddr: a 200 body, trimmed and cut at the first line break, is the
    ';'-separated list; anything else is no answer."""
    if status != 200:
        return None
    text = body.decode("utf-8", "replace").strip()
    for stop in ("\r", "\n"):
        text = text.split(stop, 1)[0]
    return parse_namesrv_addr(text) or None


def failover_order(addr_list: list[str], namesrv_index: int) -> list[str]:
    """The NameServers to try when the chosen one's channel is gone: one round over the list,
    starting after namesrvIndex. A plain function so the workshop (exercise 7) can swap in a
    learner's version."""
    return [addr_list[abs(namesrv_index + k) % len(addr_list)] for k in range(1, len(addr_list) + 1)]


class NamesrvSelector:
    """The NameServer a client talks to: sticky while its channel is OK, otherwise the next ones
    in turn from a random start, the first that connects becoming the chosen one."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.addr_list: list[str] = []
        self.namesrv_index = rng.randrange(MAX_INITIAL_INDEX)
        self.chosen: str | None = None

    def update_addr_list(self, addrs: list[str]) -> bool:
        """updateNameServerAddressList: a list that differs in size or membership is shuffled and
        replaces the old; the choice is dropped if it is no longer listed. An empty list is ignored
        (4.9.8 keeps the NameServers it has rather than none)."""
        if not addrs or (len(addrs) == len(self.addr_list) and all(a in self.addr_list for a in addrs)):
            return False
        shuffled = list(addrs)
        self.rng.shuffle(shuffled)
        self.addr_list = shuffled
        if self.chosen not in shuffled:
            self.chosen = None
        return True

    def is_sticky(self, channel_ok) -> bool:
        """channel_ok(addr): whether the cached channel to addr is open."""
        return self.chosen is not None and channel_ok(self.chosen)

    def candidates(self) -> Iterator[str]:
        """One round over the list from the next index; each candidate becomes the chosen one
        before it is tried, as in getAndCreateNameserverChannel."""
        for addr in failover_order(self.addr_list, self.namesrv_index):
            self.namesrv_index += 1
            self.chosen = addr
            yield addr
