"""describe(): the private summary behind ``dpkit describe``, on real DuckDB files."""

from __future__ import annotations

import json
import math
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from scipy.stats import binom

import dpkit as dp
from dpkit.analytics._describe_scales import _Scale
from dpkit.analytics.describe import (
    RESERVED_NAME_REASON,
    column_kind,
    consistent_order_statistics,
    count_name,
    derive,
    describe,
    fresh_name,
    plan_describe,
)
from dpkit.report import (
    ColumnSummary,
    DatasetSummary,
    Statistic,
    from_json,
    render_terminal,
    to_json,
)
from dpkit.report._format import bin_labels


def _table(n_users: int = 2000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 8, n_users)
    user = np.repeat(np.arange(n_users), rows)
    n = user.size
    return pd.DataFrame(
        {
            "user": user,
            "city": rng.choice(["paris", "lyon", "nice"], n, p=[0.6, 0.3, 0.1]),
            "minutes": rng.lognormal(2.0, 0.6, n),
            "visits": rng.integers(1, 20, n),
            "day": pd.Timestamp("2025-01-01") + pd.to_timedelta(rng.integers(0, 365, n), "D"),
        }
    )


@pytest.fixture(params=["parquet", "csv"])
def data_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    frame = _table()
    if request.param == "parquet":
        path = tmp_path / "visits.parquet"
        frame.to_parquet(path)
    else:
        path = tmp_path / "visits.csv"
        frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("sql_type", "kind"),
    [
        ("BIGINT", "numeric"),
        ("DOUBLE", "numeric"),
        ("DECIMAL(10,2)", "numeric"),
        ("VARCHAR", "categorical"),
        ("BOOLEAN", "categorical"),  # summarised as a share of true (public keys)
        ("DATE", "date"),
        ("TIMESTAMP", "date"),
        ("TIMESTAMP WITH TIME ZONE", "date"),
        ("BLOB", None),
        ("INTEGER[]", None),
    ],
    ids=str,
)
def test_column_kind(sql_type: str, kind: str | None) -> None:
    assert column_kind(sql_type) == kind


def test_summary_of_every_column_spends_the_whole_budget(data_path: Path) -> None:
    session = dp.Session.from_path(
        data_path, privacy_unit="user", budget=dp.ApproxDP(2.0, 1e-6), rng=7
    )
    before = session.remaining
    summary = describe(session)
    assert isinstance(summary, DatasetSummary)
    # What the summary spent: the whole remaining budget, up to rounding.
    assert summary.budget.rho == pytest.approx(before.rho, rel=1e-9)
    assert [c.name for c in summary.columns] == ["city", "minutes", "visits", "day"]
    assert [c.kind for c in summary.columns] == ["categorical", "numeric", "numeric", "date"]
    # Everything was spent, and not more (the Session's filter would have refused).
    assert 0.0 <= session.remaining.rho <= 1e-9 * before.rho
    assert summary.secure is False  # seeded: reproducible, marked insecure
    # JSON round trip of the real summary.
    assert from_json(to_json(summary)) == summary


def test_numbers_are_close_to_the_truth_at_a_large_budget(tmp_path: Path) -> None:
    frame = _table(n_users=4000)
    path = tmp_path / "visits.parquet"
    frame.to_parquet(path)
    session = dp.Session.from_path(path, privacy_unit="user", budget=dp.ZCDP(50.0), rng=3)
    summary = describe(session, max_rows=10)
    minutes = next(c for c in summary.columns if c.name == "minutes")
    stats = {s.name: s for s in minutes.statistics}
    truth = frame["minutes"]
    # Every person has at most 7 rows <= max_rows: nothing is dropped by bounding.
    assert stats["count"].ci_low <= len(truth) <= stats["count"].ci_high
    assert stats["p50"].estimate == pytest.approx(truth.median(), rel=0.05)
    assert stats["p25"].estimate <= stats["p50"].estimate <= stats["p75"].estimate
    assert stats["max"].estimate <= truth.max() + 1e-9  # never above the true max
    # The mean is clamped to the released range, so it may be biased low by clamping.
    assert stats["mean"].estimate == pytest.approx(truth.mean(), rel=0.1)
    assert minutes.histogram is not None and len(minutes.histogram.counts) == 20 + 2
    rows = summary.rows_estimate
    assert rows is not None and rows.ci_low is not None and rows.ci_high is not None
    assert rows.ci_low - 50 <= len(frame) <= rows.ci_high + 50


def test_pure_dp_skips_categorical_columns_with_a_note(data_path: Path) -> None:
    session = dp.Session.from_path(data_path, privacy_unit="user", budget=dp.PureDP(2.0), rng=1)
    plan = plan_describe(session)
    assert ("city", "categorical") not in plan.columns
    assert any(name == "city" for name, _ in plan.skipped)
    summary = describe(session)
    assert any("city: skipped" in note for note in summary.notes)
    assert session.remaining.epsilon == pytest.approx(0.0, abs=1e-12)


