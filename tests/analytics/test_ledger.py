"""The ledger: durable, exact, thread-safe, resumable; the ApproxDP filter never overspends."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import threading
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit as dp
from dpkit.accounting._math.conversions import zcdp_epsilon, zcdp_epsilon_at_order
from dpkit.analytics import Query
from dpkit.analytics._accounting import budget_kind
from dpkit.analytics._ledger import Ledger
from dpkit.errors import BudgetExceeded, DataError


def test_reopen_resumes_and_refuses_other_budget(tmp_path: Path, frame: pd.DataFrame) -> None:
    ledger = tmp_path / "ledger.sqlite"
    s1 = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), ledger=ledger, rng=1)
    s1.evaluate(Query().count(), budget=dp.PureDP(0.3))
    s2 = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), ledger=ledger, rng=2)
    assert s2.spent == dp.PureDP(0.3)
    assert s2.remaining == dp.PureDP(0.7)
    with pytest.raises(DataError, match="budget"):
        dp.Session.from_pandas(frame, budget=dp.PureDP(2.0), ledger=ledger)
    with pytest.raises(DataError, match="different table"):
        dp.Session.from_pandas(frame[["user", "age"]], budget=dp.PureDP(1.0), ledger=ledger)


def test_exact_arithmetic(tmp_path: Path) -> None:
    kind = budget_kind(dp.PureDP(0.3), None, "test")
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.open_scope("root", kind.key, kind.amount, "fp")
    for _ in range(2):
        ledger.spend("root", (Fraction(0.1),), "", rule=kind.rule)
    assert ledger.spent("root") == (2 * Fraction(0.1),)
    # The exact rational of the float 0.1, times 3, exceeds that of 0.3: a float sum
    # (0.1 + 0.1 + 0.1 == 0.30000000000000004 > 0.3 too, but by rounding luck) is not
    # trusted; the rationals decide, and the third spend is refused.
    assert 3 * Fraction(0.1) > Fraction(0.3)
    with pytest.raises(BudgetExceeded):
        ledger.spend("root", (Fraction(0.1),), "", rule=kind.rule)
    assert ledger.spent("root") == (2 * Fraction(0.1),)


def test_eight_threads_never_overspend(frame: pd.DataFrame) -> None:
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(1.0), rng=1)
    successes: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(3):
            try:
                session.evaluate(Query().count(), budget=dp.ZCDP(0.125))
            except BudgetExceeded:
                continue
            with lock:
                successes.append(1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(successes) == 8  # exactly 8 * 0.125 = 1 fits, no more
    assert session.remaining == dp.ZCDP(0.0)
    assert len(session.history) == 8


def test_kill_after_commit_keeps_the_spend(tmp_path: Path, frame: pd.DataFrame) -> None:
    data = tmp_path / "data.parquet"
    frame.to_parquet(data)
    ledger = tmp_path / "ledger.sqlite"
    script = textwrap.dedent(
        f"""
        import os, signal
        import dpkit as dp
        from dpkit.analytics import Query
        s = dp.Session.from_path({str(data)!r}, budget=dp.PureDP(1.0), ledger={str(ledger)!r})
        s._after_commit = lambda: os.kill(os.getpid(), signal.SIGKILL)
        s.evaluate(Query().count(), budget=dp.PureDP(0.4))
        print("released")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -9, proc.stderr
    assert "released" not in proc.stdout
    session = dp.Session.from_path(data, budget=dp.PureDP(1.0), ledger=ledger)
    assert session.spent == dp.PureDP(0.4)


