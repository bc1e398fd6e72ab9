"""Settings of the long-running commands (`migplan run`, `migplan agent`): one frozen value.

Sources, lowest to highest precedence: built-in defaults < a YAML file (`--config FILE` or
`MIGPLAN_CONFIG`) < environment variables `MIGPLAN_<NAME>` < command-line flags — the order the device
plugin and most Kubernetes components use, so an operator can pin a value in the Deployment's env
without editing the mounted file. Secrets (webhook secret, Git password/token) may also come from files
(`*_file`, for mounted Kubernetes Secrets) and are held in `Secret`, whose repr never shows the value,
so a logged Settings never leaks them (`Settings.redacted()` is what the startup log prints).

Loading does I/O only to read the given files; everything else is validation of plain values. A bad
value is a `MigplanError` naming the source and the key (`MIGPLAN_INTERVAL: expected a number, got 'x'`).
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import math
import os
import re
import socket
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from reconciler.logic.codecs.observedcodec import HEARTBEAT_SECONDS, SILENT_AFTER_HEARTBEATS
from reconciler.model.errors import MigplanError
from reconciler.model.inventory import VerifyMode, VerifySettings
from reconciler.model.redaction import redact

ENV_PREFIX = "MIGPLAN_"
CODE = "MP800"  # settings errors
DEFAULT_CYCLE_DEADLINE = 30.0  # seconds; well under the default interval (60 s)
DEFAULT_LOCK_TIMEOUT = 60.0  # seconds to wait for another process's cycle on the same cache directory
# where the kubelet serves its PodResources API (the path DCGM exporter reads too)
DEFAULT_POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"


class Secret:
    """A secret string: compares and hashes by value, prints as '***'."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret('***')" if self._value else "Secret('')"

    __str__ = __repr__


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


def _default_identity() -> str:
    # In a pod, POD_NAME (downward API) is unique per replica; the hostname is the pod name anyway.
    return os.environ.get("POD_NAME") or socket.gethostname()


