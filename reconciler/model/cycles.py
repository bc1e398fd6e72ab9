"""The verdict of one reconcile cycle, and the one mapping from it to exit codes and metrics labels.

Every entry point that runs a cycle — `migplan run` (each cycle of the loop, and `--once`),
`migplan reconcile --once` (from a directory or from `--repo`) and `migplan demo` — ends with a
`CycleStatus`. The process exit code (`CycleStatus.exit_code`) and the `result` label of
`migplan_reconcile_total` (`CycleStatus.metric_label`) are read from it here and nowhere else, so a
cycle that one command calls "drift" cannot be "success" for another.

Pure values: no I/O, no clock.
"""

from __future__ import annotations

import enum

EXIT_IN_SYNC = 0  # nothing to do: the cluster matches the inventory
EXIT_DRIFT = 1  # drift found, changes made or held back, or acting on an older revision: not converged yet
EXIT_ERROR = 2  # a step failed (API error, unreadable cluster state, Git cache or report lost)

# The `result` label of a cycle the controller did not run because this replica does not lead
# (standby): not a verdict of a cycle, so not a CycleStatus, but one of the label's values.
SKIPPED = "skipped"


class CycleStatus(enum.StrEnum):
    """How one cycle ended. The values are the `result` label values of `migplan_reconcile_total`."""

    SUCCESS = "success"  # in sync with the revision the team merged, and nothing left to do
    DRIFT = "drift"  # it ran: findings or writes remain, or it acted on an older revision than the newest
    FAILED = "failed"  # a step failed, no revision ever validated, or the cycle could not start

    @property
    def exit_code(self) -> int:
        """The process exit code of a one-shot command whose cycle ended so (docs/reference/cli.md: 0 / 1 / 2)."""
        return _EXIT_CODES[self]

    @property
    def metric_label(self) -> str:
        """The `result` label of `migplan_reconcile_total` for a cycle that ended so."""
        return self.value


_EXIT_CODES = {CycleStatus.SUCCESS: EXIT_IN_SYNC, CycleStatus.DRIFT: EXIT_DRIFT, CycleStatus.FAILED: EXIT_ERROR}

# Every value of the `result` label, exported as zeros from the first scrape so that rate() works.
CYCLE_RESULTS: tuple[str, ...] = (*(s.metric_label for s in CycleStatus), SKIPPED)


def judge(*, failed: bool, converged: bool, behind: bool = False) -> CycleStatus:
    """The one rule: a failure wins; then "in sync and nothing left to do" is success, unless the cycle
    acted on an older revision than the newest (refused, or the remote unreachable), which is never
    "in sync" with what the team merged."""
    if failed:
        return CycleStatus.FAILED
    if converged and not behind:
        return CycleStatus.SUCCESS
    return CycleStatus.DRIFT
