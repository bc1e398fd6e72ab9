"""The kubelet's PodResources API (k8s.io/kubelet/pkg/apis/podresources)."""
