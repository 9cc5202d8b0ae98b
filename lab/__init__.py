"""The assembled lab: RocketMQ roles, runs, user interfaces, analysis, and the nslab command."""
