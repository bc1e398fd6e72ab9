"""benchmarks/commands.py reads the twin child's CPU from /proc/<pid>/stat around every timed process: the command
name (field 2) may hold spaces and parentheses, so the fields after it are counted from its last ')'."""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from helpers import REPO, load_script


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # the script imports its sibling twinchild
    return load_script("bench_commands_twin_cpu", REPO / "benchmarks" / "commands.py")


def _stat(comm: str, utime: int, stime: int, cutime: int, cstime: int) -> str:
    # fields 3..13: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt; then 14..17; then more
    middle = "S 1 2 3 0 -1 4194560 111 222 333 444"
    return f"4242 ({comm}) {middle} {utime} {stime} {cutime} {cstime} 20 0 7 0 55 1000 200 18446744073709551615\n"


@pytest.mark.parametrize(
    "comm",
    ["python3", "a b", "x) (y", ") 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 (", "((", "))", ""],
)
def test_the_cpu_fields_are_counted_after_the_last_parenthesis(bench: ModuleType, comm: str) -> None:
    assert bench.stat_cpu_ticks(_stat(comm, 1234, 56, 7, 8)) == 1234 + 56 + 7 + 8


def test_each_of_the_four_fields_counts(bench: ModuleType) -> None:
    values = [bench.stat_cpu_ticks(_stat("t (1)", *(10**i if i == k else 0 for i in range(4)))) for k in range(4)]
    assert values == [1, 10, 100, 1000]


@pytest.mark.parametrize("line", ["", "4242 python3 S 1 2", "4242 (python3) S 1 2 3", "4242 python3) S 1 2"])
def test_a_line_that_is_not_a_stat_line_is_refused(bench: ModuleType, line: str) -> None:
    with pytest.raises(ValueError, match="stat line"):
        bench.stat_cpu_ticks(line)


def test_this_process_cpu_is_read_from_proc(bench: ModuleType) -> None:
    spent = os.times()
    seen = bench.process_cpu(os.getpid())
    assert seen >= (spent.user + spent.system) - 0.05  # ticks round down; never far below what os.times says
    assert bench.process_cpu(2**22 + 12345) == 0.0  # beyond pid_max's ceiling: a process already gone
