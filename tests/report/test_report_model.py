"""dpkit.report.model: the summary dataclasses validate their fields and build from releases."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest

import dpkit as dp
from dpkit.accounting import PureDP
from dpkit.errors import InvalidParameter
from dpkit.report import (
    BudgetShare,
    CategoryCount,
    ColumnSummary,
    DatasetSummary,
    HistogramSummary,
    Statistic,
)

GOOD_STAT: dict[str, Any] = {
    "name": "mean",
    "estimate": 1.5,
    "std_error": 0.1,
    "ci_low": 1.3,
    "ci_high": 1.7,
    "confidence": 0.95,
    "budget": PureDP(0.5),
}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"name": ""}, "name"),
        ({"estimate": math.nan}, "estimate"),
        ({"estimate": math.inf}, "estimate"),
        ({"estimate": True}, "estimate"),
        ({"std_error": -1.0}, "std_error"),
        ({"ci_low": 2.0}, "ci_low must be <= ci_high"),
        ({"ci_high": None}, "both ci_low and ci_high"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": None}, "needs its confidence"),
        ({"budget": 0.5}, "Guarantee"),
        ({"rounding": -0.5}, "rounding"),
        ({"rounding": float("nan")}, "rounding"),
    ],
    ids=[
        "empty-name",
        "nan-estimate",
        "inf-estimate",
        "bool-estimate",
        "negative-std",
        "reversed-interval",
        "half-interval",
        "confidence-one",
        "interval-without-level",
        "float-budget",
        "negative-rounding",
        "nan-rounding",
    ],
)
def test_statistic_rejects_bad_fields(change: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidParameter, match=match):
        Statistic(**{**GOOD_STAT, **change})


def test_statistic_normalises_ints_to_floats() -> None:
    stat = Statistic(name="count", estimate=3, ci_low=1, ci_high=5, confidence=0.9)
    assert isinstance(stat.estimate, float) and stat.ci_low == 1.0
    assert stat.budget is None  # post-processing


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"edges": (0.0,), "counts": ()}, "at least 2"),
        ({"edges": (0.0, 0.0), "counts": (1.0,)}, "strictly increasing"),
        ({"edges": (0.0, 1.0, 2.0), "counts": (1.0,)}, "one count per bin"),
        (
            {"edges": (0.0, 1.0), "counts": (1.0,), "ci_low": (0.0,), "ci_high": ()},
            "one ci_low and one ci_high",
        ),
        (
            {"edges": (0.0, 1.0), "counts": (1.0,), "ci_low": (0.0,), "ci_high": (2.0,)},
            "confidence",
        ),
        ({"edges": (0.0, math.inf), "counts": (1.0,)}, "edges"),
    ],
    ids=["one-edge", "flat-edges", "count-mismatch", "ci-mismatch", "ci-no-level", "inf-edge"],
)
def test_histogram_rejects_bad_shapes(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidParameter, match=match):
        HistogramSummary(**kwargs)


def test_sequences_become_tuples_and_are_type_checked() -> None:
    stat = Statistic(name="count", estimate=1.0)
    column = ColumnSummary(name="x", kind="numeric", statistics=[stat], notes=["a note"])
    assert column.statistics == (stat,) and column.notes == ("a note",)
    with pytest.raises(InvalidParameter, match="kind"):
        ColumnSummary(name="x", kind="text")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="sequence of Statistic"):
        ColumnSummary(name="x", kind="numeric", statistics=[1.0])  # type: ignore[list-item]
    with pytest.raises(InvalidParameter, match="sequence of CategoryCount"):
        ColumnSummary(name="x", kind="categorical", top_categories="abc")  # type: ignore[arg-type]


def test_budget_share_fraction_in_unit_interval() -> None:
    assert BudgetShare(label="a", budget=PureDP(1.0), fraction=1.0).fraction == 1.0
    with pytest.raises(InvalidParameter, match="fraction"):
        BudgetShare(label="a", budget=PureDP(1.0), fraction=1.5)
    with pytest.raises(InvalidParameter, match="Guarantee"):
        BudgetShare(label="a", budget=1.0)  # type: ignore[arg-type]


def _summary(**change: Any) -> DatasetSummary:
    fields: dict[str, Any] = {
        "source": "t.csv",
        "privacy_unit": "user_id",
        "budget": PureDP(1.0),
        "budget_split": [],
        "columns": [],
        "rows_estimate": None,
        "secure": True,
        "created": datetime(2025, 1, 1, tzinfo=UTC),
    }
    return DatasetSummary(**{**fields, **change})


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"created": datetime(2025, 1, 1)}, "timezone-aware"),
        ({"secure": 1}, "secure"),
        ({"budget": None}, "Guarantee"),
        ({"privacy_unit": ""}, "privacy_unit"),
        (
            {"columns": [ColumnSummary("a", "numeric"), ColumnSummary("a", "categorical")]},
            "unique",
        ),
        ({"rows_estimate": 5.0}, "rows_estimate"),
    ],
    ids=["naive-datetime", "int-secure", "no-budget", "empty-unit", "duplicate-columns", "rows"],
)
def test_dataset_summary_rejects_bad_fields(change: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidParameter, match=match):
        _summary(**change)


def test_summary_is_frozen() -> None:
    summary = _summary()
    with pytest.raises(AttributeError):
        summary.source = "other"  # type: ignore[misc]


def test_statistic_from_a_laplace_release() -> None:
    release = dp.laplace(10.0, epsilon=0.5, sensitivity=1.0, confidence=0.9, rng=3)
    stat = Statistic.from_release("count", release, unit="rows")
    assert release.error is not None and hasattr(release.error, "half_width")
    assert stat.estimate == float(release.value)
    assert stat.ci_low == pytest.approx(stat.estimate - release.error.half_width)
    assert stat.ci_high == pytest.approx(stat.estimate + release.error.half_width)
    assert stat.std_error == release.error.standard_deviation
    assert stat.confidence == 0.9
    assert stat.budget == release.guarantee == PureDP(0.5)
    assert stat.mechanism == release.mechanism and stat.unit == "rows"


def test_histogram_from_a_vector_release() -> None:
    release = dp.laplace([5.0, 7.0, 9.0], epsilon=1.0, sensitivity=1, rng=4)
    hist = HistogramSummary.from_release((0, 1, 2, 3), release)
    assert hist.counts == tuple(float(v) for v in release.value)
    assert len(hist.ci_low) == len(hist.ci_high) == 3 and hist.confidence == 0.95
    assert all(
        lo < c < hi for lo, c, hi in zip(hist.ci_low, hist.counts, hist.ci_high, strict=True)
    )
    assert hist.budget == PureDP(1.0)


def test_category_count_needs_a_level_for_its_interval() -> None:
    with pytest.raises(InvalidParameter, match="confidence"):
        CategoryCount(category="US", estimate=3.0, ci_low=1.0, ci_high=5.0)
    assert CategoryCount(category="", estimate=0.0).category == ""
