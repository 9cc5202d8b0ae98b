"""Generic fault machinery — network fabric, faults, scenarios, checks. Knows nothing of RocketMQ."""
