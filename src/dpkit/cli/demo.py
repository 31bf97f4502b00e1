"""``dpkit demo``: a few private statistics of the bundled UCI Adult data.

The demo is a small, honest release: each statistic gets a fixed share of a pure-DP
budget, the shares add up to the total by basic composition, and every number comes
with a 95% confidence interval computed from public parameters only. Bounds and
category lists are public domain knowledge (the data set's codebook), never read
from the data. Each person is one row, and neighbouring data sets differ by adding
or removing one person.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit import _validation as check
from dpkit.mechanisms import DiscreteLaplace, ErrorBound, Laplace
from dpkit.random import Random

# Public category lists, from the data set's codebook (adult.names).
INCOME_CATEGORIES = ("<=50K", ">50K")
RACE_CATEGORIES = ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black")

#: Share of the total epsilon each statistic spends (sums to 1).
BUDGET_SHARES = {"people": 0.1, "age": 0.2, "hours_per_week": 0.2, "income": 0.25, "race": 0.25}


@dataclass(frozen=True)
class DemoRow:
    """One released statistic, ready to print."""

    statistic: str
    estimate: float
    low: float
    high: float
    epsilon: float
    mechanism: str


def _clamped_sum(values: np.ndarray[Any, Any], bounds: tuple[float, float]) -> float:
    # Exact integer sum of clamped integer ages/hours: no floating-point summation
    # error that a neighbour could exploit (Casacuberta et al. 2022).
    return float(np.clip(values, bounds[0], bounds[1]).astype(np.int64).sum())


def _mean_row(
    name: str,
    values: np.ndarray[Any, Any],
    epsilon: float,
    count: tuple[float, float, float],
    rng: Random,
) -> DemoRow:
    """Mean = noisy clamped sum / noisy count (post-processing of two releases).

    The sum's 97.5% interval and the count's 97.5% interval hold together with
    probability >= 95% (union bound), and the ratio interval follows from them.
    """
    from dpkit.data import ADULT_PUBLIC_BOUNDS  # deferred: keeps `dpkit --help` fast

    low_bound, high_bound = ADULT_PUBLIC_BOUNDS[name]
    # Adding or removing one person moves the clamped sum by at most max(|lo|, |hi|).
    sensitivity = float(max(abs(low_bound), abs(high_bound)))
    mechanism = Laplace.calibrate(epsilon=epsilon, sensitivity=sensitivity)
    release = mechanism.release(
        _clamped_sum(values, (low_bound, high_bound)), rng=rng, confidence=0.975
    )
    assert isinstance(release.error, ErrorBound)
    total, width = float(release.value), release.error.half_width
    n, n_low, n_high = count
    estimate = total / max(n, 1.0)
    low = max(float(low_bound), (total - width) / max(n_high, 1.0))
    high = min(float(high_bound), (total + width) / max(n_low, 1.0))
    return DemoRow(f"mean {name}", estimate, low, high, epsilon, "Laplace sum / count")


def run_demo(*, epsilon: float, rng: Random) -> list[DemoRow]:
    """Release the demo statistics with total budget ``epsilon`` (pure DP)."""
    from dpkit.data import load_adult  # deferred: keeps `dpkit --help` fast

    epsilon = check.check_epsilon(epsilon, "dpkit demo")
    data = load_adult()
    share = {name: epsilon * part for name, part in BUDGET_SHARES.items()}
    rows: list[DemoRow] = []

    people = DiscreteLaplace.calibrate(epsilon=share["people"], sensitivity=1)
    count_release = people.release(len(data["age"]), rng=rng, confidence=0.975)
    assert isinstance(count_release.error, ErrorBound)
    n, w = float(count_release.value), count_release.error.half_width
    count = (n, n - w, n + w)
    rows.append(DemoRow("people", n, n - w, n + w, share["people"], "discrete Laplace"))
    for name in ("age", "hours_per_week"):
        rows.append(_mean_row(name, data[name], share[name], count, rng))
    for column, categories in (("income", INCOME_CATEGORIES), ("race", RACE_CATEGORIES)):
        rows.extend(_histogram_rows(column, data[column], categories, share[column], rng))
    return rows


def _histogram_rows(
    column: str,
    values: np.ndarray[Any, Any],
    categories: Sequence[str],
    epsilon: float,
    rng: Random,
) -> list[DemoRow]:
    # One person is in exactly one cell: the histogram's L1 sensitivity is 1.
    counts = np.array([int(np.sum(values == c)) for c in categories], dtype=np.int64)
    mechanism = DiscreteLaplace.calibrate(epsilon=epsilon, sensitivity=1)
    release = mechanism.release(counts, rng=rng)
    assert isinstance(release.error, ErrorBound)
    w = release.error.half_width
    return [
        DemoRow(
            f"{column} = {c}",
            float(v),
            float(v) - w,
            float(v) + w,
            epsilon if i == 0 else 0.0,
            "discrete Laplace",
        )
        for i, (c, v) in enumerate(zip(categories, release.value, strict=True))
    ]
