"""PodResources v1: api.proto written here from the kubelet's wire contract, api_pb2*.py generated from it."""
