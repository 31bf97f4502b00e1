"""Black-box audit of a join query's release path (issue 29), and a planted bug it
must catch: contribution bounding before a join with a public table with duplicate
keys.

The path audited is the Session's own, as in tests/analytics/test_audit_front_door.py:
for each of two neighbouring databases a Session over several tables is opened
(``dp.Session.from_tables``), the query is resolved to its joined view
(``Session._view_for``, step 0 of ``Session.evaluate``) and compiled
(``Session._compile``, step 1) with a fixed salt, the engine computes the exact
aggregate once (step 4: with a fixed salt the bounding is deterministic, which is what
one evaluation does for the salt it drew), and every draw is one call of the release
step ``evaluate`` runs (``dpkit.analytics._release.release``, step 5). The released
count is the one number the auditor sees.

Neighbours: 30 persons with one visit each, and the same plus one person with 20 visits,
all in the region whose key the public table ``regions`` holds ``M = 4`` times
(duplicate keys), some in a region held once. The query: ``visits`` inner-joined with
``regions`` on ``region_id``, ``max_rows = 2``, a count at epsilon 1. The join
multiplies the added person's rows to 80 joined rows; bounding after the join keeps 2,
so the count moves by 2 = its sensitivity.

Planted bug: bounding *before* the join. ``_Builder.visible`` is patched so that the
query's table is truncated to ``max_rows`` rows per person before the join, and the
plan's bounds are lifted (the post-join bound disabled); the noise is still calibrated
for ``max_rows``. The added person then moves the count by ``M * max_rows = 8``: about
4 epsilon, and the audit must show more than twice the claim.

Checks at confidence ``1 - 1e-6`` (a correct Session fails with probability at most
1e-6; the seeds are fixed, so every run is the same run): the correct path's lower bound
is at most epsilon and at least half of it (not vacuous: a threshold on a count shifted
by its full sensitivity shows about 0.8 epsilon at this size, see the front-door audit);
the bug's bound exceeds 2 epsilon. The default run uses 10^4 draws per side (3000 for the
bug); ``--runslow`` repeats the correct audit with 10^5. Measured (these seeds): correct
0.86 (10^4 draws), 0.96 (10^5); bug 2.94 (3000 draws). The default run took about 8 s
on the 2-core development machine (under load).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Query, _joins
from dpkit.analytics._compile import CompiledQuery
from dpkit.analytics._release import release
from dpkit.audit import AuditResult, audit

EPSILON = 1.0
CONFIDENCE = 1 - 1e-6
SALT = 5  # one evaluation's contribution bounding (Session.evaluate draws it)
SESSION_SEED = 1
AUDIT_SEED = 7
MAX_ROWS = 2
MULTIPLICITY = 4  # rows of the public table sharing the key "1"
HEAVY_ROWS = 20
N_BASE = 30
UNBOUNDED = 10**6
SAMPLES = 10_000
SLOW_SAMPLES = 100_000
BUG_SAMPLES = 3_000
FLOOR = 0.5  # non-vacuity: the correct audit shows at least this part of epsilon

QUERY = Query.from_table("visits").join("regions", on="region_id").bound(max_rows=MAX_ROWS).count()


# ---------------------------------------------------------------------------- data
def regions() -> pd.DataFrame:
    """Public: key 1 held MULTIPLICITY times (duplicate keys), key 2 once."""
    ids = [1] * MULTIPLICITY + [2]
    return pd.DataFrame({"region_id": ids, "name": [f"r{i}" for i in range(len(ids))]})


def neighbours() -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(x, x_prime)``: x_prime is x plus one person with HEAVY_ROWS visits in region 1."""
    rng = np.random.default_rng(0)
    base = pd.DataFrame(
        {"uid": np.arange(N_BASE), "region_id": rng.choice([1, 2], N_BASE), "minutes": 10}
    )
    heavy = pd.DataFrame({"uid": 999, "region_id": [1] * HEAVY_ROWS, "minutes": 10})
    return base, pd.concat([base, heavy], ignore_index=True)


