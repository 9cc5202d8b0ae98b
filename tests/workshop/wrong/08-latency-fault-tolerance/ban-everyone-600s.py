"""Over-bans: every broker, after every send, for 10 minutes.
expect-fail: the briefly slow broker gets its traffic back
"""


def compute_not_available_duration(latency_max, not_available_duration, current_latency):
    return 600000
