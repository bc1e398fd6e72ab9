"""CPU of what `reconcile --once` prints at fleet size, in process: the plan table and the redaction guard.

    .venv/bin/python benchmarks/cliprint.py [--rows 1000 5000] [--strings DIR]

1. the plan table (one `skip` row per node, as a first cycle prints it) drawn by tabulate and by
   `reconciler.commands.texttable.simple_table`, the same bytes checked;
2. `redact` over the strings of a cycle: with `--strings DIR`, every string a real run passed to `redact`
   (pickled one after another into DIR/*.pkl), else a synthetic set: one finding message per node and the
   process's final text (plan table included) at each row count. Both the module's redact and the full
   regex pass (`redact_full`, the reference the fast path is tested against) run over them, results compared.
CPU seconds (process_time), best of --repeat.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.commands.texttable import simple_table
from reconciler.model import redaction

HEADERS = ["action", "subject", "reason"]


def plan_rows(n: int) -> list[list[object]]:
    """The first cycle's plan as a 1,000-node `benchmarks/commands.py` run prints it: the ConfigMap, a skip per node."""
    waiting = (
        "waiting: migplan-8x-custom-3b9c0642 is written to the ConfigMap this cycle; "
        "mig-manager reads its mounted copy one configPropagationSeconds later"
    )
    configure = ["configure", "configmap/gpu-operator/migplan-mig-parted-config", "render the inventory"]
    return [configure, *(["skip", f"node/gpu-{i:05d}", waiting] for i in range(n))]


def cpu(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _each(fn: Callable[[str], str], strings: list[str]) -> list[str]:
    return [fn(s) for s in strings]


def load_strings(folder: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(folder.glob("*.pkl")):
        with path.open("rb") as f:
            while True:
                try:
                    out.append(pickle.load(f))  # our own dump of a benchmark run
                except EOFError:
                    break
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--strings", type=Path, help="folder of pickled redact() inputs of a real run")
    args = ap.parse_args()
    for n in args.rows:
        rows = plan_rows(n)
        assert simple_table(rows, HEADERS) == tabulate(rows, headers=HEADERS, tablefmt="simple")
        before = cpu(partial(tabulate, rows, headers=HEADERS, tablefmt="simple"), args.repeat)
        after = cpu(partial(simple_table, rows, HEADERS), args.repeat)
        print(f"plan table, {n} rows: tabulate {before * 1000:.1f} ms CPU, simple_table {after * 1000:.1f} ms CPU")
    sets: list[tuple[str, list[str]]] = []
    if args.strings:
        sets.append((f"the strings of a real run ({args.strings.name})", load_strings(args.strings)))
    for n in args.rows:
        table = tabulate(plan_rows(n), headers=HEADERS, tablefmt="simple")
        messages = [f"gpu-node-{i:05d}: GPU {i % 8} carries 1g.18gb x7, layout wants all-3g.71gb" for i in range(n)]
        sets.append((f"synthetic, {n} nodes", [*messages, f"Source: https://git.example.com/fleet.git main\n{table}"]))
    for label, strings in sets:
        assert [redaction.redact(s) for s in strings] == [redaction.redact_full(s) for s in strings]
        full = cpu(partial(_each, redaction.redact_full, strings), args.repeat)
        fast = cpu(partial(_each, redaction.redact, strings), args.repeat)
        chars = sum(map(len, strings))
        print(f"redact, {label}: {len(strings)} strings, {chars} chars: full pass {full * 1000:.1f} ms, ", end="")
        print(f"fast path {fast * 1000:.1f} ms CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
