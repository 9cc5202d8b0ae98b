"""Chaos analytics on Spark: `nslab sweep` runs seeded scenario runs over a grid of config values as
Spark tasks; `nslab report` reads their event logs on the executors and computes the metrics.
docs/pipeline.md defines the metrics and the tables."""
