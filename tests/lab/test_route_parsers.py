"""The route-body parsers of clients in other languages, on both brokerAddrs dialects."""

from __future__ import annotations

import pytest

from lab.remoting.wire_codec import rewrite_keys
from lab.clients.route_parsers import load_route
from nameserver.bodies import BodyError, route_from_wire

LEGACY = (b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a",'
          b'"cluster":"c"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
          b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
QUOTED = rewrite_keys(LEGACY, "quoted")
RIGHT = {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}


def addrs(body: bytes, parser: str) -> dict:
    return route_from_wire(load_route(body, parser)).broker_datas[0].broker_addrs


def test_java_clients_read_both_dialects():
    assert addrs(LEGACY, "fastjson") == addrs(QUOTED, "fastjson") == RIGHT


def test_a_strict_json_client_cannot_read_the_legacy_form():
    assert addrs(QUOTED, "strict") == RIGHT
    with pytest.raises(BodyError, match="not standard JSON"):
        load_route(LEGACY, "strict")


def test_the_go_client_reads_quoted_keys_as_id_0_and_takes_the_slave_for_the_master():
    assert addrs(LEGACY, "go-v2") == RIGHT
    assert addrs(QUOTED, "go-v2") == {0: "127.0.0.1:10921"}
