"""Partitions on one ledger: threads, processes and a kill never overspend, and a
partition is charged exactly once however many openers race for it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import threading
from fractions import Fraction
from pathlib import Path

import pandas as pd

import dpkit as dp
from dpkit.analytics import Query

EIGHTH = dp.PureDP(0.125)


def test_eight_threads_race_parent_spends_and_partitions(frame: pd.DataFrame) -> None:
    # Half the threads spend on the parent, half open their own partition (charged an
    # eighth each) and spend inside it: 2.0 asked of a budget of 1.0; exactly eight
    # eighths may succeed, whatever the interleaving.
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    charged: list[str] = []
    part_spent: list[Fraction] = []
    lock = threading.Lock()

    def parent_worker() -> None:
        for _ in range(3):
            try:
                session.evaluate(Query().count(), budget=EIGHTH)
            except dp.BudgetExceeded:
                continue
            with lock:
                charged.append("query")

    def partition_worker(i: int) -> None:
        try:
            parts = session.partition("age", [20 + i, 40 + i], budgets=EIGHTH)
        except dp.BudgetExceeded:
            return
        with lock:
            charged.append("partition")
        for part in parts.values():
            for _ in range(2):
                with contextlib.suppress(dp.BudgetExceeded):
                    part.evaluate(Query().count(), budget=dp.PureDP(0.0625))
            with lock:
                part_spent.append(Fraction(part.spent.epsilon))  # type: ignore[attr-defined]

    threads = [threading.Thread(target=parent_worker) for _ in range(4)]
    threads += [threading.Thread(target=partition_worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(charged) == 8
    assert sum(r.amount[0] for r in session.history) == Fraction(1)
    assert all(spent <= Fraction(0.125) for spent in part_spent)


def test_eight_threads_open_the_same_partition_once(frame: pd.DataFrame) -> None:
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    opened: list[dict[object, dp.Session]] = []

    def work() -> None:
        opened.append(session.partition("region", ["north", "south"], budgets=0.5))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 8
    assert session.spent == dp.PureDP(0.5) and len(session.history) == 1


_PROCESS = """
import dpkit as dp
from dpkit.analytics import Query
s = dp.Session.from_path({data!r}, budget=dp.PureDP(1.0), ledger={ledger!r})
parts = s.partition("region", ["north", "south", "east"], budgets=0.5)
ok_parent = ok_part = 0
for _ in range(3):
    try:
        s.evaluate(Query().count(), budget=dp.PureDP(0.125)); ok_parent += 1
    except dp.BudgetExceeded:
        pass
    try:
        parts["south"].evaluate(Query().count(), budget=dp.PureDP(0.125)); ok_part += 1
    except dp.BudgetExceeded:
        pass
print(ok_parent, ok_part)
"""


def test_eight_processes_race_parent_and_parts(tmp_path: Path, frame: pd.DataFrame) -> None:
    data, ledger = tmp_path / "data.parquet", tmp_path / "ledger.sqlite"
    frame.to_parquet(data)
    script = _PROCESS.format(data=str(data), ledger=str(ledger))
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    outs = [p.communicate(timeout=300)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    # The partition is charged once (0.5); the parent's 0.5 left gives 4 eighths, and
    # the part's own 0.5 gives 4 eighths, across all eight processes together.
    assert sum(int(o[0]) for o in outs) == 4
    assert sum(int(o[1]) for o in outs) == 4
    again = dp.Session.from_path(data, budget=dp.PureDP(1.0), ledger=ledger)
    assert again.remaining == dp.PureDP(0.0)
    parts = again.partition("region", ["north", "south", "east"], budgets=0.5)
    assert parts["south"].remaining == dp.PureDP(0.0)
    assert parts["north"].remaining == dp.PureDP(0.5)


def test_kill_right_after_a_partition_keeps_its_charge(tmp_path: Path, frame: pd.DataFrame) -> None:
    data, ledger = tmp_path / "data.parquet", tmp_path / "ledger.sqlite"
    frame.to_parquet(data)
    script = textwrap.dedent(
        f"""
        import os, signal
        import dpkit as dp
        s = dp.Session.from_path({str(data)!r}, budget=dp.PureDP(1.0), ledger={str(ledger)!r})
        s.partition("region", ["north", "south"], budgets=0.75)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    again = dp.Session.from_path(data, budget=dp.PureDP(1.0), ledger=ledger)
    assert again.spent == dp.PureDP(0.75)
    parts = again.partition("region", ["north", "south"], budgets=0.75)  # resumed, free
    assert again.spent == dp.PureDP(0.75) and parts["north"].remaining == dp.PureDP(0.75)
