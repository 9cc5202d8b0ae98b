"""KVConfigManager: namespace -> key -> value, optionally persisted as RocketMQ's kvConfig.json.

As in 4.9.8, both levels are Java HashMaps and a value may be null (PUT_KV_CONFIG without `value`):
the key then exists, keeps its place in its map, answers "no config item" to a get, and is left
out wherever fastjson writes the table (KV lists, register replies, the file), as fastjson drops
null map values. Lists come out in the maps' Java iteration order (java_order.py).
"""

from __future__ import annotations

import json
import logging
import os

from .java_order import DEFAULT_CAPACITY, grown_capacity, hashmap_order, presized_capacity
from .protocol import fastjson
from .protocol.fastjson import JavaMap
from .protocol.headers import UTF8_AS_JAVA

log = logging.getLogger("nameserver.kvconfig")


class KVConfigManager:
    def __init__(self, path: str | None = None):
        self.path = path
        self.config_table: dict[str, dict[str, str | None]] = {}
        self.generation = 0  # bumped on every change, so readers can cache what they derive
        # Java HashMap table lengths: configTable's, and each namespace's map's (java_order.py).
        self._capacity = DEFAULT_CAPACITY
        self._ns_capacity: dict[str, int] = {}
        if path and os.path.exists(path):
            self._load(path)

    def _load(self, path: str) -> None:
        """KVConfigManager.load: fastjson parses the file into fresh HashMaps (keys inserted in
        file order), then configTable.putAll(parsed), which presizes configTable for them."""
        with open(path, encoding="utf-8") as f:
            table = json.load(f).get("configTable") or {}
        parsed = {ns: {k: v for k, v in kv.items()} for ns, kv in table.items()}
        for ns, kv in parsed.items():
            self._ns_capacity[ns] = grown_capacity(DEFAULT_CAPACITY, len(kv))
        for ns in hashmap_order(parsed):  # putAll iterates the parsed map
            self.config_table[ns] = parsed[ns]
        if parsed:
            self._capacity = presized_capacity(len(parsed))

    def put_kv_config(self, namespace: str, key: str, value: str | None) -> None:
        table = self.config_table.get(namespace)
        if table is None:
            table = self.config_table[namespace] = {}
            self._capacity = grown_capacity(self._capacity, len(self.config_table))
        table[key] = value
        self._ns_capacity[namespace] = grown_capacity(self._ns_capacity.get(namespace, DEFAULT_CAPACITY), len(table))
        log.info("putKVConfig namespace=%s key=%s value=%s", namespace, key, value)
        self._changed()

    def delete_kv_config(self, namespace: str, key: str) -> None:
        table = self.config_table.get(namespace)
        if table is not None and key in table:
            del table[key]  # the namespace stays, empty, as in Java
            self._changed()

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        """None when the namespace or key is unknown, or the stored value is null."""
        return self.config_table.get(namespace, {}).get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str] | None:
        """The namespace's entries in Java order, null values left out (as fastjson writes them);
        None for an unknown namespace. An existing namespace may give an empty dict."""
        table = self.config_table.get(namespace)
        if table is None:
            return None
        capacity = self._ns_capacity.get(namespace, DEFAULT_CAPACITY)
        return {k: table[k] for k in hashmap_order(table, capacity) if table[k] is not None}

    def to_json(self) -> bytes:
        """The file as 4.9.8 writes it: KVConfigSerializeWrapper.toJson(), i.e. compact fastjson
        with the maps in their Java order, null values dropped, text as UTF-8."""
        wrapper = {"configTable": JavaMap(
            (ns, JavaMap(self.get_kv_list_by_namespace(ns)))
            for ns in hashmap_order(self.config_table, self._capacity))}
        return fastjson.dumps(wrapper, standard=False).encode("utf-8", UTF8_AS_JAVA)

    def _changed(self) -> None:
        self.generation += 1
        if not self.path:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(self.to_json())
        os.replace(tmp, self.path)