def test_unknown_column_is_refused_and_spends_nothing(data_path: Path) -> None:
    session = dp.Session.from_path(data_path, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    with pytest.raises(dp.DataError, match="Available columns"):
        describe(session, columns=["minutes", "nope"])
    assert session.remaining == dp.PureDP(1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"top": 0}, "top"), ({"confidence": 1.5}, "confidence"), ({"max_rows": 0}, "max_rows")],
    ids=["top", "confidence", "max_rows"],
)
def test_bad_options_spend_nothing(data_path: Path, kwargs: dict[str, object], match: str) -> None:
    session = dp.Session.from_path(data_path, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    with pytest.raises(dp.InvalidParameter, match=match):
        describe(session, **kwargs)  # type: ignore[arg-type]
    assert session.remaining == dp.PureDP(1.0)


def test_a_second_summary_on_a_spent_ledger_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "visits.parquet"
    _table(n_users=500).to_parquet(path)
    ledger = tmp_path / "ledger.sqlite"
    budget = dp.ApproxDP(5.0, 1e-6)
    first = dp.Session.from_path(path, privacy_unit="user", budget=budget, ledger=ledger, rng=1)
    describe(first)
    spent_everything = first.remaining.rho
    reopened = dp.Session.from_path(path, privacy_unit="user", budget=budget, ledger=ledger, rng=2)
    assert math.isclose(reopened.remaining.rho, spent_everything, abs_tol=1e-15)
    assert spent_everything <= 1e-9
    with pytest.raises(dp.BudgetExceeded, match="left"):
        describe(reopened)


# --------------------------------------------------------------------------- issue 14


def _kinds_table(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    day = pd.Timestamp("2012-01-01") + pd.to_timedelta(rng.integers(0, 1400, n), "D")
    return pd.DataFrame(
        {
            "rating": rng.integers(1, 6, n),  # a 1-5 code
            "union": (rng.random(n) < 0.244).astype("int64"),  # 0/1
            "flag": rng.random(n) < 0.3,  # BOOLEAN
            "years": rng.integers(0, 400, n),  # an integer with many values
            "x": rng.lognormal(2.0, 1.0, n),
            "day": day.date,  # DATE, 2012-01-01 .. 2015-10-31
            "city": rng.choice(["a", "b", "c"], n),
        }
    )


def _by_name(column: ColumnSummary) -> dict[str, Statistic]:
    return {s.name: s for s in column.statistics}


def test_header_states_the_budget_asked_and_the_guarantee_including_selection_delta() -> None:
    session = dp.Session.from_pandas(_kinds_table(), budget=dp.ApproxDP(1.0, 1e-6), rng=2)
    conversion_delta = session.remaining_approx.delta  # type: ignore[union-attr]
    summary = describe(session)
    assert summary.requested == dp.ApproxDP(1.0, 1e-6)
    guarantee = summary.guarantee
    assert isinstance(guarantee, dp.ApproxDP)
    # The zCDP part at the conversion delta, plus the delta key selection (city) spent.
    rho = summary.budget.rho  # type: ignore[union-attr]
    assert guarantee.epsilon == dp.ZCDP(rho).to_approx(conversion_delta).epsilon
    assert conversion_delta < guarantee.delta <= 1e-6
    assert guarantee.epsilon <= 1.0
    assert any("key selection" in note for note in summary.notes)
    console = Console(width=200, record=True)
    render_terminal(summary, console)
    text = console.export_text()
    assert "Budget asked: (ε, δ) = (1, 1e-06)" in text
    assert f"Guarantee of this summary: (ε, δ) = ({guarantee.epsilon:.4g}" in text
    data = json.loads(to_json(summary))
    assert data["requested"] == {"type": "ApproxDP", "epsilon": 1.0, "delta": 1e-6}
    assert data["guarantee"]["delta"] == guarantee.delta


@pytest.mark.parametrize(
    ("percentiles", "maximum", "expected", "top"),
    [
        ([1.0, 3.0, 2.0, 4.0, 6.66], 5.0, [1.0, 3.0, 3.0, 4.0, 5.0], 5.0),
        ([-5.0, 0.0, 1.0, 2.0, 3.0], 9.0, [0.0, 0.0, 1.0, 2.0, 3.0], 8.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 0.5, [1.0, 1.0, 1.0, 1.0, 1.0], 1.0),
    ],
    ids=["p95-above-max", "outside-range", "max-below-range"],
)
def test_order_statistics_are_made_consistent(
    percentiles: list[float], maximum: float, expected: list[float], top: float
) -> None:
    levels, capped = consistent_order_statistics(
        percentiles, maximum, 0.0 if top != 1.0 else 1.0, 8.0
    )
    assert levels == expected
    assert capped == top


def test_integer_and_binary_columns_are_summarised_by_their_values() -> None:
    frame = _kinds_table()
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(0.5), rng=4)
    summary = describe(session)
    columns = {c.name: c for c in summary.columns}
    # A 1-5 code and a 0/1 column: counts per value, no percentiles, no max.
    for name in ("rating", "union"):
        column = columns[name]
        assert not {"p5", "p50", "p95", "max"} & set(_by_name(column))
        histogram = column.histogram
        assert histogram is not None and histogram.integer and histogram.open_ended
        assert all(float(e).is_integer() for e in histogram.edges)
    assert "share of 1 (mean)" in _by_name(columns["union"])
    assert columns["flag"].kind == "categorical"
    assert "share true" in _by_name(columns["flag"])
    # An integer column with many values: integer percentiles, none above the max.
    years = _by_name(columns["years"])
    levels = [years[f"p{p}"].estimate for p in (5, 25, 50, 75, 95)]
    assert all(v.is_integer() for v in [*levels, years["max"].estimate])
    assert levels == sorted(levels) and levels[-1] <= years["max"].estimate
    assert years["max"].limit == "lower"
    histogram = columns["years"].histogram
    assert histogram is not None and all(float(e).is_integer() for e in histogram.edges)


#: Seeds of the coverage checks below (one describe() each): 10 in the default run, 20
#: (the full check) with --runslow. Each check derives its threshold from its own trial
#: count, ``int(binom.isf(1e-6, trials, p)) + 1``, so its false-failure rate is below
#: 1e-6 at either count: misses < 7 of 10 (P = 8.2e-8) or < 9 of 20 (P = 2.0e-7) at a
#: 5% miss rate, < 8 of 10 (P = 3.7e-7) or < 11 of 20 (P = 7.1e-7) at 10%, and < 17 of
#: 80 (P = 3.7e-7) or < 25 of 160 (P = 4.5e-7) for the value counts' 8 intervals a seed.
#: The default catches an interval that misses the truth systematically (a wrong truth,
#: a shifted or collapsed interval); the 20 seeds also catch milder miscalibration
#: (a miss rate of 50%: caught with probability 0.75 at 20 seeds, 0.17 at 10).
SEEDS = [pytest.param(10, id="10-seeds"), pytest.param(20, id="20-seeds", marks=pytest.mark.slow)]


@pytest.mark.parametrize("seeds", SEEDS)
def test_value_counts_and_share_intervals_cover_the_truth(seeds: int) -> None:
    # seeds x (5 rating values + 2 union values + 1 share true) = 8 * seeds intervals at
    # 95% (noise only, independent: disjoint bins, fresh noise per seed; no privacy
    # unit, so nothing is dropped). Misses ~ Binomial(8 * seeds, 0.05); the threshold
    # has a false-failure rate below 1e-6 (SEEDS).
    frame = _kinds_table(n=2000, seed=5)
    truth = {
        "rating": frame["rating"].value_counts(),
        "union": frame["union"].value_counts(),
    }
    trials = 0
    misses = 0
    for seed in range(seeds):
        session = dp.Session.from_pandas(frame, budget=dp.ZCDP(0.2), rng=100 + seed)
        summary = describe(session, columns=["rating", "union", "flag"])
        for column in summary.columns:
            if column.name == "flag":
                share = _by_name(column)["share true"]
                assert share.ci_low is not None and share.ci_high is not None
                trials += 1
                misses += not share.ci_low <= frame["flag"].mean() <= share.ci_high
                continue
            histogram = column.histogram
            assert histogram is not None
            for i, low in enumerate(histogram.edges[1:-2], start=1):
                if low in truth[column.name].index:
                    trials += 1
                    inside = histogram.ci_low[i] <= truth[column.name][low] <= histogram.ci_high[i]
                    misses += not inside
    threshold = int(binom.isf(1e-6, trials, 0.05)) + 1
    assert trials == 8 * seeds
    assert misses < threshold, (misses, threshold)


def test_dates_use_a_calendar_grid_and_stay_in_the_data_range() -> None:
    frame = _kinds_table()
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(0.5), rng=6)
    summary = describe(session, columns=["day"])
    (column,) = summary.columns
    stats = _by_name(column)
    # Released range: the years holding the data, 2012-01-01 .. 2016-01-01.
    low, high = _epoch(date(2012, 1, 1)), _epoch(date(2016, 1, 1))
    for name in ("p5", "p25", "p50", "p75", "p95", "max", "mean"):
        value = stats[name].estimate
        assert low <= value <= high, name
        assert value % 86_400 == 0, name  # whole days: printed without a time of day
    histogram = column.histogram
    assert histogram is not None and histogram.open_ended
    # Calendar bins: every edge is the first day of a month.
    assert all(_day(e).day == 1 for e in histogram.edges)
    console = Console(width=200, record=True)
    render_terminal(summary, console)
    assert "UTC" not in console.export_text().split("day: histogram")[0].split("Created")[1]


