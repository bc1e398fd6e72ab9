"""`migplan init DIR`: a starter inventory root of your own, instead of copying the example.

    migplan init DIR --node NAME:MODEL[:COUNT] ... [--cluster-name N] [--strategy S] [--apply-mode M] [--force]
    migplan init DIR --kubeconfig F [--context C] [--force]

From flags it writes `cluster.yaml`, one `nodes/<NAME>.yaml` per --node (COUNT GPUs of MODEL, default 8, MIG
disabled: whole GPUs, as a new GPU comes; `migplan profiles MODEL` lists the cuts to write instead) and `schemas/`
(the JSON Schemas, named by a `yaml-language-server` line at the top of each file, so an editor completes and checks
as you type). From a cluster (--kubeconfig) it is `migplan import`: one node file per GPU node with the partitions the
node has now (nothing an apply would destroy), plus the same `schemas/`. The written root is validated in memory and
the verdict printed with the next commands.

Every input is checked before anything is written: a node name must be a Kubernetes node name (it becomes a file
name: `../x` cannot escape DIR), a model one the catalog knows (by any name: H100-80GB, NVIDIA-H100-80GB-HBM3, ...),
a count 1 to 16. An inventory already in DIR is left alone (MP581) unless --force.

Exit codes: 0 written and valid; 2 nothing written (usage, an inventory already there MP581, cannot write MP589).
With --kubeconfig, `migplan import`'s own.
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from reconciler import resources
from reconciler.catalog import Catalog, load_catalog

__all__ = ["command"]

NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_NODE_NAME = 253
MAX_GPUS = 16
DEFAULT_GPUS = 8
EXISTS, CANNOT_WRITE = "MP581", "MP589"  # the same meanings as `migplan import`'s
SCHEMAS = ("cluster.schema.json", "node.schema.json", "layout.schema.json")


@dataclass(frozen=True, slots=True)
class NodeWish:
    name: str
    model: str  # catalog key
    count: int


def parse_node(text: str, catalog: Catalog) -> NodeWish:
    """`NAME:MODEL[:COUNT]`, checked; raises click.BadParameter saying what is wrong."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise click.BadParameter(f"{text!r}: expected NAME:MODEL[:COUNT], e.g. gpu-01:H100-80GB:8", param_hint="--node")
    name, model_name = parts[0], parts[1]
    if len(name) > MAX_NODE_NAME or not NODE_NAME.fullmatch(name):
        raise click.BadParameter(
            f"{name!r} is not a Kubernetes node name (lower-case letters, digits, '-' and '.')", param_hint="--node"
        )
    model = catalog.resolve(model_name)
    if model is None:
        raise click.BadParameter(
            f"unknown GPU model {model_name!r}; `migplan profiles` lists them: {', '.join(catalog.keys)}",
            param_hint="--node",
        )
    count = DEFAULT_GPUS
    if len(parts) == 3:
        if not parts[2].isdigit() or not 1 <= int(parts[2]) <= MAX_GPUS:
            raise click.BadParameter(f"{parts[2]!r}: a GPU count is 1 to {MAX_GPUS}", param_hint="--node")
        count = int(parts[2])
    return NodeWish(name, model.key, count)


def cluster_yaml(name: str, strategy: str, apply_mode: str) -> str:
    return f"""# yaml-language-server: $schema=schemas/cluster.schema.json
# Cluster-wide settings of this inventory root (written by `migplan init`; edit freely).
apiVersion: migplan/v1
kind: Cluster
metadata: {{name: {name}}}
spec:
  migStrategy: {strategy}            # none | single | mixed -- the GPU Operator's ClusterPolicy spec.mig.strategy
  apply:
    mode: {apply_mode}        # gpu-operator (mig-manager applies) | agent (migplan's node agent) | report-only
    maxUnavailableNodes: 1      # nodes reconfigured at once
    allowDisruption: false      # never destroy a partition a running pod holds unless true
  gpuOperator:
    namespace: gpu-operator
    clusterPolicy: cluster-policy
    devicePluginDaemonSet: nvidia-device-plugin-daemonset
    migConfigMap: migplan-mig-parted-config
  reports: {{branch: migplan-reports, path: reports}}
"""


def node_yaml(node: NodeWish) -> str:
    gpus = "".join(
        f"    - index: {i}\n      model: {node.model}\n      mig: {{enabled: false}}\n" for i in range(node.count)
    )
    return f"""# yaml-language-server: $schema=../schemas/node.schema.json
# {node.count} x {node.model}, MIG disabled (whole GPUs). To cut one, replace its `mig:` with e.g.
#   mig:
#     enabled: true
#     partitions:
#       - {{profile: <a profile of `migplan profiles {node.model}`>, owner: <team>}}
# If this node already has MIG partitions, start from `migplan init DIR --kubeconfig F` instead:
# an inventory saying "disabled" would have them destroyed.
apiVersion: migplan/v1
kind: Node
metadata:
  name: {node.name}
spec:
  gpus:
{gpus}"""


