"""Step 2 of the bounding in BIGINT (SqlEngine._pair_narrow, _scaled_sum).

Where a sum's one-row summand is below 2^31, a pair of at most PAIR_ROWS = 2^31 rows is
scaled to ``max_rows`` rows' worth in BIGINT arithmetic, and a pair of more rows gets
the fixed value ``m * clamp(0, a, b)``. Such a pair cannot be built in a test (two
billion rows), so step 2's SQL runs here on (sum, count) pairs directly, on both
engines: the values of the exact definition below PAIR_ROWS (against Python's
arithmetic), the fixed value above it, and no failure on a sum no BIGINT holds (DuckDB's
exact pair sum of such a pair; Spark's BIGINT sum wraps there).
"""

from __future__ import annotations

import warnings
from typing import Any

import duckdb
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Query
from dpkit.analytics._plan import Plan
from dpkit.analytics.engines._sql import PAIR_ROWS, SqlEngine
from dpkit.analytics.engines.duckdb import DuckDBEngine

MAX_ROWS = 10


def _plan(bounds: tuple[float, float], epsilon: float = 1.0) -> tuple[Plan, int]:
    """A plan with one sum of ``bounds`` at ``epsilon`` (and its index in the
    statistics): the fixed-point grid puts the noise at ~2^30 steps, so one row's
    summand is below 2^31 steps unless epsilon is large."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_pandas(
            pd.DataFrame({"u": [1], "x": [1.0]}), privacy_unit="u", budget=dp.PureDP(1.0), rng=0
        )
    query = Query().bound(max_rows=MAX_ROWS).sum("x", bounds=bounds)
    plan = session._compile(query, dp.PureDP(epsilon), salt=1).plan
    index = next(i for i, s in enumerate(plan.statistics) if s.op == "fixed_sum")
    return plan, index


def _expected(total: int, count: int, plan: Plan, i: int) -> int:
    """Step 2 by its definition: trunc(S m / c) above m rows, the fixed value above
    PAIR_ROWS."""
    low, high = plan.statistics[i].unit_range()
    if count > PAIR_ROWS:
        return MAX_ROWS * min(max(0, low), high)
    if count <= MAX_ROWS:
        return total
    quotient = abs(total) * MAX_ROWS // count
    return quotient if total >= 0 else -quotient


def _pairs(plan: Plan, i: int) -> list[tuple[int, int]]:
    """(sum, count) pairs at the edges: below and above m rows and PAIR_ROWS, the
    largest sums a pair of that many rows can have, and sums of huge pairs."""
    bound = plan.statistics[i].row_bound()
    pairs = [(0, 1), (bound, 1), (-bound, 1), (7 * bound, MAX_ROWS), (-3, MAX_ROWS + 1)]
    pairs += [(bound * c, c) for c in (MAX_ROWS + 1, 12_345, PAIR_ROWS - 1, PAIR_ROWS)]
    pairs += [(-bound * PAIR_ROWS + 1, PAIR_ROWS)]
    pairs += [(5, PAIR_ROWS + 1), (-(2**62), 2**40), (2**63 - 1, 2**62)]
    return pairs


@pytest.mark.parametrize("bounds", [(0.0, 100.0), (-50.0, 20.0), (10.0, 20.0), (-7.0, -1.0)])
def test_step_two_in_bigint_on_duckdb(bounds: tuple[float, float]) -> None:
    plan, i = _plan(bounds)
    engine = DuckDBEngine(duckdb.connect(), "t")
    assert engine._pair_narrow(plan, i)
    pairs = _pairs(plan, i)
    # The pair sums as DuckDB's sum of BIGINT gives them: HUGEINT (exact), so a huge
    # pair can hold a sum beyond 2^63.
    huge = [(total * 4, count) if count > PAIR_ROWS else (total, count) for total, count in pairs]
    values = ", ".join(f"({t}::HUGEINT, {c}::BIGINT)" for t, c in huge)
    sql = f"SELECT {engine._scaled_sum(plan, i, 's', 'c')} FROM (VALUES {values}) AS v(s, c)"
    got = [row[0] for row in engine._connection.execute(sql).fetchall()]
    assert got == [_expected(t, c, plan, i) for t, c in huge]


@pytest.mark.parametrize("bounds", [(0.0, 100.0), (-50.0, 20.0), (10.0, 20.0)])
def test_step_two_in_bigint_on_spark(spark: Any, bounds: tuple[float, float]) -> None:
    from dpkit.analytics.engines.spark import SparkEngine

    plan, i = _plan(bounds)
    pairs = _pairs(plan, i)
    frame = spark.createDataFrame([(t, c) for t, c in pairs], "s BIGINT, c BIGINT")
    engine = SparkEngine(frame)
    assert isinstance(engine, SqlEngine) and engine._pair_narrow(plan, i)
    sql = f"SELECT {engine._scaled_sum(plan, i, 's', 'c')} FROM {engine.relation}"
    got = [row[0] for row in engine._execute(sql)]
    # A projection without a shuffle: collect returns the rows in the DataFrame's order.
    assert got == [_expected(t, c, plan, i) for t, c in pairs]


def test_fine_grids_keep_the_exact_wide_arithmetic() -> None:
    # A one-row summand of 2^31 steps or more (a fine grid: little noise): no fixed
    # value, the pair's exact sum is used whatever its rows (the wide type), as before.
    plan, i = _plan((0.0, 100.0), epsilon=1e6)
    assert plan.statistics[i].row_bound() >= 2**31
    engine = DuckDBEngine(duckdb.connect(), "t")
    assert not engine._pair_narrow(plan, i)
    assert "TRY_CAST" not in engine._scaled_sum(plan, i, "s", "c")