def test_rows_kept_are_labelled_with_the_bound() -> None:
    frame = _table(n_users=300)
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.ZCDP(1.0), rng=2)
    summary = describe(session, columns=["minutes"], max_rows=3)
    assert summary.max_rows == 3
    assert summary.rows_estimate is not None
    assert summary.rows_estimate.name == "rows kept (≤ 3 per person)"
    console = Console(width=200, record=True)
    render_terminal(summary, console)
    assert "Rows kept (≤ 3 per person; private estimate)" in console.export_text()


def _epoch(day: date) -> float:
    return float((day - date(1970, 1, 1)).days * 86_400)


def _day(seconds: float) -> date:
    return date(1970, 1, 1) + timedelta(days=seconds / 86_400)


@pytest.mark.parametrize("seeds", SEEDS)
def test_clamping_statement_bounds_the_values_outside_the_range(seeds: int) -> None:
    # The statement next to the mean: "may move up to X% of the values", from the upper
    # 95% limit of a noisy count of values outside the range over the lower 95% limit
    # of the count, so it fails with probability <= 5% per run (one-sided 2.5% each).
    # Over the seeds: failures ~ Binomial(seeds, <= 0.05); the threshold has a
    # false-failure rate below 1e-6 (SEEDS). Lognormal values: ~4% of them fall outside a range of
    # power-of-two bins, so the statement is not vacuous.
    rng = np.random.default_rng(11)
    frame = pd.DataFrame({"x": rng.lognormal(2.0, 1.0, 4000)})
    failures = 0
    stated = []
    for seed in range(seeds):
        session = dp.Session.from_pandas(frame, budget=dp.ZCDP(0.05), rng=200 + seed)
        (column,) = describe(session).columns
        note = next(n for n in column.notes if n.startswith("Range found privately"))
        low, high = (float(v) for v in note.split("[")[1].split("]")[0].split(", "))
        truth = float(((frame["x"] < low) | (frame["x"] > high)).mean())
        caveat = _by_name(column)["mean"].caveat
        share = float(caveat.split("up to ")[1].split("%")[0]) / 100
        stated.append(share)
        failures += truth > share + 5e-4  # the share is printed to 0.1%
    assert failures < int(binom.isf(1e-6, seeds, 0.05)) + 1
    assert max(stated) < 0.5  # informative at this budget


