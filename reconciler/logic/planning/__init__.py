"""The planner and what it orders: relabels (gpu-operator mode) and published layouts (agent mode), the disruption
models and guard, drains, the rollout budget and the write order."""
