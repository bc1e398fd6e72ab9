"""`migplan agent`: the node observer on every GPU node, and the NVML actuator for `apply.mode: agent`.

One DaemonSet pod per GPU node. Every interval (and on SIGHUP) it opens NVML, reads the kubelet's
PodResources API (`--pod-resources-socket`) and publishes the node's observation — real layout and who holds
each partition — in the Node annotation `migplan.io/mig-observed` (reconciler.observer). With
`--observe-only` (apply modes gpu-operator and report-only) that is all it does: a source it cannot read is
published as a reason, and the pass still succeeds. Without it (apply.mode: agent) it also reads the layout
the controller published in
`migplan.io/mig-desired`, applies only what differs with exact placements (pausing the node's GPU clients
around it as mig-manager does, so the device plugin advertises the new partitions), and publishes
`migplan.io/mig.state` (pending | success | failed) with the reason — see reconciler.agent.
It talks to the API only about its own Node (`--node`, from the downward API `spec.nodeName`).

Exit codes: 0 stopped cleanly (SIGTERM) or `--once` ended in success; 1 `--once` ended pending;
2 bad configuration or `--once` failed.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from reconciler.commands.common import fail, failing
from reconciler.settings import load_settings


@click.command("agent")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="YAML settings file (MIGPLAN_CONFIG).")
@click.option("--node", "node_name", envvar="NODE_NAME", help="This node's name (env NODE_NAME).")
@click.option("--kubeconfig", help="Kubeconfig file; in-cluster configuration when omitted.")
@click.option("--interval", "interval_seconds", type=float, help="Seconds between passes.")
@click.option("--log-format", type=click.Choice(["text", "json"]), help="Log format.")
@click.option("--log-level", help="Log level.")
@click.option(
    "--observe-only",
    "observe_only",
    flag_value=True,
    default=None,
    help="Observe and publish only; never change the GPUs (apply modes gpu-operator, report-only).",
)
@click.option(
    "--pod-resources-socket",
    "pod_resources_socket",
    help="The kubelet's PodResources socket (default /var/lib/kubelet/pod-resources/kubelet.sock).",
)
@click.option(
    "--heartbeat",
    "observe_heartbeat_seconds",
    type=float,
    help="Seconds after which an unchanged observation is rewritten.",
)
@click.option("--once", is_flag=True, help="One pass, then exit with its state.")
def command(config_file: str | None, once: bool, **given: Any) -> None:
    """Observe this node's GPUs and their holders; apply its MIG layout through NVML unless --observe-only."""
    from reconciler.adapters.kube import client as kubeclient
    from reconciler.controller.logs import setup_logging
    from reconciler.nodeagent import NodeAgent

    flags = {k: v for k, v in given.items() if v is not None}
    flags.setdefault("interval_seconds", 30.0)
    with failing():
        settings = load_settings(flags=flags, config_file=config_file)
    setup_logging(settings.log_format, settings.log_level)
    if not settings.node_name:
        fail("--node (or NODE_NAME) is required", code="MP800")
    with failing("cannot load the Kubernetes configuration: "):
        api = kubeclient.core_v1(kubeclient.api_client(kubeclient.kube_configuration(settings.kubeconfig)))
    agent = NodeAgent(settings, api)
    if once:
        code, line = agent.once()
        if line is not None:
            click.echo(line)
        sys.exit(code)
    sys.exit(agent.run_forever())
