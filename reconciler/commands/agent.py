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

import contextlib
import logging
import sys
from typing import Any

import click

from reconciler.model.errors import MigplanError
from reconciler.settings import load_settings

log = logging.getLogger("migplan.agent")


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
    from reconciler.adapters.kube.agentmode import KubeNodeState
    from reconciler.adapters.kube.gpuclients import KubeGpuClients
    from reconciler.adapters.nvml import NvmlGpu
    from reconciler.adapters.podresources import KubeletPodResources
    from reconciler.agent import actuate_once
    from reconciler.controller.logs import setup_logging
    from reconciler.logic.planning.agentplan import MigState
    from reconciler.scheduling import CycleRunner, Scheduler, install_signal_handlers

    flags = {k: v for k, v in given.items() if v is not None}
    flags.setdefault("interval_seconds", 30.0)
    try:
        settings = load_settings(flags=flags, config_file=config_file)
    except MigplanError as exc:
        click.echo(f"error {exc.code}: {exc.message}", err=True)
        sys.exit(2)
    setup_logging(settings.log_format, settings.log_level)
    if not settings.node_name:
        click.echo("error MP800: --node (or NODE_NAME) is required", err=True)
        sys.exit(2)
    try:
        api = kubeclient.core_v1(kubeclient.api_client(kubeclient.kube_configuration(settings.kubeconfig)))
    except MigplanError as exc:
        click.echo(f"error {exc.code}: cannot load the Kubernetes configuration: {exc.message}", err=True)
        sys.exit(2)
    node_state = KubeNodeState(api, heartbeat_seconds=settings.observe_heartbeat_seconds)
    holders = KubeletPodResources(settings.pod_resources_socket, timeout_seconds=settings.pod_resources_timeout_seconds)
    clients = KubeGpuClients(
        api,
        namespace=settings.gpu_operator_namespace,
        device_plugin_daemonset=settings.device_plugin_daemonset,
        wait_seconds=settings.gpu_clients_wait_seconds,
    )
    last: list[Any] = []

    def observe_pass(trigger: str) -> None:
        from reconciler.observer import publish_pass

        obs = publish_pass(open_gpus=NvmlGpu, holders=holders, node_state=node_state, node=settings.node_name)
        last[:] = [obs]
        log.info("observer pass", extra={"trigger": trigger, "sources": dict(obs.sources)})

    def one_pass(trigger: str) -> None:
        from reconciler.observer import publish_pass

        with contextlib.ExitStack() as stack:
            try:
                gpus = stack.enter_context(NvmlGpu())
            except MigplanError:
                # NVML cannot be opened: say so on the Node (the observation), then fail the pass.
                publish_pass(open_gpus=NvmlGpu, holders=holders, node_state=node_state, node=settings.node_name)
                raise
            outcome = actuate_once(
                gpus=gpus, node_state=node_state, node=settings.node_name, holders=holders, clients=clients
            )
        last[:] = [outcome]
        log.info("agent pass", extra={"trigger": trigger, "state": str(outcome.state), "reason": outcome.reason})
        if outcome.state is MigState.FAILED:
            raise MigplanError(outcome.reason, code="MP920")  # counts towards the backoff

    runner = CycleRunner(
        observe_pass if settings.observe_only else one_pass,
        backoff_base=settings.backoff_base_seconds,
        backoff_max=settings.backoff_max_seconds,
    )
    if once and settings.observe_only:
        record = runner.run("once")
        obs = last[0] if last else None
        if obs is None or record is None:
            sys.exit(2)
        click.echo("observed: " + ", ".join(f"{k} {v}" for k, v in sorted(obs.sources.items())))
        sys.exit(0)
    if once:
        record = runner.run("once")
        outcome = last[0] if last else None
        if outcome is None or record is None:
            sys.exit(2)
        click.echo(f"{outcome.state or 'no-layout'}: {outcome.reason}")
        sys.exit({MigState.SUCCESS: 0, MigState.PENDING: 1, None: 0}.get(outcome.state, 2))
    scheduler = Scheduler(
        runner, interval=settings.interval_seconds, jitter=min(settings.jitter_seconds, settings.interval_seconds / 2)
    )
    stop: list[bool] = []
    install_signal_handlers(on_reload=lambda: scheduler.trigger("sighup"), on_stop=lambda: stop.append(True))
    scheduler.start()
    import time

    while not stop:
        time.sleep(0.5)
    sys.exit(0 if scheduler.shutdown(grace=settings.shutdown_grace_seconds) else 1)