def _cluster_name(directory: Path) -> str:
    name = directory.resolve().name.lower()
    return name if NODE_NAME.fullmatch(name) and len(name) <= 63 else "my-cluster"


def _fail(code: str, message: str) -> None:
    click.echo(f"migplan init: error {code}: {message}", err=True)
    sys.exit(2)


def _copy_schemas(directory: Path) -> None:
    (directory / "schemas").mkdir(parents=True, exist_ok=True)
    for name in SCHEMAS:
        shutil.copyfile(resources.schemas_dir() / name, directory / "schemas" / name)


@click.command("init")
@click.argument("directory", type=click.Path(path_type=Path, dir_okay=True, file_okay=False))
@click.option("--node", "nodes", multiple=True, metavar="NAME:MODEL[:COUNT]", help="A GPU node (repeatable).")
@click.option("--kubeconfig", default=None, help="Write one node file per GPU node of this cluster (`migplan import`).")
@click.option("--context", default=None, help="kubeconfig context (with --kubeconfig).")
@click.option("--cluster-name", default=None, help="metadata.name of cluster.yaml (default: DIR's name).")
@click.option("--strategy", type=click.Choice(["none", "single", "mixed"]), default="mixed", show_default=True)
@click.option(
    "--apply-mode",
    type=click.Choice(["gpu-operator", "agent", "report-only"]),
    default="gpu-operator",
    show_default=True,
)
@click.option("--force", is_flag=True, help="Replace cluster.yaml and the node files of an inventory already there.")
@click.pass_context
def command(
    ctx: click.Context,
    directory: Path,
    nodes: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    cluster_name: str | None,
    strategy: str,
    apply_mode: str,
    force: bool,
) -> None:
    """Write a starter inventory root in DIRECTORY (from --node flags, or from a cluster with --kubeconfig)."""
    if (kubeconfig is None) == (not nodes):
        raise click.UsageError("give --node NAME:MODEL[:COUNT] (repeatable) or --kubeconfig, one of the two")
    if cluster_name is not None and (len(cluster_name) > 63 or not NODE_NAME.fullmatch(cluster_name)):
        raise click.BadParameter(f"{cluster_name!r} is not a DNS name", param_hint="--cluster-name")
    catalog = load_catalog()
    wishes = [parse_node(n, catalog) for n in nodes]
    if len({w.name for w in wishes}) != len(wishes):
        raise click.BadParameter("a node is named twice", param_hint="--node")
    if directory.exists() and not directory.is_dir():
        _fail(CANNOT_WRITE, f"{directory} exists and is not a directory")
    if (directory / "cluster.yaml").exists() and not force:
        _fail(EXISTS, f"{directory} already holds an inventory (cluster.yaml); nothing written (--force replaces it)")
    if kubeconfig is not None:
        from reconciler.commands import adopt

        try:
            _copy_schemas(directory)
        except OSError as exc:
            _fail(CANNOT_WRITE, f"cannot write {directory}: {exc.strerror or exc}")
        ctx.invoke(adopt.command, kubeconfig=kubeconfig, out=directory, cluster_name=cluster_name, force=force)
        return  # adopt.command exits with its own code
    files = {Path("cluster.yaml"): cluster_yaml(cluster_name or _cluster_name(directory), strategy, apply_mode)}
    files.update({Path("nodes") / f"{w.name}.yaml": node_yaml(w) for w in wishes})
    try:
        (directory / "nodes").mkdir(parents=True, exist_ok=True)
        _copy_schemas(directory)
        for rel, text in files.items():
            target = directory / rel
            if target.is_symlink():  # never write through a link someone left in the way
                target.unlink()
            target.write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(CANNOT_WRITE, f"cannot write {directory}: {exc.strerror or exc}")
    from reconciler.adapters.fsinventory import read_inventory_dir
    from reconciler.logic.inventory.validation import validate_inventory

    result = validate_inventory(read_inventory_dir(directory), catalog=catalog)
    gpus = sum(w.count for w in wishes)
    verdict = "valid" if result.valid else "INVALID"
    click.echo(f"wrote {directory}: cluster.yaml, {len(wishes)} node file(s) ({gpus} GPU(s)), schemas/: {verdict}")
    for d in result.diagnostics:
        click.echo(str(d))
    click.echo(
        f"next: `migplan profiles {wishes[0].model}` for the cuts, edit nodes/*.yaml, then `cd {directory} && "
        "migplan validate`"
    )
    sys.exit(0 if result.valid else 1)
