"""Exercise 8: latency fault tolerance (MQFaultStrategy.computeNotAvailableDuration).

After every send attempt (with sendLatencyFaultEnable) the producer asks how long (ms) to avoid
the broker it used. current_latency is the attempt's latency in ms — a failed attempt counts as
30,000 ms. latency_max and not_available_duration are parallel lists (defaults
[50, 100, 550, 1000, 2000, 3000, 15000] and [0, 0, 30000, 60000, 120000, 180000, 600000]):
a latency at or above latency_max[i] earns not_available_duration[i].

Check: nslab workshop check 8
"""


def compute_not_available_duration(latency_max, not_available_duration, current_latency):
    # The naive strategy: never avoid anyone, however slow or dead.
    # TODO: the ban for the largest latency_max step current_latency reached.
    return 0