@dataclass(frozen=True, slots=True)
class Settings:
    # where the inventory comes from
    repo: str = ""  # URL or local path of the inventory repository
    branch: str = "main"
    path: str = "."  # inventory root inside the repository
    git_username: str = ""
    git_password: Secret = field(default_factory=lambda: Secret(""))  # token or password (HTTPS)
    git_ssh_key: str = ""  # path of an SSH private key
    git_known_hosts: str = ""  # path of a known_hosts file
    cache_dir: str = "/var/cache/migplan"
    # Commit trust, set here and never by the repository it judges (docs/how-to/commit-signing.md):
    # whether the head must carry a good signature, by which keys (files, e.g. a mounted ConfigMap or Secret),
    # where the last verified revision is recorded (a ConfigMap in `namespace`, written through the API, survives
    # restarts and failovers; a file, on a volume that outlives the pod; neither: the cache dir, which an emptyDir
    # loses), and the one commit an operator accepts as a non-fast-forward of that record.
    verify_mode: str = "none"  # none | head
    verify_allowed_signers_file: str = ""  # SSH allowed-signers lines (git's gpg.ssh.allowedSignersFile format)
    verify_gpg_keys_file: str = ""  # ASCII-armoured OpenPGP public keys
    trust_state_config_map: str = ""
    trust_state_file: str = ""
    allow_rewind_to: str = ""  # a full commit id, or empty
    # the report commits: who makes them and, optionally, the key that signs them (as git does with
    # gpg.format ssh / openpgp); the key is a file, e.g. a mounted Secret (reconciler.adapters.git.commitsigning)
    report_author_name: str = "migplan"
    report_author_email: str = "migplan@localhost"
    report_signing_format: str = ""  # "" (unsigned) | ssh | openpgp
    report_signing_key: str = ""  # ssh: OpenSSH private key file; openpgp: ASCII-armoured secret key file
    # the cluster
    kubeconfig: str = ""  # empty: in-cluster configuration
    namespace: str = "migplan"  # where the Lease and the controller live
    # the loop
    interval_seconds: float = 60.0
    jitter_seconds: float = 5.0
    backoff_base_seconds: float = 10.0
    backoff_max_seconds: float = 300.0
    shutdown_grace_seconds: float = 20.0
    # Overall limit of one cycle (Git fetch, every API request, the report push): a server that
    # accepts connections and never answers ends the cycle with MP811 instead of stalling the loop.
    cycle_deadline_seconds: float = DEFAULT_CYCLE_DEADLINE
    # How long a cycle waits for another process's cycle on the same cache_dir (MP830 after that).
    cache_lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT
    dry_run: bool = False
    # leader election (coordination.k8s.io/v1 Lease)
    leader_election: bool = True
    lease_name: str = "migplan-leader"
    lease_duration_seconds: int = 15
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0
    identity: str = field(default_factory=_default_identity)
    # HTTP: /metrics, /healthz, /readyz, /webhook
    listen: str = "0.0.0.0:8080"
    webhook_secret: Secret = field(default_factory=lambda: Secret(""))
    webhook_max_body_bytes: int = 5 * 1024 * 1024
    http_read_timeout_seconds: float = 10.0  # per connection: a slow or half-sent request is dropped
    http_max_connections: int = 64  # concurrent connections served; more are answered 503 at once
    # logs
    log_format: LogFormat = LogFormat.TEXT
    log_level: str = "INFO"
    # the node agent
    node_name: str = ""
    # the node observer (`migplan agent`, every apply mode): it rewrites its observation when it changed or
    # when the published one is a heartbeat old; the controller calls it silent after 3 heartbeats.
    observe_heartbeat_seconds: float = HEARTBEAT_SECONDS
    # the controller: an observer whose last report is older than this many heartbeats is silent (MP543) and
    # its facts are not used
    observe_silent_heartbeats: int = SILENT_AFTER_HEARTBEATS
    observe_only: bool = False  # observe and publish, never change the GPUs (gpu-operator, report-only)
    # the kubelet's PodResources API (v1), the source of which pod holds which device
    pod_resources_socket: str = DEFAULT_POD_RESOURCES_SOCKET
    pod_resources_timeout_seconds: float = 5.0
    # where the GPU Operator runs the node's GPU clients, which the agent pauses around a re-cut (mig-manager's
    # dance, reconciler/adapters/kube/gpuclients.py), and how long it waits for their pods to leave (5 min as
    # mig-manager's waitForPodsToBeDeleted)
    gpu_operator_namespace: str = "gpu-operator"
    device_plugin_daemonset: str = "nvidia-device-plugin-daemonset"
    gpu_clients_wait_seconds: float = 300.0
    # show the traceback of an internal error (MP899) instead of one line; MIGPLAN_DEBUG=1
    debug: bool = False

    def redacted(self) -> dict[str, Any]:
        """Every setting as plain values for the startup log, secrets shown only as set/unset."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Secret):
                out[f.name] = "***" if value else ""
            elif isinstance(value, enum.Enum):
                out[f.name] = value.value
            elif isinstance(value, str):
                out[f.name] = redact(value)  # e.g. a token written into the repository URL
            else:
                out[f.name] = value
        return out

    @property
    def listen_host_port(self) -> tuple[str, int]:
        """(host, port) of `listen`: HOST:PORT, [IPv6]:PORT or :PORT. ValueError for anything else."""
        return parse_listen(self.listen)


def parse_listen(listen: str) -> tuple[str, int]:
    """HOST:PORT (a name or an IPv4 address), [IPv6]:PORT, or :PORT (every IPv4 address). ValueError else."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or len(port) > 5:
        raise ValueError("expected HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError("not an IPv6 address in the brackets") from None
        host = host[1:-1]
    elif ":" in host:
        raise ValueError("an IPv6 address goes in brackets: [::]:8080")
    elif host and not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})", host):
        raise ValueError("not a host name or address")
    return host or "0.0.0.0", int(port)


_FIELDS = {f.name: f for f in fields(Settings)}
# Settings that name a file something else reads later: each must be a regular file when it exists.
_FILE_SETTINGS = (
    "git_ssh_key",
    "git_known_hosts",
    "report_signing_key",
    "verify_allowed_signers_file",
    "verify_gpg_keys_file",
    "trust_state_file",
)
_DEFAULTS = Settings(identity="default")
# Secrets that may be given as a file path instead of a value (mounted Kubernetes Secrets).
_SECRET_FILES = {"webhook_secret_file": "webhook_secret", "git_password_file": "git_password"}


def _error(source: str, message: str) -> MigplanError:
    return MigplanError(f"{source}: {message}", code=CODE)


MAX_NUMBER = 1e9  # seconds (31 years), bytes (1 GB), counts: beyond any sane setting, inside every API's range


def _shown(raw: Any) -> str:
    """A value as a message may quote it: repr, cut (a setting can be a megabyte of anything)."""
    text = repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."


