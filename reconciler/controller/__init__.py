"""The controller (`migplan run`): the run-loop shell around the engine's one-shot cycle.

Modules, one job each: `metrics` (Prometheus registry), `logs` (text/JSON log setup), `webhook`
(GitHub/GitLab push verification, pure), `http` (the /metrics, /healthz, /readyz, /webhook server),
`leader` (Lease-based leader election over a small port), `signals` (Events and the node's failure
reason from a cycle's result), `loop` (everything wired together).
"""
