"""PodResources v1: api.proto vendored from Kubernetes, api_pb2*.py generated from it (README.md)."""
