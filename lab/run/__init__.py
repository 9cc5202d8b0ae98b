"""Running a cluster: topology from config, supervised nodes, clocks and determinism, child processes, fake data, table snapshots."""
