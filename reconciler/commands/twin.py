"""`migplan twin`: serve a GPU cluster twin built from an inventory until interrupted.

    migplan twin --inventory DIR --kubeconfig-out FILE [--strategy none|single|mixed]
                 [--device-plugin-config NAME] [--drift CASE ...] [--dra static|dynamic-mig]

Starts the Kubernetes API server twin on 127.0.0.1 (a free port), the GPU Operator's behaviour and the NVML
twin, writes a kubeconfig for kubectl and the kubernetes client to FILE, prints the server URL once ready and
serves until SIGINT or SIGTERM, then stops cleanly (exit 0). Exit 2 for usage errors (unknown strategy or
drift case, unreadable inventory). Side effects: a listening socket and the kubeconfig file.

`--dra static` starts NVIDIA's DRA driver twin's GPU kubelet plugin on every node once the twin has settled: each
node's ResourceSlice publishes its MIG devices as they are then. `--dra dynamic-mig` starts it in DynamicMIG mode:
the plugin destroys the MIG devices it did not create and publishes every profile x placement (migplan then leaves
those nodes alone, MP570). See reconciler/twin/ASSUMPTIONS-dra.md.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click

from reconciler.commands.common import fail
from reconciler.twin.fleet import DRIFT_KINDS, parse_drift

__all__ = ["command"]


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
    from datetime import UTC, datetime

    from reconciler.adapters.fsinventory import InventoryReadError, read_inventory_dir
    from reconciler.twin.cluster import AppliedSeed
    from reconciler.twinseed import applied_seed

    try:
        facts = applied_seed(read_inventory_dir(inventory), now=datetime.now(UTC))
    except InventoryReadError:
        return None
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
    dra: str | None,
) -> None:
    """Serve a cluster twin (Kubernetes API, GPU Operator, NVML) built from an inventory until interrupted."""
    from reconciler.twin.cluster import ClusterTwin  # imported late: `migplan --help` stays fast

    try:
        # Written when the twin starts; a path that cannot hold a file is an error before anything runs.
        kubeconfig_out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"error: cannot write the kubeconfig {kubeconfig_out}: {exc.strerror or exc}")
    try:
        twin = ClusterTwin.from_inventory(
            inventory,
            strategy=strategy,
            device_plugin_config=device_plugin_config,
            drift=drift,
            kubeconfig=kubeconfig_out,
            applied=_seed(inventory),
        )
    except (OSError, ValueError, KeyError) as exc:
        raise click.UsageError(f"cannot build the twin from {inventory}: {exc}") from exc
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with twin:
            twin.settle()
            for name in INSTALL_NAMESPACES:  # what `kubectl apply -k deploy/base` makes: `migplan run` finds its own
                if not twin.store.exists("namespaces", None, name):
                    twin.store.create(
                        "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                    )
            if dra is not None:
                for node in sorted(set(twin.fleet.nodes) - set(twin.fleet.absent)):
                    twin.dra_driver(node, dynamic_mig=dra == "dynamic-mig").start_plugin()
                twin.settle()
            nodes = len(twin.store.list("nodes"))
            click.echo(f"cluster twin ready: {twin.url}", nl=True)
            click.echo(f"kubeconfig: {twin.kubeconfig}  ({nodes} nodes; Ctrl-C to stop)", nl=True)
            for node in sorted(twin.fleet.nodes):
                if node not in twin.fleet.absent:  # its kubelet's PodResources socket, for `migplan agent`
                    click.echo(f"kubelet {node}: --pod-resources-socket {twin.pod_resources_socket(node)}", nl=True)
            while not stop.wait(0.5):
                pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("cluster twin stopped")
