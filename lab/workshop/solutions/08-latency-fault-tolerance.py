"""Reference solution for exercise 8."""


def compute_not_available_duration(latency_max, not_available_duration, current_latency):
    # From the largest step down: the first step reached decides.
    for step, duration in zip(reversed(latency_max), reversed(not_available_duration)):
        if current_latency >= step:
            return duration
    return 0
