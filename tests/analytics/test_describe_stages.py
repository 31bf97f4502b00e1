"""The staged decisions of describe (issue 28): each one from releases or public
numbers, each checked against what it claims."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

import dpkit as dp
from dpkit.analytics._describe_stages import (
    LEVEL_LADDER,
    OrderAccuracy,
    categories_possible,
    choose_order_statistics,
    max_rows_from_counts,
    missing_share,
)
from dpkit.analytics.describe import describe
from dpkit.report.model import Statistic


def _explainer(radius_at_full: int, below: int):  # type: ignore[no-untyped-def]
    """Accuracy that shrinks like 1 / (budget per level), as the exponential mechanism's."""

    def explain(levels: tuple[float, ...], with_max: bool, scale: float) -> OrderAccuracy:
        parts = len(levels) + (1 if with_max else 0) if levels else 1
        radius = int(radius_at_full * parts / 6 / scale) if levels else 0
        return OrderAccuracy(radius, below if with_max else 0)

    return explain


def test_all_percentiles_when_accurate_enough() -> None:
    choice = choose_order_statistics(_explainer(60, 10), 1000.0, pure=True)
    assert choice.levels == LEVEL_LADDER[0] and choice.with_max


def test_fewer_levels_then_nothing_as_the_count_shrinks() -> None:
    explain = _explainer(600, 10)
    # All five with the max: radius 600 > 250; the quartiles with the max: 400 > 250;
    # the median with the max: 200 <= 250.
    assert choose_order_statistics(explain, 1000.0, pure=True).levels == (0.5,)
    nothing = choose_order_statistics(explain, 100.0, pure=False)
    assert nothing.levels == () and nothing.with_max  # the max (10 below) still passes
    assert (
        "withheld" in nothing.percentile_reason
        and "x this column's budget" in nothing.percentile_reason
    )
    none = choose_order_statistics(_explainer(600, 500), 100.0, pure=True)
    assert none.levels == () and not none.with_max and "the max" in none.max_reason


def test_missing_share_intervals_cover_at_their_level() -> None:
    # 2,000 draws of two Gaussian counts (sd 20): the interval (a union of two 97.5%
    # intervals) must cover the true share at least 95% of the time; the threshold's
    # false-failure rate is 1e-6.
    rng = np.random.default_rng(5)
    rows, values, sd = 800, 600, 20.0
    misses = 0
    for _ in range(2000):
        r, v = rows + rng.normal(0, sd), values + rng.normal(0, sd)
        share = missing_share(
            Statistic("rows", r, std_error=sd),
            Statistic("count", v, std_error=sd),
            0.95,
            laplace=False,
        )
        assert share is not None and share.ci_low is not None and share.ci_high is not None
        misses += not share.ci_low <= 1 - values / rows <= share.ci_high
    assert misses <= binom.isf(1e-6, 2000, 0.05)


def test_a_complete_column_reads_about_zero_missing() -> None:
    share = missing_share(
        Statistic("rows", 1003.0, std_error=10.0),
        Statistic("count", 1010.0, std_error=10.0),
        0.95,
        laplace=True,
    )
    assert share is not None and share.estimate == 0.0 and share.ci_low == 0.0
    assert share.ci_high is not None and 0.0 < share.ci_high < 0.1


def test_an_identifier_leaves_no_room_for_a_category() -> None:
    assert categories_possible(1000.0, 990.0, 120) < 1.0
    assert categories_possible(1000.0, 5.0, 120) > 8.0


def test_max_rows_from_counts_of_rows_kept() -> None:
    assert max_rows_from_counts([500.0, 502.0]) == 1  # one row per person
    # 500 persons with 6 rows each: kept(1) 500, kept(2) 1000, kept(4) 2000, kept(8) 3000.
    assert max_rows_from_counts([500.0, 1000.0, 2000.0, 3000.0, 3000.0]) == 8


def test_one_row_per_person_gets_max_rows_one_privately() -> None:
    frame = pd.DataFrame({"id": np.arange(3000), "x": np.random.default_rng(1).normal(size=3000)})
    session = dp.Session.from_pandas(frame, privacy_unit="id", budget=dp.ZCDP(0.5), rng=2)
    summary = describe(session)
    assert summary.max_rows == 1
    assert any("chosen privately" in note for note in summary.notes)
    assert session.remaining.rho == pytest.approx(0.0, abs=1e-9)  # everything spent


