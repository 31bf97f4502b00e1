"""A hand-made summary, shaped like a describe run on the web-sessions data, for the
report tests. The numbers are made up (they stand in for released values)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from dpkit.accounting import ZCDP, PureDP
from dpkit.report import (
    EPOCH_SECONDS,
    BudgetShare,
    CategoryCount,
    ColumnSummary,
    DatasetSummary,
    HistogramSummary,
    Statistic,
)

EPS = PureDP(1.0)


def _stat(name: str, estimate: float, half: float, share: float, unit: str = "") -> Statistic:
    return Statistic(
        name=name,
        estimate=estimate,
        std_error=half / 2.1,
        ci_low=estimate - half,
        ci_high=estimate + half,
        confidence=0.95,
        mechanism="Laplace" if name != "median" else "inverse sensitivity",
        budget=PureDP(share),
        unit=unit,
    )


def _histogram(
    edges: list[float], counts: list[float], half: float, unit: str = ""
) -> HistogramSummary:
    return HistogramSummary(
        edges=tuple(edges),
        counts=tuple(counts),
        ci_low=tuple(c - half for c in counts),
        ci_high=tuple(c + half for c in counts),
        confidence=0.95,
        mechanism="Laplace",
        budget=PureDP(0.1),
        unit=unit,
    )


def _categories(pairs: list[tuple[str, float]], half: float) -> tuple[CategoryCount, ...]:
    return tuple(
        CategoryCount(
            category=k,
            estimate=v,
            std_error=half / 2.1,
            ci_low=v - half,
            ci_high=v + half,
            confidence=0.95,
        )
        for k, v in pairs
    )


def build_summary(*, secure: bool = True, budget: str = "pure") -> DatasetSummary:
    jan = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    months = [datetime(2024, m, 1, tzinfo=UTC).timestamp() for m in range(1, 13)]
    months.append(datetime(2025, 1, 1, tzinfo=UTC).timestamp())
    columns = [
        ColumnSummary(
            name="duration_minutes",
            kind="numeric",
            statistics=(
                _stat("count", 50_412.0, 71.0, 0.02, "rows"),
                _stat("mean", 11.43, 0.31, 0.04, "minutes"),
                _stat("median", 6.2, 0.4, 0.03, "minutes"),
                _stat("p90", 25.6, 1.7, 0.03, "minutes"),
                _stat("max", 238.0, 2.0, 0.03, "minutes"),
            ),
            histogram=_histogram(
                [0, 5, 10, 20, 40, 80, 160, 240],
                [21_800.0, 11_050.0, 9_480.0, 5_420.0, 2_020.0, 540.0, 88.0],
                64.0,
                "minutes",
            ),
            notes=("clamped to the public bounds [0, 240] minutes",),
        ),
        ColumnSummary(
            name="amount_spent",
            kind="numeric",
            statistics=(
                _stat("mean", 2.05, 0.21, 0.05, "EUR"),
                _stat("p99", 60.1, 6.0, 0.05, "EUR"),
            ),
        ),
        ColumnSummary(
            name="country",
            kind="categorical",
            top_categories=_categories(
                [
                    ("US", 16_700.0),
                    ("IN", 5_210.0),
                    ("GB", 4_790.0),
                    ("DE", 3_010.0),
                    ("BR", 3_040.0),
                    ("JP", 2_630.0),
                    ("<b>ZZ & co</b>", 140.0),
                ],
                58.0,
            ),
            notes=("categories chosen by private key selection (Laplace threshold)",),
        ),
        ColumnSummary(
            name="started_at",
            kind="date",
            statistics=(
                _stat(
                    "median",
                    datetime(2024, 8, 3, 14, 0, tzinfo=UTC).timestamp(),
                    86_400.0 * 2,
                    0.05,
                    EPOCH_SECONDS,
                ),
                _stat("min", jan + 3_600 * 20, 86_400.0 * 3, 0.05, EPOCH_SECONDS),
            ),
            histogram=_histogram(
                months,
                [
                    1_900.0,
                    2_400.0,
                    2_900.0,
                    3_300.0,
                    3_700.0,
                    4_100.0,
                    4_400.0,
                    4_800.0,
                    5_100.0,
                    5_500.0,
                    5_900.0,
                    6_300.0,
                ],
                64.0,
                EPOCH_SECONDS,
            ),
        ),
    ]
    if budget == "pure":
        total = EPS
        split = [
            BudgetShare(label="rows", budget=PureDP(0.1), mechanism="Laplace", fraction=0.1),
            BudgetShare(
                label="duration_minutes",
                budget=PureDP(0.35),
                mechanism="Laplace, inverse sensitivity",
                fraction=0.35,
            ),
            BudgetShare(
                label="amount_spent", budget=PureDP(0.1), mechanism="Laplace", fraction=0.1
            ),
            BudgetShare(
                label="country: top categories",
                budget=PureDP(0.25),
                mechanism="Laplace key selection",
                fraction=0.25,
            ),
            BudgetShare(label="started_at", budget=PureDP(0.2), mechanism="Laplace", fraction=0.2),
        ]
    else:
        total = ZCDP(0.125)
        split = [
            BudgetShare(label="everything", budget=ZCDP(0.125), mechanism="Gaussian", fraction=1.0)
        ]
    return DatasetSummary(
        source="web_sessions.csv.gz",
        privacy_unit="user_id",
        budget=total,
        budget_split=split,
        columns=columns,
        rows_estimate=_stat("rows", 50_433.0, 60.0, 0.1, "rows"),
        secure=secure,
        created=datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC),
        title="Private summary of web sessions",
        notes=("each user contributes at most 10 rows per group and 5 groups",),
    )


@pytest.fixture
def sample_summary() -> DatasetSummary:
    return build_summary()


@pytest.fixture(scope="session")
def summary_factory() -> Callable[..., DatasetSummary]:
    return build_summary