# ---------------------------------------------------------------------------- the path
@dataclass(frozen=True)
class Prepared:
    """The compiled query on one database and the engine's exact result (steps 0-4)."""

    compiled: CompiledQuery
    query: Query
    exact: dict[tuple[Any, ...], list[int]]


def prepare(visits: pd.DataFrame, planted_bug: bool) -> Prepared:
    session = dp.Session.from_tables(
        {"visits": visits},
        privacy_unit="uid",
        public={"regions": regions()},
        budget=dp.PureDP(EPSILON),
        rng=SESSION_SEED,
    )
    view, stripped = session._view_for(QUERY, SALT)
    assert view._view is not None and view._view.fan_out == MULTIPLICITY
    compiled = view._compile(stripped, dp.PureDP(EPSILON), salt=SALT)
    assert compiled.plan.max_rows == MAX_ROWS
    assert [s.noise.sensitivity for s in compiled.specs] == [MAX_ROWS]
    plan = compiled.plan
    if planted_bug:
        # The post-join bound disabled; the noise is still calibrated for MAX_ROWS.
        plan = replace(plan, max_rows=UNBOUNDED, max_groups=UNBOUNDED)
    exact = view._engine.aggregate(plan)
    return Prepared(compiled, stripped, exact)


def bounding_before_the_join(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted bug: each person's rows of the query's table are truncated to
    MAX_ROWS *before* the join (a deterministic rule on the person's rows)."""
    original = _joins._Builder.visible

    def visible(self: Any, info: Any, depth: int | None = None) -> tuple[str, list[Any]]:
        sql, params = original(self, info, depth)
        if info.public:
            return sql, params
        unit = self.engine.q(info.unit)
        order = ", ".join(self.engine.q(c) for c in info.schema)
        truncated = (
            f"SELECT * FROM ({sql}) AS __pre QUALIFY row_number() OVER "
            f"(PARTITION BY {unit} ORDER BY {order}) <= {MAX_ROWS}"
        )
        return truncated, params

    monkeypatch.setattr(_joins._Builder, "visible", visible)


def releases(state: Prepared, n: int, rng: dp.Random) -> npt.NDArray[Any]:
    """The audited mechanism: ``n`` calls of the Session's release step (step 5)."""
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        result = release(state.compiled, state.query, state.exact, None, 0.95, rng)
        out[i] = float(result.columns["count"][0])
    return out


def run_audit(planted_bug: bool, samples: int) -> AuditResult:
    x_table, x_prime_table = neighbours()
    x, x_prime = prepare(x_table, planted_bug), prepare(x_prime_table, planted_bug)
    shift = x_prime.exact[()][0] - x.exact[()][0]
    # Bounding after the join: the added person moves the count by max_rows; before
    # the join (the bug): by M * max_rows.
    assert shift == (MULTIPLICITY * MAX_ROWS if planted_bug else MAX_ROWS), shift
    mechanism: Callable[..., npt.NDArray[Any]] = releases
    return audit(mechanism, x_prime, x, samples=samples, confidence=CONFIDENCE, rng=AUDIT_SEED)


# ---------------------------------------------------------------------------- tests
def check_within_claim(samples: int) -> None:
    result = run_audit(False, samples)
    # Within the claim: exceeding it happens with probability <= 1 - CONFIDENCE.
    assert result.epsilon_lower_bound <= EPSILON, result
    # Not vacuous: the attack gets a stated part of the way to the claim.
    assert result.epsilon_lower_bound >= FLOOR * EPSILON, result


def test_join_count_within_claim() -> None:
    check_within_claim(SAMPLES)


@pytest.mark.slow
def test_join_count_within_claim_large() -> None:
    check_within_claim(SLOW_SAMPLES)


def test_planted_bug_bounding_before_the_join_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    bounding_before_the_join(monkeypatch)
    result = run_audit(True, BUG_SAMPLES)
    assert result.epsilon_lower_bound > 2 * EPSILON, result
