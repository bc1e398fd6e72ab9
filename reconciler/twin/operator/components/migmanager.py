"""nvidia-mig-manager on each GPU node: one run per new `nvidia.com/mig.config` value.

From NVIDIA/mig-parted@bd7160f4 `pkg/mig/reconfigure/reconfigure.go` `Run` and `cmd/nvidia-mig-manager/main.go`
(stack-facts §3.3, ASSUMPTIONS-operator.md "mig-manager"): validate the selected config against the mounted file
(`nvidia-mig-parted assert --valid-config`); already applied → `success` without disruption; else state `pending`,
pause the `nvidia.com/gpu.deploy.*` labels (`shutdownKubernetesGPUClients`), wait for the device-plugin pod to
leave (`waitForPodsToBeDeleted`, 5 minutes on the twin's clock: clientwait.py; on timeout the run ends without
`setState`), apply (reconciler/twin/operator/migparted.py; with `WITH_REBOOT=true` a mode change that needs a
reboot reboots the node's GPUs), then `setState`: re-enable the labels and write `success` or `failed`. A value is
processed once (`SyncableMigConfig`): `failed` stays until the label changes; a new mig-manager pod runs the
current value once more (main.go `ContinuouslySyncMigConfigChanges`: the informer's AddFunc `Set`s it, the loop's
`Get` returns it).

mig-manager is a process in its node's pod: it runs only while that pod's container is started (a rolling update
leaves a node without one for a while), and it reads what its pod was started with, not the ClusterPolicy of now:
the ConfigMap behind its `mig-parted-config` volume (`CONFIG_FILE`, else the generated configs) and `WITH_REBOOT`
from its env (gpu-operator `TransformMIGManager` renders both into the pod template; a ClusterPolicy change reaches
a node when the rollout gives it a new pod).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from reconciler.twin.fleet import TwinNode
from reconciler.twin.operator import clientwait, migparted
from reconciler.twin.operator.cache import MigRun, OperatorCache
from reconciler.twin.operator.components.configmounts import ConfigMapMounts
from reconciler.twin.operator.names import (
    CLIENT_LABEL,
    DEPLOY_LABELS,
    MIG_CONFIG,
    MIG_CONFIG_STATE,
    MM_CONTAINER,
    PAUSED,
)
from reconciler.twin.operator.storeapi import StoreApi
from reconciler.twin.operator.workqueue import NodeWork, WorkQueue

__all__ = ["DefaultLabel", "MigManager"]

# The operator's default nvidia.com/mig.config for a node whose label is empty (ClusterPolicyController)
DefaultLabel = Callable[[str, TwinNode, dict[str, str]], bool]
# What strconv.ParseBool reads as true: urfave/cli's BoolFlag parses WITH_REBOOT with it (mig-parted
# cmd/nvidia-mig-manager/main.go, `Sources: cli.EnvVars("WITH_REBOOT")`), so "1" and "T" reboot as "true" does;
# "tRuE" or "yes" are not booleans to Go (the flag fails to parse; the twin then does not reboot).
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_REBOOT_DID_NOT_HELP = (
    "Error: failed to check if a MIG mode change is required: MIG mode change did not take effect after rebooting"
)


def _state_line(state: str) -> str:
    return f"Changing the 'nvidia.com/mig.config.state' node label to '{state}'"


def _failed(exc: migparted.MigPartedError, step: str) -> list[str]:
    """What a failed nvidia-mig-parted run leaves in mig-manager's log: the errors mig-parted logged, its
    fatal line (main.go: log.Fatal(util.Capitalize(err))), then mig-manager's own line for the step
    (reconfigure.go Run: "failed to validate/apply MIG configuration: exit status 1", main.go "Error: %s")."""
    what = {"validate": "failed to validate MIG configuration", "apply": "failed to apply MIG configuration"}
    return [*exc.details, migparted.capitalize(str(exc)), f"Error: {what[step]}: exit status 1"]


class MigManager:
    """mig-manager of every GPU node: its runs, its log (cache.mig_manager_log), what it last processed."""

    def __init__(
        self,
        api: StoreApi,
        cache: OperatorCache,
        mounts: ConfigMapMounts,
        default_label: DefaultLabel,
        queue: WorkQueue,
        clock: Callable[[], float],
    ) -> None:
        self.api = api
        self.cache = cache
        self.mounts = mounts
        self.default_label = default_label
        self.queue = queue
        self.clock = clock
        # Called with the node's name when mig-manager reboots it (the controller ends its pods).
        self.on_reboot: Callable[[str], None] | None = None
        self._done: dict[str, str] = {}  # node → the last value processed (main.go SyncableMigConfig)
        self._runs: dict[str, MigRun] = {}
        # The last mounted file text and its parse: every node's mig-manager reads the same projected
        # file, and in the twin they share one CPU with the API server (on a cluster each parses on its
        # own node). parse() is a pure function of the text, so the result is the same; a text that
        # fails to parse is not kept (it raises again, with the same message, on every run).
        self._parsed: tuple[str, Mapping[str, tuple[migparted.ConfigEntry, ...]]] | None = None

    # ---------------------------------------------------------------- hooks
    def adopt(self, node: str, labels: Mapping[str, str]) -> None:
        """At start every node's current value counts as processed."""
        self._done[node] = labels.get(MIG_CONFIG, "")

    def processed(self, node: str, value: str) -> None:
        """Consider `value` already handled on `node` (drift injection writes states itself)."""
        with self.cache.lock:
            self._done[node] = value

    def expire_client_waits(self, node: str) -> None:
        """Let the wait for the GPU clients on `node` run out now (the 5 minutes skipped)."""
        with self.cache.lock:
            run = self._runs.get(node)
            if run is not None:
                run.wait = clientwait.ClientWait(float("-inf"))
        self.queue.add(NodeWork(node))

    def waiting_nodes(self) -> list[str]:
        """Nodes whose run is waiting for the device-plugin pod (they re-check the clock when reconciled)."""
        with self.cache.lock:
            return [n for n, r in self._runs.items() if r.wait is not None]

    def pod_gone(self, node: str, pod: str) -> None:
        """The node's mig-manager pod left: the process died with it (a run in progress included); the next one's
        informer AddFunc sets the current label value, which it runs once (main.go SyncableMigConfig)."""
        have = self.cache.mm_pods.get(node)
        if have is not None and have.name == pod:
            del self.cache.mm_pods[node]
            self._runs.pop(node, None)
            self._done.pop(node, None)
            self.queue.add(NodeWork(node))

    # ---------------------------------------------------------------- a run
    def reconcile(self, name: str, tw: TwinNode, labels: dict[str, str]) -> bool:
        """Start, continue or finish the node's run (reconfigure.go Run). True when it wrote the node."""
        value = labels.get(MIG_CONFIG, "")
        run = self._runs.get(name)
        if run is None:
            if value and not self._running(name):
                return False  # no mig-manager process on the node now: the value waits for the next pod
            return self._new_value(name, tw, labels, value)
        if self._blocked_by_plugin(name, run):
            return False
        lines = self._apply(name, tw, value or run.value)
        del self._runs[name]
        return self._finish(name, value or run.value, run.captured, labels, lines)

    def _running(self, node: str) -> bool:
        """The node's mig-manager pod exists and its container has started."""
        pod = self.cache.mm_pods.get(node)
        return pod is not None and pod.started(self.clock())

    def _pod_env(self, node: str) -> dict[str, str] | None:
        """The literal env of the node's mig-manager container (None without a pod)."""
        pod = self.cache.mm_pods.get(node)
        return dict(pod.env) if pod is not None else None

    def _new_value(self, name: str, tw: TwinNode, labels: dict[str, str], value: str) -> bool:
        if not value:
            # main.go SyncableMigConfig.Set: an empty (or absent) value wakes nobody; a later non-empty
            # value is a change again, even the one before it (Get only compares with the last value read).
            if self._done.get(name):
                self._done[name] = ""
            return self.default_label(name, tw, labels)
        if self._done.get(name) == value:
            return False
        # main.go start: every value Get returns is logged before migReconfigure runs it (assert, validation and all)
        self._log(name, f"Updating to MIG config: {value}")
        # getCurrentNodeLabels: the deploy labels as they are now are what setState restores from.
        captured = {k: labels.get(k, "") for k in DEPLOY_LABELS}
        entries, lines = self._config(tw, value)
        if lines or entries is None:
            return self._finish(name, value, captured, labels, lines)
        if migparted.assert_applied(entries, tw.gpus):
            return self._finish(name, value, captured, labels, [])
        self._pause(name, value, captured)
        return True

    def _pause(self, name: str, value: str, captured: dict[str, str]) -> None:
        """shutdownKubernetesGPUClients: pending, then every GPU client label maybeSetPaused."""
        patch: dict[str, str | None] = {MIG_CONFIG_STATE: "pending"}
        for key in DEPLOY_LABELS:
            if key == CLIENT_LABEL and not captured[key]:
                continue  # gpu.deploy.client is only touched when it has a value
            patch[key] = "false" if captured[key] == "false" else PAUSED
        self._runs[name] = MigRun(value, captured)
        self._log(name, _state_line("pending"))
        self.api.patch_labels(name, patch)
        self.queue.add(NodeWork(name))  # a restarted run finds the labels already paused: the patch may change nothing

    def _blocked_by_plugin(self, name: str, run: MigRun) -> bool:
        """waitForPodsToBeDeleted: wait for the device-plugin pod to leave the node (the DaemonSet step removes it),
        at most 5 minutes on the twin's clock; then Run returns without setState (clientwait.py). True while the
        pod is there (waiting, or the wait just ran out and ended the run)."""
        if not self._device_plugin_present(name):
            return False
        now = self.clock()
        if run.wait is None:
            run.wait = clientwait.ClientWait(now)
        if not run.wait.expired(now):
            return True
        self._log(name, clientwait.wait_failed_line())
        del self._runs[name]
        self._done[name] = run.value  # main.go: back to migConfig.Get(), which waits for another value
        return True

    def _device_plugin_present(self, node: str) -> bool:
        """waitForPodDeletion("app=nvidia-device-plugin-daemonset") on the node: a Terminating pod still lists."""
        _, value = clientwait.DEVICE_PLUGIN_SELECTOR
        if node in self.cache.dp_pods:
            return True
        return any(p.app in (value, self.cache.device_plugin_ds_name) for p in self.cache.pods_on(node))

    def _apply(self, name: str, tw: TwinNode, value: str) -> list[str]:
        """Apply the config (re-read from the mounted file); the log lines of a failure, [] on success."""
        entries, lines = self._config(tw, value)
        if lines:
            return lines
        assert entries is not None
        try:
            migparted.apply(entries, tw.gpus)
        except migparted.ModeStepFailed as exc:
            # reconfigure.go Run: applyMigModeChange failing for ANY reason reboots under WITH_REBOOT
            if not self._with_reboot(name):
                return _failed(exc, "apply")  # 9. → 10.: without WITH_REBOOT the apply fails
            return self._reboot_and_apply(name, tw, entries)
        except migparted.MigPartedError as exc:
            return _failed(exc, "apply")
        return []

    def _reboot_and_apply(self, name: str, tw: TwinNode, entries: tuple[migparted.ConfigEntry, ...]) -> list[str]:
        """9.: state `rebooting`, the node reboots; after it the pending mode is current and mig-manager
        (restarted) applies the config again."""
        self._log(name, _state_line("rebooting"))
        self.api.patch_labels(name, {MIG_CONFIG_STATE: "rebooting"})
        if self.on_reboot is not None:
            self.on_reboot(name)  # the node's pods end (the kubelet's graceful node shutdown)
        for gpu in tw.gpus:
            gpu.reboot()
        try:
            migparted.apply(entries, tw.gpus)
        except migparted.MigPartedError:
            return [_REBOOT_DID_NOT_HELP]
        return []

    def _finish(
        self,
        name: str,
        value: str,
        captured: Mapping[str, str],
        labels: dict[str, str],
        lines: list[str] | None,
    ) -> bool:
        """reconfigure.go setState: re-enable every GPU client label (maybeSetTrue of the value read when the run
        started: "false" stays, anything else becomes "true"; gpu.deploy.client only if it had a value), then
        write the final state. Also on failure, and also when nothing was paused."""
        self._done[name] = value
        state = "failed" if lines else "success"
        for line in lines or []:
            self._log(name, line)
        self._log(name, _state_line(state))
        patch: dict[str, str | None] = {}
        for key in DEPLOY_LABELS:
            if key == CLIENT_LABEL and not captured.get(key):
                continue
            want = "false" if captured.get(key) == "false" else "true"
            if labels.get(key) != want:
                patch[key] = want
        if labels.get(MIG_CONFIG_STATE) != state:
            patch[MIG_CONFIG_STATE] = state
        if not patch:
            return False
        self.api.patch_labels(name, patch)
        return True

    def _with_reboot(self, node: str) -> bool:
        """WITH_REBOOT=true in the env of the node's mig-manager container (§3.3: default false), rendered from the
        ClusterPolicy's spec.migManager.env (no pod: the ClusterPolicy's, as the next pod will have it)."""
        pod_env = self._pod_env(node)
        if pod_env is not None:
            return pod_env.get("WITH_REBOOT", "") in _GO_TRUE
        env = self.cache.cluster_policy_spec("migManager").get("env") or []
        # The operator renders spec.migManager.env in order onto the container: a later entry wins.
        values = [str(e.get("value", "")) for e in env if isinstance(e, dict) and e.get("name") == "WITH_REBOOT"]
        return bool(values) and values[-1] in _GO_TRUE

    def _config(self, tw: TwinNode, value: str) -> tuple[tuple[migparted.ConfigEntry, ...] | None, list[str]]:
        """validateMigConfig (`nvidia-mig-parted assert --valid-config -f <mounted file> -c <value>`): the entries
        of the selected config, or the log lines of the failure. The file is the ConfigMap as the kubelet has
        projected it into the mig-manager pod (ConfigMapMounts.mounted_text), not the API object."""
        pod = self.cache.mm_pods.get(tw.name)
        if pod is not None:  # what this pod was started with (CONFIG_FILE: its volume's ConfigMap)
            cm_name = pod.config_map if "CONFIG_FILE" in dict(pod.env) else ""
            since = pod.ready_at
        else:
            cm_name = self.cache.cluster_policy_spec("migManager", "config").get("name") or ""
            since = float("-inf")
        configs: Mapping[str, tuple[migparted.ConfigEntry, ...]]
        try:
            if not cm_name:
                configs = migparted.generated_configs(tw.gpus)
            else:
                text = self.mounts.mounted_text(cm_name, since=since)
                if text is None:
                    if cm_name not in self.cache.configmaps:
                        return None, [f'Error: configmaps "{cm_name}" not found']
                    return None, [f"Error: configmap {cm_name} has no key config.yaml"]
                configs = self._parse(text)
            return migparted.select(configs, value), []
        except migparted.MigPartedError as exc:
            return None, _failed(exc, "validate")

    def _parse(self, text: str) -> Mapping[str, tuple[migparted.ConfigEntry, ...]]:
        """migparted.parse(text), kept for the last text (see __init__): read-only, entries are frozen."""
        last = self._parsed
        if last is not None and last[0] == text:
            return last[1]
        configs = MappingProxyType(migparted.parse(text))
        self._parsed = (text, configs)
        return configs

    def _log(self, node: str, line: str) -> None:
        """A line of the node's mig-manager log, mirrored into its pod's log."""
        lines = self.cache.mig_manager_log.setdefault(node, [])
        lines.append(line)
        pod = self.cache.mm_pods.get(node)
        if pod is not None:
            self.api.set_pod_log(pod.name, "\n".join(lines) + "\n", container=MM_CONTAINER)
