"""Black-box audit of a Session median on neighbours that differ by one person with many rows.

As in test_audit_session.py: the engine part (contribution bounding, grid histogram) runs
on the real neighbouring tables in DuckDB; the release part draws many outputs from the
exponential mechanism's exact distribution on that histogram's inverse-sensitivity loss,
with the coefficient the Session calibrates (repeated evaluations of the query have
this distribution; the exact sampler itself is tested with the estimators).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Query
from dpkit.audit import audit
from dpkit.estimators._quantile_loss import quantile_loss, rational_level
from dpkit.selection import ExponentialMechanism

EPSILON = 1.0
MAX_ROWS = 2


def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    # 50 persons with one row each, spread over [0, 100]; the added person has 40 rows
    # at the top, which (unbounded) would move the median by 20 ranks.
    base = pd.DataFrame({"user": np.arange(50), "x": np.linspace(0.0, 100.0, 50)})
    heavy = pd.DataFrame({"user": 999, "x": np.full(40, 100.0)})
    return base, pd.concat([base, heavy])


def median_mechanism(planted_bug: bool) -> Any:
    query = Query().bound(max_rows=MAX_ROWS).median("x", bounds=(0.0, 100.0), grid_size=101)
    cache: dict[int, np.ndarray] = {}

    def probabilities(x: pd.DataFrame) -> np.ndarray:
        session = dp.Session.from_pandas(x, privacy_unit="user", budget=dp.PureDP(EPSILON), rng=1)
        compiled = session._compile(query, dp.PureDP(EPSILON), salt=5)
        spec, plan = compiled.orders[0], compiled.plan
        if planted_bug:  # contribution bounding disabled, epsilon still calibrated for it
            plan = replace(plan, max_rows=10**6)
        counts = np.zeros(spec.size, dtype=np.int64)
        for index, count in session._engine.histograms(plan, spec).get((), {}).items():
            counts[index] += count
        loss = quantile_loss(counts, rational_level(0.5), "add_remove").astype(np.float64)
        c = ExponentialMechanism(epsilon=spec.parameter, sensitivity=1.0).coefficient
        weights = np.exp(-c * (loss - loss.min()))
        return np.cumsum(weights / weights.sum())

    def mechanism(x: pd.DataFrame, n: int, rng: dp.Random) -> np.ndarray:
        key = id(x)
        if key not in cache:
            cache[key] = probabilities(x)
        cdf = cache[key]
        uniform = rng.uint64(n).astype(np.float64) / 2.0**64
        index = np.minimum(np.searchsorted(cdf, uniform, side="right"), cdf.size - 1)
        return np.linspace(0.0, 100.0, cdf.size)[index]

    return mechanism


@pytest.mark.parametrize("planted_bug", [False, True], ids=["correct", "bounding-disabled"])
def test_audit_session_median(planted_bug: bool) -> None:
    x, x_prime = tables()
    result = audit(
        median_mechanism(planted_bug),
        x_prime,
        x,
        samples=200_000,
        attack="threshold",
        confidence=1 - 1e-6,
        rng=7,
    )
    if planted_bug:
        assert result.epsilon_lower_bound > 2 * EPSILON
    else:
        # Consistent with the budget (false-failure rate <= 1e-6 by the audit's
        # confidence), and not vacuous: the attack gets a good part of the way.
        assert 0.3 * EPSILON <= result.epsilon_lower_bound <= EPSILON