def _convert(name: str, raw: Any, source: str) -> Any:
    default = getattr(_DEFAULTS, name)
    if isinstance(default, Secret):
        if isinstance(raw, Secret):
            return raw
        if not isinstance(raw, str):
            raise _error(source, "expected a string")
        return Secret(raw)
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise _error(source, f"expected true or false, got {raw!r}")
    if isinstance(default, LogFormat):
        try:
            return LogFormat(str(raw).lower())
        except ValueError:
            raise _error(source, f"expected one of text, json, got {raw!r}") from None
    if isinstance(default, int | float):
        try:
            value = int(raw) if isinstance(default, int) else float(raw)
        except (TypeError, ValueError, OverflowError):
            raise _error(source, f"expected a number, got {_shown(raw)}") from None
        # float("nan") and float("inf") parse: a nan timeout compares false with everything and so
        # disables every check that uses it; no setting is meant to be either, nor astronomically large.
        if not math.isfinite(value) or abs(value) > MAX_NUMBER:
            raise _error(source, f"expected a finite number up to {MAX_NUMBER:g}, got {_shown(raw)}")
        if value < 0:
            raise _error(source, f"must not be negative, got {_shown(raw)}")
        return value
    if raw is None:
        return ""
    if not isinstance(raw, str | int | float):
        raise _error(source, f"expected a string, got {type(raw).__name__}")
    return str(raw)


MAX_SETTINGS_FILE_BYTES = 1024 * 1024  # a secret, a key list: far smaller; a larger file is a mistake


