"""A cluster twin that starts as if migplan had already applied the inventory: the seed the twin is given.

The twin knows nothing of migplan (it never imports migplan's logic). A command that builds one from an inventory
(`migplan twin`, `migplan demo --inventory`) renders here, with migplan's own code, what migplan's apply would have
left — the mig-parted ConfigMap's text, its `configs-added-at` stamp older than the propagation delay, and each
node's `nvidia.com/mig.config` value — and hands it to the twin as plain data (twin.cluster.AppliedSeed). The
first cycle against that twin then has nothing to write but the drift injected on purpose, instead of relabelling
every node because the twin named the same layouts its own way.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import NamedTuple

from reconciler.catalog import load_catalog
from reconciler.logic.codecs import migparted
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.planning.planner import rfc3339
from reconciler.model.inventory import ApplyMode
from reconciler.model.observed import CONFIGS_ADDED_AT_ANNOTATION, MANAGED_BY_LABEL, MANAGED_BY_VALUE


class Applied(NamedTuple):
    """The fields of twin.cluster.AppliedSeed (reconciler.demo and `migplan twin` make one: only they import it)."""

    config_text: str
    node_configs: Mapping[str, str]
    annotations: Mapping[str, str]
    labels: Mapping[str, str]


def applied_seed(files: Mapping[str, bytes], *, now: datetime) -> Applied | None:
    """What migplan's apply of this inventory leaves on a cluster, or None: an invalid inventory, or
    `apply.mode: agent` (no mig-parted ConfigMap then)."""
    result = validate_inventory(files, catalog=load_catalog())
    desired = result.desired
    if desired is None or desired.cluster.apply.mode is ApplyMode.AGENT:
        return None
    rendered = migparted.render(desired)
    long_ago = now - timedelta(seconds=desired.cluster.apply.config_propagation_seconds + 60)
    return Applied(
        config_text=rendered.text,
        node_configs=dict(rendered.node_configs),
        annotations={CONFIGS_ADDED_AT_ANNOTATION: rfc3339(long_ago)},
        labels={MANAGED_BY_LABEL: MANAGED_BY_VALUE},
    )
