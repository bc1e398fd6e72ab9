"""`migplan agent`: the NVML node agent for `apply.mode: agent` (one per GPU node, a DaemonSet pod).

Every interval (and on SIGHUP) it opens NVML, reports the node's real MIG state into the Node
annotation `migplan.io/mig-observed`, reads the layout the controller published in
`migplan.io/mig-desired`, applies only what differs with exact placements (pausing the node's GPU
clients around it as mig-manager does, so the device plugin advertises the new partitions), and publishes
`migplan.io/mig.state` (pending | success | failed) with the reason — see reconciler.agent.
It talks to the API only about its own Node (`--node`, from the downward API `spec.nodeName`).

Exit codes: 0 stopped cleanly (SIGTERM) or `--once` ended in success; 1 `--once` ended pending;
2 bad configuration or `--once` failed.
"""

from __future__ import annotations

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
@click.option("--once", is_flag=True, help="One pass, then exit with its state.")
def command(config_file: str | None, once: bool, **given: Any) -> None:
    """Report and apply this node's MIG layout through NVML."""
    from reconciler.adapters import kubeclient
    from reconciler.adapters.kubeagentmode import KubeNodeState
    from reconciler.adapters.kubegpuclients import KubeGpuClients
    from reconciler.adapters.nvml import NvmlGpu
    from reconciler.agent import actuate_once
    from reconciler.controller.logs import setup_logging
    from reconciler.logic.agentplan import MigState
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
    node_state = KubeNodeState(api)
    clients = KubeGpuClients(
        api,
        namespace=settings.gpu_operator_namespace,
        device_plugin_daemonset=settings.device_plugin_daemonset,
        wait_seconds=settings.gpu_clients_wait_seconds,
    )
    last: list[Any] = []

    def one_pass(trigger: str) -> None:
        with NvmlGpu() as gpus:
            outcome = actuate_once(gpus=gpus, node_state=node_state, node=settings.node_name, clients=clients)
        last[:] = [outcome]
        log.info("agent pass", extra={"trigger": trigger, "state": str(outcome.state), "reason": outcome.reason})
        if outcome.state is MigState.FAILED:
            raise MigplanError(outcome.reason, code="MP920")  # counts towards the backoff

    runner = CycleRunner(one_pass, backoff_base=settings.backoff_base_seconds, backoff_max=settings.backoff_max_seconds)
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