@pytest.mark.parametrize("seeds", SEEDS)
def test_a_thin_binary_column_with_a_privacy_unit_keeps_its_ones(seeds: int) -> None:
    # Issue 14: a 0/1 column (24% ones), 8 rows per person, was clamped to [0, 2^-20]
    # and reported mean 0. The integer range now always holds 0 and 1, and the mean's
    # 95% interval covers the truth: over the seeds, misses ~ Binomial(seeds, 0.05), the
    # threshold's false-failure rate is below 1e-6 (SEEDS).
    rng = np.random.default_rng(3)
    persons = np.repeat(np.arange(545), 8)
    ones = (rng.random(persons.size) < 0.244).astype(int)
    frame = pd.DataFrame({"id": persons, "union": ones})
    misses = 0
    for seed in range(seeds):
        session = dp.Session.from_pandas(
            frame, privacy_unit="id", budget=dp.ApproxDP(1.0, 1e-6), rng=300 + seed
        )
        (column,) = describe(session, max_rows=8).columns
        assert column.histogram is not None
        assert {"0", "1"} <= set(bin_labels(column.histogram))
        # "share of 1" when the releases show 0/1 values only, else "mean clamped to
        # [0, 1]" (issue 28): either way the mean of the 0/1 values.
        stats = _by_name(column)
        mean = stats.get("share of 1 (mean)") or stats["mean clamped to [0, 1]"]
        assert mean.ci_low is not None and mean.ci_high is not None
        misses += not mean.ci_low <= ones.mean() <= mean.ci_high
    assert misses < int(binom.isf(1e-6, seeds, 0.05)) + 1


@pytest.mark.parametrize("seeds", SEEDS)
def test_rows_dropped_by_bounding_are_estimated_with_a_covering_interval(seeds: int) -> None:
    # The note's interval has level 1 - 2 * 0.05 = 90% (two 95% intervals hold), and
    # with at most 29 rows per person the wide count (<= 100 per person) drops nothing,
    # so it covers the true number of rows dropped by keeping 10 per person. max_rows is
    # given: left out, describe chooses it privately (issue 28; 32 or 64 here, dropping
    # nothing), and the truth below would be that of another bound. Over the seeds:
    # misses ~ Binomial(seeds, 0.1); the threshold's false-failure rate is below 1e-6
    # (SEEDS).
    rng = np.random.default_rng(3)
    persons = np.repeat(np.arange(1500), rng.integers(1, 30, 1500))
    frame = pd.DataFrame({"id": persons, "x": rng.random(persons.size)})
    dropped = len(frame) - int(pd.Series(persons).value_counts().clip(upper=10).sum())
    misses = 0
    for seed in range(seeds):
        session = dp.Session.from_pandas(
            frame, privacy_unit="id", budget=dp.ApproxDP(1.0, 1e-6), rng=400 + seed
        )
        summary = describe(session, columns=["x"], max_rows=10)
        note = next(n for n in summary.notes if n.startswith("Rows dropped"))
        assert note.startswith("Rows dropped by keeping ≤ 10 per person"), note
        low, high = (
            float(v.replace(",", "")) for v in note.split("90% CI ")[1].split(";")[0].split(" to ")
        )
        misses += not low <= dropped <= high
    assert misses < int(binom.isf(1e-6, seeds, 0.1)) + 1


