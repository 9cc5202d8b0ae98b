"""ProducerManager: which clients a broker knows per producer group, from their heartbeats. Pure.

A heartbeat's producerDataSet registers its client in each group (CLIENT_INNER_PRODUCER included,
as 4.9.8 does); the connection closing, UNREGISTER_CLIENT with the group, or 120 s without a
heartbeat take it out. Only GET_PRODUCER_CONNECTION_LIST reads it.
"""

from __future__ import annotations

from .consumer_manager import CHANNEL_EXPIRED_TIMEOUT, ClientChannelInfo


class ProducerManager:
    def __init__(self, channel_expired_timeout: float = CHANNEL_EXPIRED_TIMEOUT):
        self.channel_expired_timeout = channel_expired_timeout
        self.group_channel_table: dict[str, dict[object, ClientChannelInfo]] = {}

    def register_producer(self, group: str, client_id: str, channel: object, now: float,
                          language: str = "JAVA", version: int = 0) -> None:
        self.group_channel_table.setdefault(group, {})[channel] = ClientChannelInfo(client_id, now, language, version)

    def unregister_producer(self, group: str, channel: object) -> None:
        channels = self.group_channel_table.get(group)
        if channels is not None:
            channels.pop(channel, None)
            if not channels:  # 4.9.8 drops an empty group, so its connection list says "not exist"
                del self.group_channel_table[group]

    def do_channel_close_event(self, channel: object) -> None:
        for group in list(self.group_channel_table):
            self.unregister_producer(group, channel)

    def scan_not_active_channel(self, now: float) -> list[tuple[str, object]]:
        """Remove clients silent for longer than the timeout: (group, channel) each."""
        expired = []
        for group, channels in list(self.group_channel_table.items()):
            for channel, info in list(channels.items()):
                if now - info.last_update_timestamp > self.channel_expired_timeout:
                    self.unregister_producer(group, channel)
                    expired.append((group, channel))
        return expired
