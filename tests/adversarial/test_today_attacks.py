"""Attacks on what changed on 2026-11-29, written as the attacker would write them.

- Pure budgets at face value in ApproxDP Sessions (PureApproxZCDPFilter): interleaved
  pure and zCDP queries, partitions and their parts, ``budget="remaining"``, shares,
  threads, SQL ``OPTIONS (epsilon = ...)``, ``dp.describe``, old two-component ledgers.
  After every attack the ledger's final state must satisfy the filter's rule, and what
  the Session tells the user (repr, ``remaining_pure``, the history) must not understate.
- ``session.history.to_pandas()`` and ``dpkit ledger show|export``: no row value in the
  readable query text; the command never writes the ledger, never reports an edited
  ledger as intact.
- ``Session.from_polars``: failures on a row value before anything is spent and without
  the value; the frame is copied (a later mutation is not seen).
- ``dp.describe``: bad inputs spend nothing; columns named like dpkit's internals.
- The array tools: extreme values and bounds never raise after noise is drawn, never
  leak a value in a message, and stay in the stated range.

Each test fails if its attack works.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import threading
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import dpkit as dp
from dpkit.accounting.filters import PureApproxZCDPFilter
from dpkit.analytics import Query
from dpkit.cli.main import app

SECRET = "zq-SECRET-7731"


def people(n: int = 400, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "person": np.arange(n),
            "region": rng.choice(["a", "b", "c"], n),
            "age": rng.integers(0, 90, n),
        }
    )


BUDGET = dp.ApproxDP(2.0, 1e-6)


def approx_session(
    budget: dp.ApproxDP = BUDGET, ledger: Path | None = None, frame: Any = None
) -> dp.Session:
    return dp.Session.from_pandas(
        people() if frame is None else frame,
        privacy_unit="person",
        budget=budget,
        ledger=ledger,
        rng=0,
    )


def state(session: dp.Session) -> tuple[Fraction, ...]:
    return tuple(session._ledger.spent(session._scope))


def assert_admitted(session: dp.Session) -> None:
    """The Session's final ledger state satisfies its filter's rule (and the box)."""
    rule = session._kind.rule
    spent = state(session)
    zero = tuple(Fraction(0) for _ in spent)
    assert rule.admits(zero, spent), spent
    if isinstance(rule, PureApproxZCDPFilter):
        assert rule.epsilon_used(spent) <= rule.total.epsilon


def count() -> Query:
    return Query().bound(max_rows=1).count()


# ============================================================ 1. pure budgets at face value


def test_interleaved_pure_and_zcdp_queries_never_overspend() -> None:
    # Alternate the cheapest-looking routes until the filter refuses everything.
    session = approx_session()
    budgets: list[object] = [dp.PureDP(0.4), dp.ZCDP(0.01), dp.PureDP(0.05), 0.1, dp.PureDP(0.3)]
    refused = 0
    for i in range(40):
        with contextlib.suppress(dp.BudgetExceeded):
            session.evaluate(count(), budget=budgets[i % len(budgets)])
            continue
        refused += 1
        assert_admitted(session)
    assert refused > 0
    assert_admitted(session)
    # Whatever the route, the tiniest query of each kind is refused at the end, or fits.
    pure = session.remaining_pure
    assert pure is not None
    if pure.epsilon > 0:
        session.evaluate(count(), budget=pure)  # what is advertised fits ...
    assert_admitted(session)
    with pytest.raises(dp.BudgetExceeded):  # ... and nothing more
        session.evaluate(count(), budget=dp.PureDP(1e-3))


def test_remaining_pure_is_not_overstated_after_zcdp_spends() -> None:
    session = approx_session()
    session.evaluate(count(), budget=dp.ZCDP(0.02))
    pure = session.remaining_pure
    assert pure is not None and pure.epsilon > 0
    with pytest.raises(dp.BudgetExceeded):
        session.evaluate(count(), budget=dp.PureDP(pure.epsilon * (1 + 1e-6) + 1e-9))
    session.evaluate(count(), budget=pure)
    assert_admitted(session)


def test_budget_remaining_after_a_pure_spend_does_not_take_the_whole_zcdp_part() -> None:
    session = approx_session()
    session.evaluate(count(), budget=dp.PureDP(0.5))
    session.evaluate(count(), budget="remaining")
    assert_admitted(session)
    with pytest.raises(dp.BudgetExceeded):
        session.evaluate(count(), budget=dp.PureDP(1e-3))
    # With most of epsilon spent at face value no rho fits: "remaining" is refused.
    other = approx_session()
    other.evaluate(count(), budget=dp.PureDP(1.5))
    with pytest.raises(dp.BudgetExceeded):
        other.evaluate(count(), budget="remaining")
    assert_admitted(other)
    with pytest.raises(dp.BudgetExceeded):
        session.evaluate(count(), budget="remaining")
    assert_admitted(session)


def test_shares_after_a_pure_spend_are_refused_or_fit() -> None:
    session = approx_session()
    session.evaluate(count(), budget=dp.PureDP(1.9))
    for share in (1.0, 0.5, 0.25, 0.1):
        with contextlib.suppress(dp.BudgetExceeded):
            session.evaluate(count(), budget=share)
        assert_admitted(session)


def test_approx_query_budget_without_delta_is_a_pure_one_at_face_value() -> None:
    session = approx_session()
    for _ in range(4):
        session.evaluate(count(), budget=dp.ApproxDP(0.5, 0.0))
    assert_admitted(session)
    with pytest.raises(dp.BudgetExceeded):
        session.evaluate(count(), budget=dp.ApproxDP(0.01, 0.0))


def test_sql_options_epsilon_without_delta_is_charged_at_face_value() -> None:
    session = approx_session()
    sql = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, max_groups_contributed = 1)"
        " COUNT(*) AS n FROM data"
    )
    for _ in range(4):
        session.sql(sql)
    assert_admitted(session)
    assert [r.amount[2] for r in session.history] == [Fraction(0.5)] * 4
    with pytest.raises(dp.BudgetExceeded):
        session.sql(sql)
    assert len(session.history) == 4


def test_threads_racing_pure_and_zcdp_queries_never_overspend() -> None:
    # The route (face value or rho) is chosen on one state and charged on another: the
    # ledger's rule must still hold on the state it commits.
    session = approx_session()
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def attack(i: int) -> None:
        barrier.wait()
        for j in range(4):
            budget = dp.PureDP(0.35) if (i + j) % 2 else dp.ZCDP(0.03)
            try:
                session.evaluate(count(), budget=budget)
            except dp.BudgetExceeded:
                pass
            except BaseException as err:  # pragma: no cover - the attack's success
                errors.append(err)

    threads = [threading.Thread(target=attack, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert_admitted(session)
    total = [sum((r.amount[k] for r in session.history), Fraction(0)) for k in range(3)]
    assert tuple(total) == state(session)


def test_a_part_cannot_spend_pure_epsilon_its_parent_did_not_pay_for() -> None:
    session = approx_session()
    parts = session.partition("region", ["a", "b", "c"], budgets=0.5)  # shares: no eps
    for part in parts.values():
        assert part._kind.amount[2] == 0
        # A pure query in a part goes through rho (or is refused), never at face value.
        with contextlib.suppress(dp.BudgetExceeded):
            part.evaluate(count(), budget=dp.PureDP(0.3))
        assert all(r.amount[2] == 0 for r in part.history)
        assert_admitted(part)
    assert state(session)[2] == 0
    assert_admitted(session)


def test_pure_part_budgets_are_refused_before_anything_is_charged() -> None:
    # A part given PureDP(eps) would be a box with pure epsilon the parent pays at face
    # value; partitions of an ApproxDP Session take shares or zCDP/approx budgets only.
    session = approx_session()
    for budgets in (dp.PureDP(1.0), dp.ApproxDP(1.0, 0.0), [dp.PureDP(0.5), 0.5]):
        with pytest.raises(dp.InvalidParameter):
            session.partition("region", ["a", "b"], budgets=budgets)
    assert state(session) == (0, 0, 0) and not session.history


def test_part_budget_remaining_is_charged_on_the_parents_real_state() -> None:
    # Part budgets are planned on an empty state: "remaining" then means the whole rho
    # part, which the parent, having spent pure epsilon, must not pay.
    session = approx_session()
    session.evaluate(count(), budget=dp.PureDP(1.0))
    with pytest.raises(dp.BudgetExceeded):
        session.partition("region", ["a", "b"], budgets="remaining")
    with pytest.raises(dp.BudgetExceeded):
        session.partition("region", ["a", "b"], budgets=1.0)
    assert len(session.history) == 1
    assert_admitted(session)


def test_a_share_part_spends_only_its_box_and_nested_parts_nothing_more() -> None:
    session = approx_session()
    parts = session.partition("region", ["a", "b"], budgets=0.5)
    part = parts["a"]
    nested = part.partition("age", list(range(90)), budgets=1.0)
    nested[3].evaluate(count(), budget="remaining")
    with pytest.raises(dp.BudgetExceeded):
        nested[3].evaluate(count(), budget=dp.PureDP(1e-3))
    with pytest.raises(dp.BudgetExceeded):
        part.evaluate(count(), budget=dp.ZCDP(1e-9))
    with pytest.raises(dp.BudgetExceeded):
        part.evaluate(count(), budget=dp.PureDP(1e-3))
    for scope in (nested[3], part, session):
        assert_admitted(scope)
    assert all(x <= b for x, b in zip(state(part), part._kind.amount, strict=True))


def test_synthesize_reserve_cannot_spend_at_face_value() -> None:
    session = approx_session()
    with pytest.raises(dp.InvalidParameter):
        session.synthesize(columns=["region"], budget=dp.PureDP(1.0), domains={"region": ["a"]})
    assert state(session) == (0, 0, 0)


def test_an_old_two_component_ledger_does_not_reset_on_widening(tmp_path: Path) -> None:
    # Write a ledger as dpkit did before the pure component (scope (rho, delta), rows
    # of two components chained), then reopen it: what was spent stays spent.
    from dpkit.analytics._ledger import _GENESIS, _link

    path = tmp_path / "old.db"
    session = approx_session(ledger=path)
    session.evaluate(count(), budget=dp.ZCDP(0.05))
    session.evaluate(count(), budget=0.3)
    before = state(session)
    assert before[2] == 0
    session._ledger.close()
    with sqlite3.connect(path) as conn:
        for scope, budget, spent in conn.execute("SELECT scope, budget, spent FROM scopes"):
            b, s = json.loads(budget)[:2], json.loads(spent)[:2]
            conn.execute(
                "UPDATE scopes SET budget = ?, spent = ? WHERE scope = ?",
                (json.dumps(b), json.dumps(s), scope),
            )
        previous = _GENESIS
        rows = conn.execute(
            "SELECT id, scope, created, amount, description FROM spends ORDER BY id"
        ).fetchall()
        for row in rows:
            amount = json.dumps(json.loads(row[3])[:2])
            link = _link(previous, (row[0], row[1], row[2], amount, row[4]))
            conn.execute(
                "UPDATE spends SET amount = ?, chain = ? WHERE id = ?", (amount, link, row[0])
            )
            previous = link
    again = approx_session(ledger=path)
    assert state(again) == before
    # The remaining budget is what is left of the old one, not a fresh one.
    with pytest.raises(dp.BudgetExceeded):
        again.evaluate(count(), budget=1.0)
    again.evaluate(count(), budget=dp.PureDP(0.1))
    assert_admitted(again)
    again.evaluate(count(), budget=dp.PureDP(0.05))
    assert_admitted(again)
    # The history reads old and new rows alike; a column the old rows lack is kept.
    frame = again.history.to_pandas()
    assert len(frame) == 4 and frame["epsilon"].notna().all()
    assert "pure_epsilon" in frame.columns  # the new rows' component, though row 1 lacks it
    assert list(frame.columns[:5]) == ["id", "time", "scope", "query", "budget"]
    again._ledger.close()


def test_describe_in_an_approx_session_spends_within_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    frame = people()
    session = approx_session(ledger=path, frame=frame)
    session.evaluate(count(), budget=dp.PureDP(0.7))
    session._ledger.close()
    dp.describe(frame, budget=dp.ApproxDP(2.0, 1e-6), privacy_unit="person", ledger=path, rng=0)
    again = approx_session(ledger=path, frame=frame)
    assert_admitted(again)
    again._ledger.close()


# ============================================================ 2. history and `dpkit ledger`


def test_privately_selected_keys_never_reach_the_history(tmp_path: Path) -> None:
    frame = people(600)
    frame.loc[frame.index[:300], "region"] = SECRET  # a key only the rows know
    path = tmp_path / "h.db"
    session = approx_session(ledger=path, frame=frame)
    result = session.evaluate(
        Query().bound(max_rows=1, max_groups=1).group_by("region", keys="private").count(),
        budget=0.5,
    )
    assert SECRET in result.to_pandas().to_string()  # released (300 persons): fine
    texts = [session.history.to_pandas().to_string(), repr(session.history)]
    session._ledger.close()
    runner = CliRunner()
    for flags in ([], ["--json"], ["--csv"]):
        texts.append(runner.invoke(app, ["ledger", "show", str(path), *flags]).output)
    assert not any(SECRET in text for text in texts)


def test_ledger_show_never_creates_a_file(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = tmp_path / "missing.db"
    result = runner.invoke(app, ["ledger", "show", str(missing)])
    assert result.exit_code != 0 and not missing.exists()
    assert sorted(os.listdir(tmp_path)) == []
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "nowhere.db")
    runner.invoke(app, ["ledger", "show", str(link)])
    assert not (tmp_path / "nowhere.db").exists()


def _ledger_file(tmp_path: Path) -> Path:
    path = tmp_path / "budget.db"
    session = approx_session(ledger=path)
    session.evaluate(count(), budget=dp.PureDP(0.2))
    session.evaluate(count(), budget=dp.ZCDP(0.01))
    session.evaluate(count(), budget=dp.PureDP(0.3))
    session._ledger.close()
    return path


def test_ledger_export_never_overwrites_the_ledger(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path)
    before = path.read_bytes()
    runner = CliRunner()
    (tmp_path / "sym.json").symlink_to(path)
    os.link(path, tmp_path / "hard.json")
    for out in ("sym.json", "hard.json"):
        result = runner.invoke(app, ["ledger", "export", str(path), "-o", str(tmp_path / out)])
        assert result.exit_code != 0, out
        assert path.read_bytes() == before, out
    session = approx_session(ledger=path)  # still a valid, intact ledger
    assert len(session.history) == 3


def test_ledger_show_reports_a_truncated_history_as_edited(tmp_path: Path) -> None:
    # Delete the last spend (the most expensive) and lower the total to match: the
    # chain of the rows left is intact, but SQLite's sequence remembers the row.
    path = _ledger_file(tmp_path)
    with sqlite3.connect(path) as conn:
        last, amount = conn.execute("SELECT id, amount FROM spends ORDER BY id DESC").fetchone()
        conn.execute("DELETE FROM spends WHERE id = ?", (last,))
        (spent,) = conn.execute("SELECT spent FROM scopes WHERE scope = 'root'").fetchone()
        left = [
            str(Fraction(s) - Fraction(a))
            for s, a in zip(json.loads(spent), json.loads(amount), strict=True)
        ]
        conn.execute("UPDATE scopes SET spent = ? WHERE scope = 'root'", (json.dumps(left),))
    with pytest.raises(dp.DataError):  # the Session refuses it ...
        approx_session(ledger=path)
    result = CliRunner().invoke(app, ["ledger", "show", str(path), "--json"])
    assert json.loads(result.output)["intact"] is False  # ... and the command says so


def test_ledger_show_reports_an_edited_amount_as_edited(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE spends SET amount = ? WHERE id = 3", (json.dumps(["0/1"] * 3),))
        conn.execute("UPDATE scopes SET spent = ? WHERE scope = 'root'", (json.dumps(["0/1"] * 3),))
    result = CliRunner().invoke(app, ["ledger", "show", str(path), "--json"])
    assert json.loads(result.output)["intact"] is False


# ============================================================ 3. Session.from_polars


pl = pytest.importorskip("polars")


def _cause_chain(err: BaseException) -> str:
    text = []
    seen: BaseException | None = err
    while seen is not None:
        text.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return " | ".join(text)


@pytest.mark.parametrize(
    "plan",
    [
        lambda lf: lf.with_columns(pl.col("x").cast(pl.Int64, strict=True)),
        lambda lf: lf.with_columns(pl.col("x").str.to_integer()),
        lambda lf: lf.with_columns(pl.col("x").str.to_datetime("%Y-%m-%d")),
        lambda lf: lf.with_columns(pl.col("x").str.json_decode(pl.Int64)),
    ],
    ids=["strict-cast", "to-integer", "to-datetime", "json"],
)
def test_a_lazy_plan_failing_on_a_secret_row_leaks_nothing(plan: Any, tmp_path: Path) -> None:
    lazy = plan(pl.LazyFrame({"x": ["1", SECRET], "person": [1, 2]}))
    path = tmp_path / "p.db"
    with pytest.raises(dp.DataError) as info:
        dp.Session.from_polars(lazy, privacy_unit="person", budget=dp.PureDP(1.0), ledger=path)
    assert SECRET not in _cause_chain(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_nested_object_columns_are_refused_without_a_value() -> None:
    class Loud:
        def __repr__(self) -> str:
            return SECRET

    frames = [pl.DataFrame({"o": pl.Series([Loud()], dtype=pl.Object), "i": [1]})]
    with contextlib.suppress(Exception):
        frames.append(pl.DataFrame({"s": [{"a": Loud()}], "i": [1]}))
    with contextlib.suppress(Exception):
        frames.append(pl.DataFrame({"l": [[Loud()]], "i": [1]}))
    for frame in frames:
        with pytest.raises(dp.DataError) as info:
            dp.Session.from_polars(frame, budget=dp.PureDP(1.0))
        assert SECRET not in _cause_chain(info.value)


def test_a_frame_mutated_after_creation_is_not_seen() -> None:
    values = np.arange(100, dtype=np.int64)
    frame = pl.DataFrame({"x": values})  # may share the NumPy buffer
    session = dp.Session.from_polars(frame, budget=dp.PureDP(1.0))
    values[:] = 10**9
    frame.replace_column(0, pl.Series("x", [-(10**9)] * 100))
    engine = session._engine
    total = engine._connection.execute(f"SELECT SUM(x) FROM {engine._relation}").fetchone()[0]
    assert total == sum(range(100))


def test_categorical_keys_compare_as_duckdb_strings() -> None:
    # Polars' categorical and DuckDB's VARCHAR agree on equality: "a" and "a " are two
    # keys, and a partition by the categorical column gets each person once.
    frame = pl.DataFrame(
        {
            "c": pl.Series(["a", "a ", "A", "a"] * 25, dtype=pl.Categorical),
            "person": list(range(100)),
        }
    )
    session = dp.Session.from_polars(frame, privacy_unit="person", budget=dp.PureDP(1.0))
    assert session.columns["c"] == "VARCHAR"
    with pytest.raises(dp.InvalidParameter):
        session.partition("c", ["a", "a"], budgets=1.0)
    parts = session.partition("c", ["a", "a ", "A"], budgets=1.0)
    assert len(parts) == 3


# ============================================================ 4. dp.describe


@pytest.mark.parametrize(
    "options",
    [
        {"columns": ["nope"]},
        {"exclude": ["nope"]},
        {"top": 0},
        {"confidence": 1.5},
        {"max_rows": -1},
        {"weights": {"nope": 1.0}},
        {"privacy_unit": "nope"},
    ],
    ids=["columns", "exclude", "top", "confidence", "max_rows", "weights", "unit"],
)
def test_describe_refusals_spend_nothing(options: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    frame = people(200)
    kwargs: dict[str, Any] = {"privacy_unit": "person"} | options
    with pytest.raises((dp.InvalidParameter, dp.DataError)):
        dp.describe(frame, budget=dp.ApproxDP(1.0, 1e-6), ledger=path, rng=0, **kwargs)
    if path.exists():
        session = approx_session(dp.ApproxDP(1.0, 1e-6), ledger=path, frame=frame)
        assert state(session) == (0, 0, 0) and not session.history
        session._ledger.close()


@pytest.mark.parametrize(
    "name", ["__dpkit_data", "__dpkit_input", "__dpkit_value", "rowid", "__dpkit_t"]
)
def test_describe_a_column_named_like_an_internal(name: str) -> None:
    frame = people(200).rename(columns={"age": name})
    with contextlib.suppress(dp.DPError):
        summary = dp.describe(frame, budget=dp.ApproxDP(1.0, 1e-6), privacy_unit="person", rng=0)
        assert summary is not None


# ============================================================ 5. the array tools


def _values() -> dict[str, Any]:
    big = np.iinfo(np.int64)
    return {
        "nan": np.array([np.nan, 1.0, np.nan]),
        "inf": np.array([np.inf, -np.inf, 1.0]),
        "huge": np.array([1e308, -1e308, 1.7e308]),
        "int64": np.array([big.max, big.min, 0], dtype=np.int64),
        "uint64": np.array([np.iinfo(np.uint64).max, 0], dtype=np.uint64),
        "tiny": np.array([5e-324, -5e-324]),
        "empty": np.array([], dtype=np.float64),
        "many": np.full(5000, 1e308),
    }


_BOUNDS = [(-1e308, 1e308), (0.0, 1.7976931348623157e308), (-1.0, 1.0), (1e300, 1.0000001e300)]


@pytest.mark.parametrize("tool", ["count", "sum", "mean", "var", "std"])
def test_array_tools_never_raise_after_drawing_noise(
    tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bounds at the float limits, huge and tiny budgets: refused before any noise, or
    # released with a value and an interval that are numbers (never NaN, never an
    # exception once noise is drawn, whose raising could depend on the data).
    from dpkit.mechanisms.gaussian import DiscreteGaussian
    from dpkit.mechanisms.laplace import DiscreteLaplace

    drawn: list[int] = []
    for cls in (DiscreteLaplace, DiscreteGaussian):
        real = cls.release

        def spy(self: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            drawn.append(1)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(cls, "release", spy)
    function = getattr(dp, tool)
    budgets = [{"epsilon": 1.0}, {"rho": 0.5}]
    if tool != "count":  # (a count at epsilon 1e-12 only takes long to sample)
        budgets += [{"epsilon": 1e-12}, {"rho": 1e-24}]
    for name, data in _values().items():
        for bounds in _BOUNDS if tool != "count" else [None]:
            for relation in ("add_remove", "replace"):
                for budget in budgets:
                    drawn.clear()
                    case = (tool, name, bounds, relation, budget)
                    kwargs: dict[str, Any] = dict(budget)
                    if tool != "count":
                        kwargs |= {"bounds": bounds, "neighbouring": relation}
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            release = function(data, rng=0, **kwargs)
                    except (dp.InvalidParameter, dp.DataError):
                        assert not drawn, case
                        continue
                    value = release.value
                    assert not math.isnan(value), case
                    low, high = release.error.interval(value)
                    assert not (math.isnan(low) or math.isnan(high)) and low <= high, case
                    if tool == "mean":
                        assert bounds[0] <= value <= bounds[1], case
                    if tool in ("var", "std", "count"):
                        assert value >= 0, case


@pytest.mark.parametrize("data", [[True, False, True], np.array(["1", "2"]), [object(), 1.0]])
def test_array_tools_refuse_non_numbers_before_noise(data: Any) -> None:
    for tool in ("sum", "mean", "var"):
        with pytest.raises((dp.DataError, dp.InvalidParameter)) as info:
            getattr(dp, tool)(data, bounds=(0.0, 1.0), epsilon=1.0, rng=0)
        assert "object at 0x" not in str(info.value)


def test_array_tool_messages_do_not_quote_values() -> None:
    for data in ([SECRET], pd.Series([SECRET, "x"]), np.array([[1.0, 2.0]])):
        for tool in ("sum", "mean", "histogram"):
            kwargs: dict[str, Any] = {"epsilon": 1.0, "rng": 0}
            kwargs |= {"range": (0.0, 1.0)} if tool == "histogram" else {"bounds": (0.0, 1.0)}
            try:
                getattr(dp, tool)(data, **kwargs)
            except Exception as err:
                assert SECRET not in _cause_chain(err), tool


def test_describe_on_a_ledger_of_another_budget_spends_nothing(tmp_path: Path) -> None:
    # A ledger reused across calls with a larger budget: refused, not a fresh budget.
    path = tmp_path / "d.db"
    frame = people(200)
    session = approx_session(dp.ApproxDP(1.0, 1e-6), ledger=path, frame=frame)
    session.evaluate(count(), budget=dp.PureDP(0.5))
    session._ledger.close()
    for budget in (dp.ApproxDP(2.0, 1e-6), dp.ApproxDP(1.0, 2e-6), dp.PureDP(1.0)):
        with pytest.raises(dp.DataError):
            dp.describe(frame, budget=budget, privacy_unit="person", ledger=path, rng=0)
    with pytest.raises(dp.InvalidParameter):
        dp.describe(frame, budget=dp.ApproxDP(1.0, 1e-6), selection_delta=2e-6, ledger=path, rng=0)
    again = approx_session(dp.ApproxDP(1.0, 1e-6), ledger=path, frame=frame)
    assert len(again.history) == 1
    again._ledger.close()
