"""migplan: NVIDIA MIG partitions as code.

Layers (enforced by import-linter, see pyproject.toml):
  model/, logic/, catalog/   pure core: values in, values out
  adapters/                  the only modules that import kubernetes, pygit2 or pynvml
  twin/                      the cluster twin (Kubernetes API server, GPU Operator, NVML); shares only
                             the catalog's data with the rest
  commands/, cli.py          the `migplan` command line
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
