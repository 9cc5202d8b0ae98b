"""Chaos on a running lab: faults applied live, `nslab chaos`, scenarios played, expectations judged, clients that churn."""