def read_regular_file(path: str, source: str, *, what: str = "file", limit: int = MAX_SETTINGS_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes, or MP800 naming `source`.

    Opened without blocking and checked before reading: a FIFO (or a device, a directory) in place of a
    mounted Secret would otherwise block start-up forever, or read without end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _error(source, f"cannot read {what} {path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _error(source, f"{what} {path} is not a regular file")
        if info.st_size > limit:
            raise _error(source, f"{what} {path} is larger than {limit} bytes")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, 65536)):
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise _error(source, f"cannot read {what} {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(data) > limit:
        raise _error(source, f"{what} {path} is larger than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _error(source, f"{what} {path} is not UTF-8 text") from None


def _read_secret_file(path: str, source: str) -> Secret:
    # Kubernetes mounts secrets with a trailing newline more often than not; it is never part of it.
    return Secret(read_regular_file(path, source, what="secret file").rstrip("\r\n"))


def verify_settings(s: Settings) -> VerifySettings:
    """The operator's commit-signature policy: verify_mode and the keys of the two files (read now).

    MP800 for a file that is missing, not a regular file or too large, and for `head` without a key."""
    signers: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    if s.verify_allowed_signers_file:
        text = read_regular_file(s.verify_allowed_signers_file, "verify_allowed_signers_file", what="signers file")
        signers = tuple(
            line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
        )
    if s.verify_gpg_keys_file:
        text = read_regular_file(s.verify_gpg_keys_file, "verify_gpg_keys_file", what="key file")
        keys = (text,) if "-----BEGIN PGP PUBLIC KEY BLOCK-----" in text else ()
        if not keys:
            raise _error("verify_gpg_keys_file", f"{s.verify_gpg_keys_file} holds no ASCII-armoured public key")
    mode = VerifyMode(s.verify_mode)
    if mode is VerifyMode.HEAD and not (signers or keys):
        raise _error(
            "verify_mode",
            "head needs trusted keys: verify_allowed_signers_file (SSH) or verify_gpg_keys_file (OpenPGP)",
        )
    return VerifySettings(mode=mode, allowed_signers=signers, gpg_public_keys=keys)


def _apply(values: dict[str, Any], items: Mapping[str, Any], describe: Any) -> None:
    for key, raw in items.items():
        if key in _SECRET_FILES:
            if raw:
                values[_SECRET_FILES[key]] = _read_secret_file(str(raw), describe(key))
            continue
        if key not in _FIELDS:
            raise _error(describe(key), "unknown setting")
        values[key] = _convert(key, raw, describe(key))


def load_settings(
    *,
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config_file: str | os.PathLike[str] | None = None,
) -> Settings:
    """Merge defaults < file < env < flags into a validated Settings.

    `flags` holds only the flags the user gave (None values are ignored); names are the field names
    (`interval_seconds`) or a `*_file` secret path. `env` defaults to os.environ.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    config_file = config_file or env.get(ENV_PREFIX + "CONFIG") or None
    if config_file:
        path = Path(config_file)
        try:
            doc = yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader)
        except OSError as exc:
            raise _error(str(path), f"cannot read config file: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            # One line: a reader error (binary file) words itself over two, naming "<byte string>".
            problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc).splitlines()[0]
            raise _error(where, f"not valid YAML: {problem}") from exc
        if doc is None:
            doc = {}
        if not isinstance(doc, dict):
            raise _error(str(path), "expected a mapping of setting names to values")
        # The file may use camelCase (intervalSeconds) like the rest of our YAML, or snake_case.
        _apply(values, {_snake(str(k)): v for k, v in doc.items()}, lambda k: f"{path}: {k}")
    env_items = {
        k[len(ENV_PREFIX) :].lower(): v
        for k, v in env.items()
        if k.startswith(ENV_PREFIX) and k != ENV_PREFIX + "CONFIG"
    }
    _apply(values, env_items, lambda k: ENV_PREFIX + k.upper())
    _apply(values, {k: v for k, v in (flags or {}).items() if v is not None}, lambda k: "--" + k.replace("_", "-"))
    settings = dataclasses.replace(Settings(), **values)
    _validate(settings)
    return settings


def _snake(name: str) -> str:
    out = []
    for ch in name:
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch.replace("-", "_"))
    return "".join(out)


def _validate(s: Settings) -> None:
    if s.interval_seconds <= 0:
        raise _error("interval_seconds", "must be greater than 0")
    if s.jitter_seconds >= s.interval_seconds:
        raise _error("jitter_seconds", "must be smaller than interval_seconds")
    if s.lease_duration_seconds < 1:
        # The API refuses 0 with 422 (leases.json); catch it before the first request.
        raise _error("lease_duration_seconds", "must be at least 1")
    if not s.retry_period_seconds < s.renew_deadline_seconds < s.lease_duration_seconds:
        raise _error(
            "renew_deadline_seconds",
            "needs retry_period_seconds < renew_deadline_seconds < lease_duration_seconds "
            "(a leader must give up before another replica may take over)",
        )
    if s.cycle_deadline_seconds <= 0:
        raise _error("cycle_deadline_seconds", "must be greater than 0")
    if s.http_read_timeout_seconds <= 0:
        raise _error("http_read_timeout_seconds", "must be greater than 0")
    if s.observe_heartbeat_seconds <= 0:
        raise _error("observe_heartbeat_seconds", "must be greater than 0")
    if s.observe_silent_heartbeats < 1:
        raise _error("observe_silent_heartbeats", "must be at least 1")
    if s.pod_resources_timeout_seconds <= 0:
        raise _error("pod_resources_timeout_seconds", "must be greater than 0")
    if s.http_max_connections < 1:
        raise _error("http_max_connections", "must be at least 1")
    if s.backoff_base_seconds > s.backoff_max_seconds:
        raise _error("backoff_base_seconds", "must not exceed backoff_max_seconds")
    try:
        port = s.listen_host_port[1]
    except ValueError as exc:
        raise _error("listen", f"expected HOST:PORT or [IPv6]:PORT, got {_shown(s.listen)} ({exc})") from None
    if not 0 <= port <= 65535:
        raise _error("listen", f"port out of range in {s.listen!r}")
    for name in _FILE_SETTINGS:
        path = getattr(s, name)
        try:
            mode = os.stat(path).st_mode if path else None
        except OSError:
            mode = None  # missing or unreadable: said by whoever reads it, with its own code (MP730, MP702, ...)
        if mode is not None and not stat.S_ISREG(mode):
            # A FIFO there would block start-up forever in the reader (libgit2, ssh-keygen, gpg, open()).
            raise _error(name, f"{_shown(path)} is not a regular file")
    if s.verify_mode not in ("none", "head"):
        raise _error("verify_mode", f"expected none or head, got {s.verify_mode[:40]!r}")
    if s.allow_rewind_to and not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", s.allow_rewind_to):
        raise _error("allow_rewind_to", "expected a full commit id (40 or 64 lowercase hex digits), or empty")
    if s.trust_state_config_map and not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", s.trust_state_config_map):
        raise _error("trust_state_config_map", "expected a ConfigMap name (DNS subdomain)")
    if s.trust_state_config_map and s.trust_state_file:
        raise _error("trust_state_file", "give trust_state_config_map or trust_state_file, not both")
    if s.report_signing_format not in ("", "ssh", "openpgp"):
        raise _error(
            "report_signing_format", f"expected ssh or openpgp (or empty: unsigned), got {s.report_signing_format!r}"
        )
    if bool(s.report_signing_format) != bool(s.report_signing_key):
        raise _error(
            "report_signing_key",
            "report_signing_format and report_signing_key go together (a key file and its format: ssh or openpgp)",
        )
    if s.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise _error("log_level", f"unknown level {s.log_level!r}")