def test_two_processes_share_a_ledger(tmp_path: Path, frame: pd.DataFrame) -> None:
    data = tmp_path / "data.parquet"
    frame.to_parquet(data)
    ledger = tmp_path / "ledger.sqlite"
    script = textwrap.dedent(
        f"""
        import dpkit as dp
        from dpkit.analytics import Query
        s = dp.Session.from_path({str(data)!r}, budget=dp.PureDP(1.0), ledger={str(ledger)!r})
        ok = 0
        for _ in range(6):
            try:
                s.evaluate(Query().count(), budget=dp.PureDP(0.125)); ok += 1
            except dp.BudgetExceeded:
                pass
        print(ok)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    total = sum(int(p.communicate(timeout=120)[0].strip()) for p in procs)
    assert total == 8
    assert dp.Session.from_path(data, budget=dp.PureDP(1.0), ledger=ledger).remaining == dp.PureDP(
        0.0
    )


@settings(max_examples=60, deadline=None)
@given(
    epsilon=st.floats(0.05, 5.0),
    log_delta=st.floats(-12.0, -3.0),
    spends=st.lists(
        st.tuples(st.floats(0.0, 0.6), st.floats(0.0, 0.6), st.floats(0.0, 0.6)),
        min_size=1,
        max_size=25,
    ),
)
def test_approx_budget_never_overspent(
    epsilon: float, log_delta: float, spends: list[tuple[float, float, float]]
) -> None:
    delta = 10.0**log_delta
    kind = budget_kind(dp.ApproxDP(epsilon, delta), None, "test")
    ledger = Ledger(None)
    ledger.open_scope("root", kind.key, kind.amount, "fp")
    for share, delta_share, pure_share in spends:
        amount = (
            Fraction(share) * kind.amount[0],
            Fraction(delta_share) * kind.amount[1],
            Fraction(pure_share) * kind.amount[2],
        )
        with contextlib.suppress(BudgetExceeded):
            ledger.spend("root", amount, "", rule=kind.rule)
    rho, delta_sel, pure = ledger.spent("root")
    assert rho <= kind.amount[0] and delta_sel <= kind.amount[1] and pure <= epsilon
    # The final state satisfies the rule of PureApproxZCDPFilter's theorem: pure
    # epsilons plus the conversion at the filter's one fixed order (which is never
    # below the best order's), so (eps, delta) holds.
    conversion_delta = delta - float(kind.amount[1])
    if rho > 0:
        order = kind.rule.order  # type: ignore[attr-defined]
        at_order = zcdp_epsilon_at_order(float(rho), conversion_delta, order)
        assert Fraction(at_order) + pure <= Fraction(epsilon)
        assert zcdp_epsilon(float(rho), conversion_delta) <= at_order
    assert float(delta_sel) + conversion_delta <= delta * (1 + 1e-12)


def test_approx_ledger_written_before_the_pure_component_still_opens(tmp_path: Path) -> None:
    # An ApproxDP scope written by dpkit before pure epsilons had their own component
    # kept (rho, delta_sel): it opens, widens to (rho, delta_sel, eps), keeps its spends,
    # and its history still checks (rows keep their two components under the chain).
    from dpkit.accounting.filters import ApproxZCDP, ApproxZCDPFilter

    path = tmp_path / "old.db"
    kind = budget_kind(dp.ApproxDP(1.0, 1e-6), None, "test")
    old_rule = ApproxZCDPFilter(ApproxZCDP(rho=float(kind.amount[0]), delta=float(kind.amount[1])))
    old = Ledger(path)
    old.open_scope("root", kind.key, kind.amount[:2], "fp")
    spent = (kind.amount[0] / 4, Fraction(0))
    old.spend("root", spent, "old", rule=old_rule)
    old.close()
    new = Ledger(path)
    new.open_scope("root", kind.key, kind.amount, "fp")
    assert new.spent("root") == (*spent, Fraction(0))
    new.spend("root", (Fraction(0), Fraction(0), Fraction(1, 10)), "new", rule=kind.rule)
    new.close()
    again = Ledger(path)  # the history check sums two- and three-component rows
    again.open_scope("root", kind.key, kind.amount, "fp")
    assert again.spent("root") == (spent[0], Fraction(0), Fraction(1, 10))
    assert [r.description for r in again.history("root")] == ["old", "new"]
