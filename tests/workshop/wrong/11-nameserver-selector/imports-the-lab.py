"""The lab's own selector, imported instead of written.
expect-text: NamesrvSelector is what this exercise has you write
"""

from lab.clients.namesrv import NamesrvSelector  # noqa: F401
