"""The kubelet's published gRPC APIs, as generated Python stubs (no hand-written code here).

Imported by the PodResources client (reconciler.adapters.podresources) and by the twin's kubelet, which
serves the same API; nothing else imports it (import-linter). See podresources/v1/README.md for the
origin of the .proto and how the stubs are regenerated.
"""