def test_timestamps_state_their_time_zone_and_booleans_need_no_selection() -> None:
    rng = np.random.default_rng(9)
    n = 2000
    start = pd.Timestamp("2020-01-01")
    frame = pd.DataFrame(
        {
            "naive": start + pd.to_timedelta(rng.integers(0, 10**7, n), "s"),
            "zoned": (start + pd.to_timedelta(rng.integers(0, 10**7, n), "s")).tz_localize("UTC"),
            "flag": rng.random(n) < 0.5,
        }
    )
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(3.0), rng=1)
    plan = plan_describe(session)
    assert ("flag", "categorical") in plan.columns  # public keys: fine under pure DP
    columns = {c.name: c for c in describe(session).columns}
    assert any("without time zone" in n for n in columns["naive"].notes)
    assert any("shown in UTC" in n for n in columns["zoned"].notes)
    assert "share true" in _by_name(columns["flag"])


@pytest.mark.parametrize(
    "date_range",
    [(date(2000, 1, 1), date(1990, 1, 1)), ("2000-01-01", "2010-01-01")],
    ids=["reversed", "strings"],
)
def test_a_bad_date_range_is_refused_before_spending(date_range: object) -> None:
    session = dp.Session.from_pandas(_kinds_table(200), budget=dp.PureDP(1.0), rng=1)
    with pytest.raises(dp.InvalidParameter, match="date_range"):
        describe(session, date_range=date_range)  # type: ignore[arg-type]
    assert session.remaining == dp.PureDP(1.0)


def test_a_user_date_range_bounds_the_released_dates() -> None:
    frame = _kinds_table()
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(0.5), rng=6)
    summary = describe(session, columns=["day"], date_range=(date(2013, 1, 1), date(2014, 1, 1)))
    (column,) = summary.columns
    # The range query's years: 2012 (underflow bin), 2013, 2014 (overflow bin).
    for stat in column.statistics:
        if stat.unit == "epoch_seconds":
            assert _epoch(date(2012, 1, 1)) <= stat.estimate <= _epoch(date(2015, 1, 1))


def test_order_statistics_trust_the_more_accurate_of_max_and_p95() -> None:
    # A max far below the data (small column, small budget) must not collapse the
    # percentiles: the max is raised to the 95th percentile instead.
    levels, top = consistent_order_statistics(
        [20.0, 40.0, 50.0, 60.0, 90.0], 33.0, 16.0, 128.0, trust_max=False
    )
    assert levels == [20.0, 40.0, 50.0, 60.0, 90.0]
    assert top == 90.0


@pytest.mark.parametrize("seeds", SEEDS)
def test_medians_of_discrete_doubles_fall_on_the_support(seeds: int) -> None:
    # A 1-5 rating in half points stored as DOUBLE (not integers, so percentiles): the
    # grid holds the round numbers, so the released median's true rank interval
    # contains 1/2 unless the quantile's rank error (95% statement, far below n/4 here)
    # is exceeded. Over the seeds: failures ~ Binomial(seeds, <= 0.05); the threshold's
    # false-failure rate is below 1e-6 (SEEDS).
    rng = np.random.default_rng(12)
    values = rng.choice([1.0, 2.5, 3.0, 4.5, 5.0], 4000, p=[0.05, 0.1, 0.1, 0.35, 0.4])
    frame = pd.DataFrame({"rating": values})
    failures = 0
    for seed in range(seeds):
        session = dp.Session.from_pandas(frame, budget=dp.ZCDP(0.5), rng=500 + seed)
        (column,) = describe(session).columns
        median = _by_name(column)["p50"].estimate
        below, at_or_below = np.mean(values < median), np.mean(values <= median)
        failures += not below <= 0.5 <= at_or_below
    assert failures < int(binom.isf(1e-6, seeds, 0.05)) + 1


def _doubles_table(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "flag": (rng.random(n) < 0.3).astype("float64"),  # 0/1 stored as DOUBLE
            "rating": rng.integers(1, 6, n).astype("float64"),  # 1-5 stored as DOUBLE
            "halves": rng.choice([0.5, 1.5, 2.5], n),  # few values, none an integer
            "price": rng.integers(0, 4, n) / 4,  # few values, stored as DECIMAL(4, 2)
            "paid": (rng.random(n) < 0.6).astype("float64"),  # 0/1, stored as DECIMAL(6, 2)
        }
    )


