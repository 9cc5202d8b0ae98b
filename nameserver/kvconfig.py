"""KVConfigManager: namespace -> key -> value, optionally persisted as RocketMQ's kvConfig.json."""

from __future__ import annotations

import json
import logging
import os

log = logging.getLogger("nameserver.kvconfig")


class KVConfigManager:
    def __init__(self, path: str | None = None):
        self.path = path
        self.config_table: dict[str, dict[str, str]] = {}
        self.generation = 0  # bumped on every change, so readers can cache what they derive
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                table = json.load(f).get("configTable") or {}
            self.config_table = {ns: dict(kv) for ns, kv in table.items()}

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        self.config_table.setdefault(namespace, {})[key] = value
        log.info("putKVConfig namespace=%s key=%s value=%s", namespace, key, value)
        self._changed()

    def delete_kv_config(self, namespace: str, key: str) -> None:
        table = self.config_table.get(namespace)
        if table is not None and table.pop(key, None) is not None:
            self._changed()

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        return self.config_table.get(namespace, {}).get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str] | None:
        table = self.config_table.get(namespace)
        return dict(table) if table is not None else None

    def _changed(self) -> None:
        self.generation += 1
        if not self.path:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"configTable": self.config_table}, f, indent=2, sort_keys=True)
        os.replace(tmp, self.path)
