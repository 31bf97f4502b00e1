"""Black-box audit of Session counts (rows, distinct values) on neighbours that differ
by one person with many rows.

The engine part (contribution bounding) runs on the real neighbouring tables in DuckDB;
the noise part draws many releases from the statistic's calibrated noise, which is
exactly the distribution of repeated evaluations of the query.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit import noise
from dpkit.analytics import KeySet, Query
from dpkit.audit import audit

EPSILON = 1.0


def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    base = pd.DataFrame(
        {"user": np.arange(50), "g": rng.choice(["a", "b"], 50), "x": 1.0, "v": np.arange(50) % 5}
    )
    # One person with 40 rows, and 40 values no one else holds, in each group.
    heavy = pd.DataFrame(
        {"user": 999, "g": ["a"] * 40 + ["b"] * 40, "x": 1.0, "v": 1000 + np.arange(80)}
    )
    return base, pd.concat([base, heavy])


def session_mechanism(planted_bug: bool, statistic: str) -> Any:
    query = (
        Query().group_by("g", keys=KeySet.from_values(g=["a", "b"])).bound(max_groups=1, max_rows=2)
    )
    query = query.count() if statistic == "count" else query.count_distinct("v")
    exact: dict[int, np.ndarray] = {}

    def mechanism(x: pd.DataFrame, n: int, rng: dp.Random) -> np.ndarray:
        session = dp.Session.from_pandas(x, privacy_unit="user", budget=dp.PureDP(EPSILON), rng=1)
        compiled = session._compile(query, dp.PureDP(EPSILON), salt=5)
        plan = compiled.plan
        if planted_bug:  # contribution bounding disabled, noise still calibrated for it
            plan = replace(plan, max_rows=10**6, max_groups=10**6)
        key = id(x)
        if key not in exact:
            result = session._engine.aggregate(plan)
            exact[key] = np.array([result.get((g,), [0])[0] for g in ("a", "b")])
        scale = compiled.specs[0].noise.scale
        draws = noise.discrete_laplace(scale, 2 * n, rng=rng).reshape(n, 2)
        # The released pair, reduced to its total (post-processing) for a 1-D test.
        return (exact[key][None, :] + draws).sum(axis=1)

    return mechanism


@pytest.mark.parametrize("statistic", ["count", "count_distinct"])
@pytest.mark.parametrize("planted_bug", [False, True], ids=["correct", "bounding-disabled"])
def test_audit_session_count(planted_bug: bool, statistic: str) -> None:
    x, x_prime = tables()
    result = audit(
        session_mechanism(planted_bug, statistic),
        x_prime,
        x,
        samples=100_000,
        attack="threshold",
        confidence=1 - 1e-6,
        rng=7,
    )
    if planted_bug:
        assert result.epsilon_lower_bound > 2 * EPSILON
    else:
        # Consistent with the budget, and not vacuous: the attack gets close to it.
        assert 0.3 * EPSILON <= result.epsilon_lower_bound <= EPSILON