def test_integer_valued_doubles_are_found_privately_and_summarised_by_value(
    tmp_path: Path,
) -> None:
    # Issue 14: a 0/1 or 1-5 column stored as DOUBLE or DECIMAL gets a share and counts
    # per value, decided by a noisy count of its non-integer values (a query of its
    # own, in the budget split); a column with few values that are not integers keeps
    # percentiles.
    import duckdb

    frame = _doubles_table()
    path = tmp_path / "doubles.parquet"
    con = duckdb.connect()
    con.register("raw", frame)
    con.sql(
        "COPY (SELECT flag, rating, halves, CAST(price AS DECIMAL(4, 2)) AS price, "
        f"CAST(paid AS DECIMAL(6, 2)) AS paid FROM raw) TO '{path}' (FORMAT PARQUET)"
    )
    session = dp.Session.from_path(path, budget=dp.ZCDP(0.5), rng=7)
    assert session.columns["price"].upper().startswith("DECIMAL")
    assert session.columns["paid"].upper().startswith("DECIMAL")
    summary = describe(session)
    columns = {c.name: c for c in summary.columns}
    for name in ("flag", "rating", "paid"):
        stats = _by_name(columns[name])
        assert not {"p5", "p50", "p95", "max"} & set(stats), name
        histogram = columns[name].histogram
        assert histogram is not None and histogram.integer
        assert "not integers" in stats
        assert any("summarised as integers" in n for n in columns[name].notes)
    for name in ("flag", "paid"):
        share = _by_name(columns[name])["share of 1 (mean)"]
        assert share.ci_low is not None and share.ci_high is not None
        assert share.ci_low <= frame[name].mean() <= share.ci_high
    for name in ("halves", "price"):
        stats = _by_name(columns[name])
        assert {"p5", "p50", "p95", "max"} <= set(stats), name
        assert "share of 1 (mean)" not in stats
        assert any("summarised by percentiles" in n for n in columns[name].notes)
        # The released not-integer count covers the truth (all values, at 95%: a
        # deterministic seed, checked for coverage in tests/realdata).
        assert stats["not integers"].ci_low is not None
    labels = [line.label for line in summary.budget_split]
    for name in ("flag", "rating", "halves", "price", "paid"):
        assert f"{name}: values not integers" in labels
    fractions = [line.fraction for line in summary.budget_split if line.fraction]
    assert math.isclose(sum(fractions), 1.0, rel_tol=1e-9)
    assert summary.budget.rho <= 0.5  # type: ignore[union-attr]


def test_counts_per_value_of_an_integer_valued_double_leave_other_values_out() -> None:
    # 0/1 with 300 of 4000 values at 0.5, at a budget where the integer check's noise
    # (sd ~ 200) cannot see them but the counts' (sd ~ 60) can: the column is summarised
    # as integers, the 0.5s are in no value's count (not in the bin of 0, 5 sd away),
    # and the released count of values that are not integers says how many there are.
    rng = np.random.default_rng(3)
    values = (rng.random(4000) < 0.4).astype("float64")
    values[:300] = 0.5
    frame = pd.DataFrame({"x": values})
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(5e-4), rng=11)
    (column,) = describe(session).columns
    assert any("summarised as integers" in n for n in column.notes)
    histogram = column.histogram
    assert histogram is not None and histogram.integer
    zero = histogram.edges.index(0.0)
    count, half_width = (
        histogram.counts[zero],
        (histogram.ci_high[zero] - histogram.ci_low[zero]) / 2,
    )
    exact, lumped = np.sum(values == 0.0), np.sum(values < 1.0)
    assert lumped - exact == 300
    assert abs(count - exact) <= 2 * half_width  # 4 sd: false failure < 1e-4 (one seed)
    assert count < lumped - half_width
    fractional = _by_name(column)["not integers"]
    assert fractional.ci_low is not None and fractional.ci_high is not None
    assert fractional.ci_low <= 300 <= fractional.ci_high


_DAY = 86_400.0
_DATES = (-2208988800.0, 4102444800.0)


@pytest.mark.parametrize(
    ("sql_type", "low", "high", "rounding"),
    [
        ("BIGINT", 0.0, 511.0, 0.0),  # integers on the integers
        ("BIGINT", 0.0, 2.0**20, (2.0**20 / 10_000) / 2 + 0.5),  # a coarser grid, snapped
        ("DOUBLE", 0.0, 64.0, 0.005),  # a 0.01 grid
        ("DOUBLE", 0.125, 0.25, 0.00001),  # a 0.00002 grid from 0.125
        ("DATE", 0.0, 365 * _DAY, 0.0),  # whole days on whole days
        ("TIMESTAMP", 0.0, 10_000 * 60.0, 30.0),  # a one-minute grid
    ],
    ids=["int", "wide-int", "double", "small-double", "date", "timestamp"],
)
def test_grid_rounding_is_half_a_step_unless_the_grid_is_the_support(
    sql_type: str, low: float, high: float, rounding: float
) -> None:
    assert math.isclose(_Scale.of(sql_type, _DATES).rounding(low, high), rounding, abs_tol=1e-12)


def test_percentiles_state_their_grid_rounding() -> None:
    # Doubles: percentiles and max are grid points, and say that their accuracy is for
    # the data rounded to the grid; integers on an integer grid do not.
    frame = _kinds_table()
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(0.5), rng=8)
    summary = describe(session, columns=["x", "years"])
    columns = {c.name: c for c in summary.columns}
    x = _by_name(columns["x"])
    for name in ("p5", "p50", "p95", "max"):
        assert x[name].rounding > 0, name
        assert "(grid)" in x[name].caveat
    years = _by_name(columns["years"])
    assert all(years[name].rounding == 0 for name in ("p5", "p50", "p95", "max"))
    assert "(grid)" not in years["p50"].caveat
    data = json.loads(to_json(summary))
    assert data["columns"][0]["statistics"][2]["rounding"] == x["p25"].rounding


# ------------------------------------------------------------------ per-column weights


def _weights_table(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": rng.normal(50.0, 10.0, n),
            "b": rng.normal(50.0, 10.0, n),
            "code": rng.integers(0, 1000, n),
            "flag": rng.random(n) < 0.3,  # BOOLEAN
            "blob": [b"x"] * n,  # BLOB: not summarised
        }
    )


