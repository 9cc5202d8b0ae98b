"""The lab's own broker API, imported instead of written.
expect-text: BrokerOuterAPI is what this exercise has you write
"""

from lab.broker.outer_api import BrokerOuterAPI  # noqa: F401
