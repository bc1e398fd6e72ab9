"""The Kubernetes adapters: the only modules that import the official `kubernetes` client."""