def test_weights_split_the_budget_in_proportion_and_never_above_it() -> None:
    from fractions import Fraction

    session = dp.Session.from_pandas(_weights_table(500), budget=dp.ZCDP(0.1), rng=1)
    plan = plan_describe(session)
    assert plan.weights == (1.0, 1.0, 1.0, 1.0)
    assert plan.shares == (plan.share,) * 4 and plan.share == pytest.approx(0.2)
    plan = plan_describe(session, weights={"a": 4, "code": 0.5})
    assert plan.weights == (4.0, 1.0, 0.5, 1.0)
    # Weights over their sum (the row count's 1 included): 1 + 4 + 1 + 0.5 + 1 = 7.5.
    assert plan.share == pytest.approx(1 / 7.5)
    assert plan.share_of("a") == pytest.approx(4 / 7.5)
    assert plan.share_of("code") == pytest.approx(0.5 / 7.5)
    assert plan.share_of("a") == 8 * plan.share_of("code")  # exact ratios, rounded down
    exact = sum((Fraction(s) for s in (plan.share, *plan.shares)), Fraction(0))
    assert exact <= 1 and float(exact) == pytest.approx(1.0, abs=1e-15)
    for weights in ({"a": 3}, {"a": 1e-3, "b": 7, "code": 11}, {"flag": 1 / 3}):
        plan = plan_describe(session, weights=weights)
        exact = sum((Fraction(s) for s in (plan.share, *plan.shares)), Fraction(0))
        assert exact <= 1, weights


@pytest.mark.parametrize(
    ("weights", "error", "match"),
    [
        ({"nope": 2}, dp.DataError, "Available columns"),
        ({"blob": 2}, dp.InvalidParameter, "not summarised"),
        ({"a": 0}, dp.InvalidParameter, "positive finite"),
        ({"a": -1.0}, dp.InvalidParameter, "positive finite"),
        ({"a": math.nan}, dp.InvalidParameter, "positive finite"),
        ({"a": math.inf}, dp.InvalidParameter, "positive finite"),
        ({"a": True}, dp.InvalidParameter, "positive finite"),
        ({"a": "2"}, dp.InvalidParameter, "positive finite"),
        ({"a": 1e7}, dp.InvalidParameter, "factor"),
        ([("a", 2)], dp.InvalidParameter, "weights"),
    ],
    ids=["unknown", "skipped", "zero", "negative", "nan", "inf", "bool", "text", "ratio", "list"],
)
def test_bad_weights_are_refused_before_spending(
    weights: object, error: type[Exception], match: str
) -> None:
    session = dp.Session.from_pandas(_weights_table(200), budget=dp.ZCDP(0.1), rng=1)
    with pytest.raises(error, match=match):
        describe(session, weights=weights)  # type: ignore[arg-type]
    assert session.remaining == dp.ZCDP(0.1)
    assert list(session.history) == []


def test_a_weight_for_a_column_left_out_or_the_privacy_unit_is_refused() -> None:
    frame = _weights_table(200).assign(user=np.arange(200))
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.ZCDP(0.1), rng=1)
    with pytest.raises(dp.InvalidParameter, match="privacy unit"):
        describe(session, weights={"user": 2})
    with pytest.raises(dp.InvalidParameter, match="not among the columns summarised"):
        describe(session, columns=["a"], weights={"b": 2})
    assert session.remaining == dp.ZCDP(0.1)


def _half_widths(summary: DatasetSummary, column: str) -> tuple[float, float]:
    stats = _by_name(next(c for c in summary.columns if c.name == column))
    count, mean = stats["count"], stats["mean"]
    assert count.ci_low is not None and count.ci_high is not None
    assert mean.ci_low is not None and mean.ci_high is not None
    return (count.ci_high - count.ci_low) / 2, (mean.ci_high - mean.ci_low) / 2


@pytest.mark.parametrize(
    "seeds", [pytest.param(2, id="2-seeds"), pytest.param(5, id="5-seeds", marks=pytest.mark.slow)]
)
def test_a_weighted_column_gets_a_more_accurate_release(seeds: int) -> None:
    # Weight 4 on "a" (of a, b, code, flag): its share goes from 1/5 to 4/8, 2.5 times,
    # so under Gaussian noise (zCDP) its count's half-width shrinks by sqrt(2.5) exactly
    # and its mean's by about as much; the others' grows by sqrt(5/8)^-1 = 1.26. The
    # counts' half-widths depend on the budget only (57, 36 and 72 at every seed), and
    # the mean's ratio was 0.630 to 0.638 on each of seeds 0-7: 2 seeds in the default
    # run, the 5 of the full check with --runslow.
    frame = _weights_table()
    counts: dict[str, list[float]] = {"equal": [], "a=4": []}
    means: dict[str, list[float]] = {"equal": [], "a=4": []}
    others: dict[str, list[float]] = {"equal": [], "a=4": []}
    for seed in range(seeds):
        for label, weights in (("equal", None), ("a=4", {"a": 4.0})):
            session = dp.Session.from_pandas(frame, budget=dp.ZCDP(0.05), rng=seed)
            summary = describe(session, weights=weights)
            count, mean = _half_widths(summary, "a")
            counts[label].append(count)
            means[label].append(mean)
            others[label].append(_half_widths(summary, "b")[0])
            # The whole budget is spent, and the budget table shows the actual shares.
            assert summary.budget.rho == pytest.approx(0.05, rel=1e-9)  # type: ignore[attr-defined]
            assert session.remaining.rho <= 1e-9 * 0.05  # type: ignore[attr-defined]
            share_a = sum(b.fraction or 0.0 for b in summary.budget_split if b.label[:3] == "a: ")
            assert share_a == pytest.approx(0.5 if weights else 0.2, rel=1e-9)
            assert sum(b.fraction or 0.0 for b in summary.budget_split) == pytest.approx(1.0)
            assert from_json(to_json(summary)) == summary
            if weights:
                assert any("a 4 (50.0%)" in note for note in summary.notes)
    ratio = np.median(counts["a=4"]) / np.median(counts["equal"])
    assert ratio == pytest.approx(1 / math.sqrt(2.5), rel=0.03)  # integer half-widths
    assert np.median(means["a=4"]) < 0.75 * np.median(means["equal"])
    assert np.median(others["a=4"]) / np.median(others["equal"]) == pytest.approx(
        math.sqrt(8 / 5), rel=0.03
    )


