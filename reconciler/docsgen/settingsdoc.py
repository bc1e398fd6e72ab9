"""docs/reference/settings.md from the `Settings` dataclass (reconciler.settings): every setting of `migplan run`
and `migplan agent`, its environment variable and its default.

Pure. The names and defaults are read from the dataclass, so a setting added there appears here by itself (with
an empty meaning until someone writes one in `MEANING`). A default computed at start (a factory) is described, not
called: the pod's name or a secret would otherwise leak into a file that must be the same on every machine.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from reconciler import settings

MEANING: Mapping[str, str] = {
    "repo": "URL or local path of the inventory repository",
    "branch": "branch (or ref) to follow",
    "path": "inventory root inside the repository",
    "git_username": "HTTPS user name",
    "git_password": "HTTPS token or password (secret; or `git_password_file`)",
    "git_ssh_key": "path of an SSH private key",
    "git_known_hosts": "path of a known_hosts file (SSH host keys are checked)",
    "cache_dir": "the bare Git cache, the report outbox and the last known good state",
    "verify_mode": "`none` or `head`: the head commit must carry a good signature by a trusted key (MP710-MP712)",
    "verify_allowed_signers_file": "trusted SSH keys, git's allowed-signers format (a mounted ConfigMap or Secret)",
    "verify_gpg_keys_file": "trusted OpenPGP public keys, ASCII-armoured",
    "trust_state_config_map": "ConfigMap in `namespace` recording the last verified revision (survives failovers)",
    "trust_state_file": "or a file on a volume for that record; neither: the cache dir, which an emptyDir loses",
    "allow_rewind_to": "the one full commit id accepted as a non-fast-forward of the record (MP951)",
    "report_author_name": "author of the report commits",
    "report_author_email": "author e-mail of the report commits",
    "report_signing_format": "empty (unsigned), `ssh` or `openpgp`: sign the report commits as git does",
    "report_signing_key": "the signing key file (OpenSSH private key, or ASCII-armoured OpenPGP secret key)",
    "kubeconfig": "kubeconfig file; empty: the in-cluster configuration",
    "namespace": "where the leader Lease and the controller live",
    "interval_seconds": "seconds between cycles",
    "jitter_seconds": "random delay added to each interval (smaller than the interval)",
    "backoff_base_seconds": "first delay after a failed cycle; doubles on each consecutive failure",
    "backoff_max_seconds": "the longest delay after consecutive failures",
    "shutdown_grace_seconds": "how long SIGTERM waits for the running cycle",
    "cycle_deadline_seconds": "overall limit of one cycle (Git fetch, every API request, the report push): MP811",
    "cache_lock_timeout_seconds": "how long a cycle waits for another process's cycle on the same cache_dir: MP830",
    "dry_run": "plan and report, write nothing",
    "leader_election": "elect a leader through a Lease (two replicas or more)",
    "lease_name": "the leader Lease",
    "lease_duration_seconds": "Lease duration",
    "renew_deadline_seconds": "a leader that cannot renew within this gives up (retry_period < renew < duration)",
    "retry_period_seconds": "how often a replica tries to take or renew the Lease",
    "identity": "this replica's name in the Lease",
    "listen": "HOST:PORT of /metrics, /healthz, /readyz and /webhook",
    "webhook_secret": "the push webhook's shared secret (secret; or `webhook_secret_file`)",
    "webhook_max_body_bytes": "largest webhook body accepted",
    "http_read_timeout_seconds": "a connection that sends nothing for this long is dropped",
    "http_max_connections": "concurrent connections served; more are answered 503 at once",
    "log_format": "`text` or `json`",
    "log_level": "DEBUG, INFO, WARNING, ERROR",
    "node_name": "the agent's node (`migplan agent --node`, or NODE_NAME)",
    "observe_heartbeat_seconds": "the observer rewrites an unchanged observation this often",
    "observe_silent_heartbeats": "the controller calls an observer silent (MP543) after this many heartbeats",
    "observe_only": "observe and publish only, never change the GPUs (apply modes gpu-operator, report-only)",
    "pod_resources_socket": "the kubelet's PodResources v1 socket",
    "pod_resources_timeout_seconds": "how long the observer waits for the kubelet's answer (MP931)",
    "gpu_operator_namespace": "where the GPU Operator runs the GPU clients the agent pauses around a re-cut",
    "device_plugin_daemonset": "the device plugin's DaemonSet the agent pauses and restores",
    "gpu_clients_wait_seconds": "how long the agent waits for GPU client pods to leave before a re-cut (MP912)",
    "debug": "print the traceback of an internal error (MP899), also MIGPLAN_DEBUG=1",
}

# Defaults a factory computes at start, in words.
COMPUTED: Mapping[str, str] = {"identity": "POD_NAME, else the host name"}

PROLOGUE = """\
# Settings of `migplan run` and `migplan agent`

Generated from `reconciler/settings.py` (`reconciler/docsgen/settingsdoc.py` adds the meanings): do not edit by hand;
run `python -m reconciler.docsgen --write` after adding a setting.

Sources, lowest to highest precedence: the defaults below < a YAML file (`--config FILE` or `MIGPLAN_CONFIG`; keys in
snake_case or camelCase) < environment variables `MIGPLAN_<NAME>` < command-line flags (see [cli.md](cli.md)). A bad
value is MP800 naming its source and key. Secrets may be given as a file instead (`git_password_file`,
`webhook_secret_file`: a mounted Kubernetes Secret); they never appear in a log line (the startup log prints the
settings with secrets as `***`). Git credentials come from here, never from a flag. The inventory's own settings
(strategy, apply mode, reports branch) are in `cluster.yaml`: [inventory.md](inventory.md#clusteryaml).
"""


def _default(f: dataclasses.Field[object]) -> str:
    if f.name in COMPUTED:
        return COMPUTED[f.name]
    if f.default is dataclasses.MISSING:
        value = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        return "unset" if isinstance(value, settings.Secret) else "computed at start"
    value = f.default
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"`{value}`" if value != "" else "empty"


def settings_reference() -> str:
    lines = [PROLOGUE, "| setting | environment | default | meaning |", "|---|---|---|---|"]
    for f in dataclasses.fields(settings.Settings):
        env = settings.ENV_PREFIX + f.name.upper()
        meaning = MEANING.get(f.name, "").replace("|", "\\|")
        lines.append(f"| `{f.name}` | `{env}` | {_default(f)} | {meaning} |")
    return "\n".join(lines) + "\n"
