"""Ignores its parameters: RocketMQ's default steps, hard-coded.
expect-fail: test_ban_uses_its_parameters
"""

STEPS = [(15000, 600000), (3000, 180000), (2000, 120000), (1000, 60000), (550, 30000)]


def compute_not_available_duration(latency_max, not_available_duration, current_latency):
    for step, ban in STEPS:
        if current_latency >= step:
            return ban
    return 0