@pytest.mark.parametrize(("rows_each", "chosen", "asked"), [(1, 1, 2), (3, 4, 4), (5, 8, 6)])
def test_the_max_rows_ladder_asks_two_bounds_a_round(
    rows_each: int, chosen: int, asked: int
) -> None:
    # Rounds of two bounds (one shared statement each) reach the decision the bounds
    # asked one at a time reach -- the first bound whose next count adds few rows --
    # asking at most one count more: 1, 3 and 5 rows per person decide after 2, 4 and
    # 5 counts one at a time; in rounds, after 2, 4 and 6.
    persons = 30_000  # noise far below the rule's 10% of persons
    frame = pd.DataFrame(
        {
            "id": np.repeat(np.arange(persons), rows_each),
            "x": np.random.default_rng(1).normal(size=persons * rows_each),
        }
    )
    session = dp.Session.from_pandas(frame, privacy_unit="id", budget=dp.ZCDP(0.5), rng=2)
    statements = []
    execute = session._engine._execute

    def counted(sql: str, params: Any = (), **kwargs: Any) -> Any:
        statements.append(sql)
        return execute(sql, params, **kwargs)

    session._engine._execute = counted  # type: ignore[method-assign]
    summary = describe(session, columns=["x"])
    labels = [b.label for b in summary.budget_split]
    ladder = labels[: labels.index("rows, persons")]
    assert ladder == [f"rows at \u2264 {2**k} per person" for k in range(asked)]
    assert summary.max_rows == chosen
    # Each round's two counts come from one statement.
    for k in range(0, asked, 2):
        both = (f"least(__c0, {2**k})", f"least(__c1, {2 ** (k + 1)})")
        assert any(all(part in sql for part in both) for sql in statements), k
    assert session.remaining.rho == pytest.approx(0.0, abs=1e-9)  # the rest went on


def test_an_identifier_column_is_skipped_and_its_share_goes_elsewhere() -> None:
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {
            "code": [f"id-{i}" for i in range(600)],
            "group": rng.choice(["a", "b"], 600),
            "x": rng.normal(size=600),
        }
    )
    session = dp.Session.from_pandas(frame, budget=dp.ApproxDP(1.0, 1e-6), rng=3)
    before = session.remaining
    summary = describe(session)
    code = next(c for c in summary.columns if c.name == "code")
    assert "likely identifier" in code.alerts and not code.top_categories
    spent_on_code = sum(
        b.fraction or 0.0 for b in summary.budget_split if b.label.startswith("code")
    )
    assert spent_on_code <= 0.05  # the pre-check only
    assert summary.budget.rho == pytest.approx(before.rho, rel=1e-9)  # type: ignore[attr-defined]
    assert session.remaining.rho == pytest.approx(0.0, abs=1e-9)  # type: ignore[attr-defined]


def test_withheld_percentiles_carry_no_number_and_their_reason() -> None:
    frame = pd.DataFrame({"x": np.random.default_rng(6).lognormal(size=400)})
    session = dp.Session.from_pandas(frame, budget=dp.ApproxDP(0.5, 1e-6), rng=1)
    (column,) = describe(session).columns
    stats = {s.name: s for s in column.statistics}
    assert stats["p50"].estimate is None and stats["p50"].withheld.startswith("withheld")
    assert "percentiles withheld at this n" in column.alerts
    assert column.missing is not None and column.missing.ci_low == 0.0


def test_a_missing_share_too_noisy_to_say_anything_is_withheld() -> None:
    # Counts with a standard error of 150 around 400 rows: the share's interval would
    # span most of [0, 1], and "46% missing" of a complete column would mislead.
    share = missing_share(
        Statistic("rows", 442.0, std_error=150.0),
        Statistic("count", 231.0, std_error=150.0),
        0.95,
        laplace=False,
    )
    assert share is not None and share.estimate is None
    assert share.withheld.startswith("withheld: the counts are too noisy")


def test_text_columns_get_a_missing_share_from_their_pre_check() -> None:
    rng = np.random.default_rng(8)
    city = rng.choice(["a", "b", "c"], 20_000).astype(object)
    city[:4_000] = None  # 20% missing
    session = dp.Session.from_pandas(
        pd.DataFrame({"city": city}), budget=dp.ApproxDP(2.0, 1e-6), rng=4
    )
    (column,) = describe(session).columns
    assert column.missing is not None and column.missing.ci_low is not None
    assert column.missing.ci_low <= 0.2 <= column.missing.ci_high  # type: ignore[operator]
    assert {c.category for c in column.top_categories} == {"a", "b", "c"}