def test_weights_under_pure_dp_scale_laplace_intervals_linearly() -> None:
    frame = _weights_table()
    widths = []
    for weights in (None, {"code": 4.0}):
        session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=3)
        summary = describe(session, columns=["a", "code"], weights=weights)
        widths.append(_half_widths(summary, "code")[0])
        assert session.remaining.epsilon == pytest.approx(0.0, abs=1e-12)  # type: ignore[attr-defined]
    # Shares 1/3 then 4/6: twice the epsilon, half the Laplace interval.
    assert widths[1] / widths[0] == pytest.approx(0.5, rel=0.01)


# ------------------------------------------------------------------ column names
# Issue 27, section 4: describe's derived columns and count names never collide with the
# table's columns, and a column no query can name is skipped by the plan (public schema).


@pytest.mark.parametrize(
    ("stem", "taken", "expected"),
    [
        ("d__epoch", ["d", "x"], "d__epoch"),
        ("d__epoch", ["d", "d__epoch"], "d__epoch_2"),
        ("d__epoch", ["d", "D__EPOCH", "d__epoch_2"], "d__epoch_3"),
        ("é__flag", ["É__FLAG"], "é__flag_2"),
    ],
    ids=["free", "taken", "case", "unicode-case"],
)
def test_fresh_name_avoids_the_schema_ignoring_case(
    stem: str, taken: list[str], expected: str
) -> None:
    assert fresh_name(stem, taken) == expected


def test_derive_avoids_the_schema_and_the_query_own_derived_columns() -> None:
    first, name = derive(dp.Query(), ["x", "x__outside"], "x__outside", "x > 1")
    assert name == "x__outside_2"
    second, again = derive(first, ["x", "x__outside"], "x__outside", "x > 2")
    assert again == "x__outside_3"
    assert [n for n, _ in second.derived] == [name, again]


@pytest.mark.parametrize(
    ("group", "expected"),
    [("city", "count"), ("count", "count_"), ("COUNT_SE", "count_"), ("count_high", "count_")],
)
def test_count_name_never_overwrites_the_group_keys(group: str, expected: str) -> None:
    name = count_name(group)
    assert name == expected
    assert group.casefold() not in {f"{name}{s}" for s in ("", "_se", "_low", "_high")}


def test_columns_no_query_can_name_are_skipped_by_the_plan() -> None:
    frame = pd.DataFrame({"a": np.arange(300.0), "__u": np.arange(300.0), "__x": ["p"] * 300})
    session = dp.Session.from_pandas(frame, budget=dp.ApproxDP(1.0, 1e-6), rng=1)
    plan = plan_describe(session)
    assert plan.columns == (("a", "numeric"),)
    assert dict(plan.skipped) == {"__u": RESERVED_NAME_REASON, "__x": RESERVED_NAME_REASON}
    assert plan_describe(session, columns=["__u"]).columns == ()
    with pytest.raises(dp.InvalidParameter, match=r"'__u'.*reserved"):
        plan_describe(session, weights={"__u": 2.0})
    assert list(session.history) == []
    summary = describe(session)
    assert [c.name for c in summary.columns] == ["a"]
    assert "__u: skipped (its name is empty or starts with '__'" in " ".join(summary.notes)


def test_a_date_column_beside_its_epoch_name_is_summarised_as_a_date() -> None:
    rng = np.random.default_rng(4)
    days = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 300, 20_000), "D")
    frame = pd.DataFrame({"day": days, "DAY__EPOCH": rng.normal(0.0, 1.0, 20_000)})
    session = dp.Session.from_pandas(frame, budget=dp.ApproxDP(4.0, 1e-6), rng=1)
    summary = describe(session)
    day = next(c for c in summary.columns if c.name == "day")
    median = _by_name(day)["p50"].estimate
    # Seconds since the epoch within 2024, not a standard normal value.
    assert 1.70e9 < median < 1.74e9
