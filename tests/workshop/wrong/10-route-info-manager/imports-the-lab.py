"""The lab's own manager, imported instead of written: refused where the learner's code runs.
expect-text: RouteInfoManager is what this exercise has you write
expect-text: imports-the-lab.py", line 6
"""

from nameserver.routes import RouteInfoManager  # noqa: F401
