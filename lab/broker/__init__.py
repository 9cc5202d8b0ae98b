"""A RocketMQ broker for the lab, and what only a broker uses: its store, pulls and long polling, HA, consumer groups, topic config, its calls to the NameServers."""
