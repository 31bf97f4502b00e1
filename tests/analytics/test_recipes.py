"""The recipes of docs/architecture.md, followed: every Session statistic has each step,
and a second engine implementing the Engine interface gives DuckDB's aggregates."""

from __future__ import annotations

import math
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._order import OrderSpec
from dpkit.analytics._plan import Plan
from dpkit.analytics.engines import EngineResult
from dpkit.analytics.query import AggregationKind
from dpkit.errors import EngineError

TESTS = Path(__file__).parent


def one_of_each(kind: str) -> Query:
    base = Query().group_by("region", keys=KeySet.from_values(region=["north", "south"]))
    base = base.bound(max_groups=1, max_rows=3)
    build = {
        "count": lambda q: q.count(),
        "count_distinct": lambda q: q.count_distinct("age"),
        "sum": lambda q: q.sum("income", bounds=(0.0, 100.0)),
        "mean": lambda q: q.mean("income", bounds=(0.0, 100.0)),
        "variance": lambda q: q.variance("income", bounds=(0.0, 100.0)),
        "quantile": lambda q: q.quantile("income", [0.5], bounds=(0.0, 100.0)),
        "max": lambda q: q.max("income", bounds=(0.0, 100.0)),
        "min": lambda q: q.min("income", bounds=(0.0, 100.0)),
    }
    return build[kind](base)  # a KeyError here: a new kind without a builder line


@pytest.mark.parametrize("kind", typing.get_args(AggregationKind))
def test_every_statistic_follows_the_recipe(kind: str, frame: pd.DataFrame) -> None:
    # 1. a builder; 2. integer statistics or an order spec; 3. an estimate column; 4. an
    # audit and bounding tests that name it.
    query = one_of_each(kind)
    (aggregation,) = query.aggregations
    assert aggregation.kind == kind
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    compiled = session._compile(query, 0.5, salt=1)
    named = [s for s in compiled.specs if s.aggregation == aggregation.name]
    ordered = [o for o in compiled.orders if o.aggregation == aggregation.name]
    assert named or ordered, f"{kind}: compiles to no statistic"
    for spec in named:  # each integer statistic is released by a mechanism object
        assert isinstance(spec.noise.mechanism, dp.DiscreteLaplace)
    result = session.evaluate(query, budget=0.5)
    assert any(c.startswith(aggregation.name) for c in result.columns)
    audits = " ".join(
        path.read_text()
        for pattern in ("test_audit_*.py", "test_*bounding.py", "../statistical/audit/*.py")
        for path in TESTS.glob(pattern)
    )
    assert f".{kind}(" in audits, f"{kind}: no audit or bounding test builds it"


class PandasEngine:
    """A second engine, written from the Engine interface alone, for row-level plans
    (no privacy unit, no expressions) of counts, counts of values and fixed-point sums."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def schema(self, derived: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
        types = {"int64": "BIGINT", "float64": "DOUBLE", "object": "VARCHAR", "str": "VARCHAR"}
        return {c: types[str(t)] for c, t in self.frame.dtypes.items()}

    def prepare(self, plan: Plan, orders: Sequence[OrderSpec] = ()) -> None:
        if plan.unit is not None or plan.derived or plan.filters or orders or plan.bins:
            raise EngineError("PandasEngine: only row-level plans without expressions.")
        if any(s.op not in ("rows", "values", "fixed_sum") for s in plan.statistics):
            raise EngineError("PandasEngine: counts and sums only.")

    def aggregate(self, plan: Plan) -> EngineResult:
        frame = self.frame
        if plan.keys is not None:
            (column,) = plan.group_columns
            frame = frame[frame[column].isin([k[0] for k in plan.keys.keys])]
        groups = frame.groupby(list(plan.group_columns)) if plan.group_columns else [((), frame)]
        out: EngineResult = {}
        for key, rows in groups:
            key = key if isinstance(key, tuple) else (key,)
            out[key] = [self._statistic(stat, rows) for stat in plan.statistics]
        return out

    @staticmethod
    def _statistic(stat: Any, rows: pd.DataFrame) -> int:
        if stat.op == "rows":
            return len(rows)
        column = rows[stat.expression.strip('"')].astype(float)
        present = column[~column.isna()]
        if stat.op == "values":
            return len(present)
        clamped = present.clip(stat.low, stat.high)
        # round half away from zero, as DuckDB's ROUND, then exact integer sums.
        scaled = [math.copysign(math.floor(abs(v) * stat.inv + 0.5), v) for v in clamped]
        return sum(int(v) - stat.center for v in scaled)

    def histograms(self, plan: Plan, spec: OrderSpec) -> dict[tuple[Any, ...], dict[int, int]]:
        raise EngineError("PandasEngine: no order statistics.")


@pytest.mark.parametrize("grouped", [False, True])
def test_a_second_engine_gives_duckdbs_aggregates(grouped: bool, frame: pd.DataFrame) -> None:
    query = Query()
    if grouped:
        query = query.group_by("region", keys=KeySet.from_values(region=["north", "east", "x"]))
    query = query.count().sum("income", bounds=(0.0, 100.0)).mean("age", bounds=(18.0, 90.0))
    second = dp.Session(
        PandasEngine(frame), source="pandas", privacy_unit=None, budget=dp.PureDP(1.0),
        ledger=None, rng=1,
    )  # fmt: skip
    reference = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    plan = second._compile(query, 0.5, salt=1).plan
    assert plan == reference._compile(query, 0.5, salt=1).plan  # one engine-neutral plan
    second._engine.prepare(plan)
    assert second._engine.aggregate(plan) == reference._engine.aggregate(plan)
    result = second.evaluate(query, budget=0.5)
    assert second.spent == dp.PureDP(0.5) and len(result.columns["count"]) == (3 if grouped else 1)


def test_a_plan_the_second_engine_cannot_run_is_refused_before_the_charge(
    frame: pd.DataFrame,
) -> None:
    session = dp.Session(
        PandasEngine(frame), source="pandas", privacy_unit=None, budget=dp.PureDP(1.0),
        ledger=None, rng=1,
    )  # fmt: skip
    with pytest.raises(EngineError):
        session.evaluate(Query().filter("age > 30").count(), budget=0.5)
    assert session.spent == dp.PureDP(0.0)
