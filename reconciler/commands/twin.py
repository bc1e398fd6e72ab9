"""`migplan twin`: serve a GPU cluster twin built from an inventory until interrupted.

    migplan twin --inventory DIR --kubeconfig-out FILE [--strategy none|single|mixed]
                 [--device-plugin-config NAME] [--drift CASE ...] [--dra static|dynamic-mig]

Starts the Kubernetes API server twin on 127.0.0.1 (a free port), the GPU Operator's behaviour and the NVML
twin, and the kubelet PodResources servers of the nodes `migplan agent` is to be pointed at; writes a kubeconfig
for kubectl and the kubernetes client to FILE only once the server answers (atomically: whoever waits for the file
gets a twin that is ready), prints the server URL and serves until SIGINT or SIGTERM, then stops cleanly (exit 0).
With each served kubelet it prints the node's `migplan agent --observe-only` command line: PYNVML_MODULE
names the pynvml-shaped module reconciler.twin.nvml.fromfile, NVML_TWIN_FILE the node's NVML file, which the
twin rewrites whenever the node's GPUs or their holders change (docs/how-to/observe-the-twin.md).
Kubelets: every node's for a fleet of up to KUBELETS_BY_DEFAULT nodes, otherwise only those named by `--kubelet`
(each is a gRPC server with threads of its own: one per node of a 5,000-node fleet was more than 5,000 threads).
Exit 2 for usage errors (unknown strategy, drift case or --kubelet node, unreadable inventory). Side effects: a
listening socket, the kubelets' unix sockets and the kubeconfig file.

`--dra static` starts NVIDIA's DRA driver twin's GPU kubelet plugin on every node once the twin has settled: each
node's ResourceSlice publishes its MIG devices as they are then. `--dra dynamic-mig` starts it in DynamicMIG mode:
the plugin destroys the MIG devices it did not create and publishes every profile x placement (migplan then leaves
those nodes alone, MP570). See reconciler/twin/ASSUMPTIONS-dra.md.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click

from reconciler.commands.common import fail
from reconciler.twin.fleet import DRIFT_KINDS, parse_drift

__all__ = ["KUBELETS_BY_DEFAULT", "command"]

KUBELETS_BY_DEFAULT = 32  # nodes: up to this fleet size every node's kubelet is served without --kubelet


# The namespaces a real install has beyond a bare cluster's: deploy/base/namespace.yaml's. The twin's own
# (gpu-operator, default, kube-*) come from the twin; this one is migplan's install, so the command adds it.
INSTALL_NAMESPACES = ("migplan",)


def _drift(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for v in values:
        try:
            parse_drift(v)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    return values


def _seed(inventory: Path) -> Any:
    """The twin starts as if migplan had applied the inventory (reconciler/twinseed.py); None when the
    inventory does not validate (the twin then makes its own start, and `migplan run` reports the inventory)."""
    import gc
    from datetime import UTC, datetime

    from reconciler.adapters.fsinventory import InventoryReadError, read_inventory_dir
    from reconciler.twin.cluster import AppliedSeed
    from reconciler.twinseed import applied_seed

    gc_was_enabled = gc.isenabled()
    gc.disable()  # reading 5,000 nodes allocates a million small acyclic objects: full GC passes cost 0.7 s
    try:
        facts = applied_seed(read_inventory_dir(inventory), now=datetime.now(UTC))
    except InventoryReadError:
        return None
    finally:
        if gc_was_enabled:
            gc.enable()
    return AppliedSeed(*facts) if facts is not None else None


@click.command(name="twin")
@click.option(
    "--inventory",
    "inventory",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="Inventory root (cluster.yaml, nodes/, layouts/) the cluster is built from.",
)
@click.option(
    "--kubeconfig-out",
    "kubeconfig_out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the kubeconfig (bearer token, the twin's CA).",
)
@click.option(
    "--strategy",
    type=click.Choice(["none", "single", "mixed"]),
    default=None,
    help="ClusterPolicy spec.mig.strategy (default: the inventory's migStrategy).",
)
@click.option(
    "--device-plugin-config",
    "device_plugin_config",
    default=None,
    metavar="NAME",
    help="Add a stale device-plugin ConfigMap NAME (its own flags.migStrategy) named by spec.devicePlugin.config.",
)
@click.option(
    "--drift",
    "drift",
    multiple=True,
    callback=_drift,
    metavar="CASE",
    help="Inject a drift case; repeatable. One of: " + ", ".join(DRIFT_KINDS) + " (most take :<node>).",
)
@click.option(
    "--kubelet",
    "kubelets",
    multiple=True,
    metavar="NODE",
    help=f"Serve NODE's kubelet PodResources socket; repeatable (default: every node up to {KUBELETS_BY_DEFAULT}).",
)
@click.option(
    "--dra",
    "dra",
    type=click.Choice(["static", "dynamic-mig"]),
    default=None,
    help="Run NVIDIA's DRA driver on every node (its plugin publishes ResourceSlices when the twin is ready).",
)
def command(
    inventory: Path,
    kubeconfig_out: Path,
    strategy: str | None,
    device_plugin_config: str | None,
    drift: tuple[str, ...],
    kubelets: tuple[str, ...],
    dra: str | None,
) -> None:
    """Serve a cluster twin (Kubernetes API, GPU Operator, NVML) built from an inventory until interrupted."""
    from reconciler.twin.cluster import ClusterTwin  # imported late: `migplan --help` stays fast
    from reconciler.twin.nvml.export import NvmlExports

    try:
        # Written once the twin answers; a path that cannot hold a file is an error before anything runs.
        kubeconfig_out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"error: cannot write the kubeconfig {kubeconfig_out}: {exc.strerror or exc}")
    try:
        # Its own kubeconfig in a private folder at first: FILE is written once the server answers.
        twin = ClusterTwin.from_inventory(
            inventory,
            strategy=strategy,
            device_plugin_config=device_plugin_config,
            drift=drift,
            applied=_seed(inventory),
        )
    except (OSError, ValueError, KeyError) as exc:
        raise click.UsageError(f"cannot build the twin from {inventory}: {exc}") from exc
    unknown = sorted(set(kubelets) - set(twin.fleet.nodes))
    if unknown:
        raise click.BadParameter(f"no such node in {inventory}: {', '.join(unknown)}", param_hint="--kubelet")
    served = kubelet_nodes(sorted(twin.fleet.nodes), set(twin.fleet.absent), kubelets)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with twin, contextlib.ExitStack() as stack:
            twin.settle()
            for name in INSTALL_NAMESPACES:  # what `kubectl apply -k deploy/base` makes: `migplan run` finds its own
                if not twin.store.exists("namespaces", None, name):
                    twin.store.create(
                        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                    )
            if dra is not None:  # every node's plugin publishes at once, in one bulk load (no thread per node)
                present = sorted(set(twin.fleet.nodes) - set(twin.fleet.absent))
                twin.start_dra_plugins(present, dynamic_mig=dra == "dynamic-mig")
                twin.settle()
            nodes = twin.store.count("nodes")  # counted, not listed: 5,000 nodes decoded took a noticeable while
            sockets = {node: twin.pod_resources_socket(node) for node in served}  # started here, before FILE
            # Each served node's NVML as a file `migplan agent` reads through its pynvml seam (PYNVML_MODULE);
            # rewritten on the serving loop whenever the node's GPUs or their holders change.
            nvml_dir = Path(tempfile.mkdtemp(prefix="migplan-twin-nvml-"))
            stack.callback(shutil.rmtree, nvml_dir, True)
            exports = NvmlExports(twin, served, nvml_dir)
            exports.refresh()
            try:
                answers(twin.url, twin.api.ca_file)
                publish_kubeconfig(twin, kubeconfig_out)
            except OSError as exc:
                fail(f"error: the twin does not answer or {kubeconfig_out} cannot be written: {exc}")
            click.echo(f"cluster twin ready: {twin.url}", nl=True)
            click.echo(f"kubeconfig: {kubeconfig_out}  ({nodes} nodes; Ctrl-C to stop)", nl=True)
            for node, socket in sockets.items():  # its kubelet's PodResources socket, for `migplan agent`
                click.echo(f"kubelet {node}: --pod-resources-socket {socket}", nl=True)
            for node, socket in sockets.items():  # the observed path: the node's agent against its twin NVML
                click.echo(f"agent {node}: {agent_command(node, kubeconfig_out, socket, exports.path(node))}", nl=True)
            left = len(twin.fleet.nodes) - len(twin.fleet.absent) - len(sockets)
            if left > 0:
                click.echo(f"kubelets of {left} other node(s) not served: name them with --kubelet NODE", nl=True)
            while not stop.wait(0.5):
                exports.refresh()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("cluster twin stopped")


def agent_command(node: str, kubeconfig: Path, socket: Path, nvml_file: Path) -> str:
    """`migplan agent --observe-only` for `node`, against this twin's API server, kubelet and NVML (a shell line)."""
    words = [
        "PYNVML_MODULE=reconciler.twin.nvml.fromfile",
        f"NVML_TWIN_FILE={shlex.quote(str(nvml_file))}",
        "migplan",
        "agent",
        "--observe-only",
        "--once",
        "--node",
        shlex.quote(node),
        "--kubeconfig",
        shlex.quote(str(kubeconfig.absolute())),
        "--pod-resources-socket",
        shlex.quote(str(socket)),
    ]
    return " ".join(words)


def kubelet_nodes(nodes: list[str], absent: set[str], named: tuple[str, ...]) -> list[str]:
    """The nodes whose kubelet is served: those named, or every present node of a fleet up to the default size."""
    if named:
        return sorted(set(named) - absent)
    present = [n for n in nodes if n not in absent]
    return present if len(nodes) <= KUBELETS_BY_DEFAULT else []


def answers(url: str, ca_file: Path | None, timeout: float = 30.0) -> None:
    """Return once the API server answers GET /version (OSError if it does not within `timeout`)."""
    import ssl
    import time
    import urllib.request

    context = ssl.create_default_context(cafile=str(ca_file)) if ca_file is not None else None
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/version", timeout=5, context=context) as resp:
                if resp.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def publish_kubeconfig(twin: Any, target: Path) -> None:
    """Write the kubeconfig next to `target`, then rename it into place: the file appears whole, or not at all."""
    import os

    tmp = target.with_name(f".{target.name}.tmp")
    try:
        twin.api.write_kubeconfig(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
