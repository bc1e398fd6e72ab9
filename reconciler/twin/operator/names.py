"""Well-known names the GPU Operator's components agree on: node labels, DaemonSets, containers, images.

From tests/reference/stack-facts.md (§1.6 the operator's rendering, §3.1 the mig-manager DaemonSet and its
default label, §3.3 mig-manager's labels and states); the twin's components import them from here so that a
label the mig-manager pauses is the label the DaemonSet controller's nodeSelector reads.
"""

from __future__ import annotations

__all__ = [
    "CLIENT_LABEL",
    "CONFIG_MANAGER",
    "DEPLOY_LABELS",
    "DP_CONFIG_LABEL",
    "DP_CONTAINER",
    "DP_IMAGE",
    "DP_SELECTOR",
    "GFD_DEPLOY_LABEL",
    "MIG_CAPABLE",
    "MIG_CONFIG",
    "MIG_CONFIG_STATE",
    "MM_CONTAINER",
    "MM_DS",
    "MM_IMAGE",
    "MM_SELECTOR",
    "PAUSED",
]

MIG_CONFIG = "nvidia.com/mig.config"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
MIG_CAPABLE = "nvidia.com/mig.capable"
PAUSED = "paused-for-mig-change"
DEPLOY_LABELS = (
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
    "nvidia.com/gpu.deploy.client",
)
CLIENT_LABEL = "nvidia.com/gpu.deploy.client"
GFD_DEPLOY_LABEL = "nvidia.com/gpu.deploy.gpu-feature-discovery"
DP_SELECTOR = "nvidia.com/gpu.deploy.device-plugin"
MM_DS = "nvidia-mig-manager"  # stack-facts §3.1
MM_SELECTOR = "nvidia.com/gpu.deploy.mig-manager"
MM_CONTAINER = "nvidia-mig-manager"
MM_IMAGE = "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0"
DP_CONTAINER = "nvidia-device-plugin"
DP_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
CONFIG_MANAGER = "config-manager"
DP_CONFIG_LABEL = "nvidia.com/device-plugin.config"
