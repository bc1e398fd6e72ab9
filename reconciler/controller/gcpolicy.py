"""The controller's policy for Python's cycle collector: off while a cycle runs, one full pass after it.

A cycle on a large fleet keeps hundreds of thousands of long-lived objects between cycles (about 650,000 at
5,000 nodes: the observation memos, the parsed nodes and pods), and every cycle allocates as many more. With the
collector on, its generational passes walk that long-lived heap again and again during the cycle, for almost
nothing to free: measured with benchmarks/reconcile.py's 5,000-node twin, an in-sync cycle took 2.4-2.8 s with
the collector running and 1.47 s with it paused and one full collection after (that collection included).
The pass after the cycle keeps whatever cyclic garbage the cycle made from outliving it, so memory stays bounded
by one cycle's garbage. It is a process policy: the controller's shell (controller/loop.py) owns the process and
runs one cycle at a time; the pure core knows nothing of it. One-shot commands pause the collector without the
pass (reconciler/commands/gcpause.py): their process ends right after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_per_cycle() -> Iterator[None]:
    """The collector off for the block, then one full collection, whatever happens. A collector someone else
    turned off is left alone: its owner decides when it runs."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()
