"""The NVIDIA GPU Operator's behaviour on the cluster twin (device plugin, GFD, mig-manager, operator
ClusterPolicy reconciliation, plus a tiny scheduler and kubelet). See controller.py for the contract; one module
per component under components/."""

from reconciler.twin.operator.controller import GpuOperator
from reconciler.twin.operator.rendering import device_plugin_daemonset, mig_manager_daemonset

__all__ = ["GpuOperator", "device_plugin_daemonset", "mig_manager_daemonset"]
