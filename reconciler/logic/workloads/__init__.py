"""Workload manifests against the plan (`migplan check-workloads`)."""
