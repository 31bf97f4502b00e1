"""Black-box audit of a per-person query's release path (``Query.per_person``, issue 30),
and a planted bug it must catch: a per-person value that reads other persons' rows.

The path audited is the Session's own, as in test_join_audit.py: for each of two
neighbouring tables a Session is opened, the query is resolved to its per-person rows
(``Session._view_for``, step 0 of ``Session.evaluate``) and compiled with a fixed salt,
the engine computes the exact aggregate once (step 4), and every draw is one call of the
release step (``dpkit.analytics._release.release``, step 5). The released count is the
one number the auditor sees.

Neighbours: 40 persons with 1 to 9 rows each, and the same plus one person with 30
rows. The query: each person's number of rows (``per_person(n="count")``), the persons
with ``n >= 10`` counted, ``max_rows = 1``, epsilon 1. Only the added person has 10 rows
or more, so the count moves by 1 = its sensitivity.

Planted bug: the per-person count reads other persons' rows (each person's ``n`` is the
largest person's row count: the cross-person leak an injected aggregate would make; the
review of the step found that path and it is closed, tests/adversarial/
test_per_person_attacks.py). Adding the heavy person then lifts every person's ``n``
past 10, so the count moves by 41, while the noise is calibrated for 1: the audit must
show more than twice the claim.

Checks at confidence ``1 - 1e-6`` (the seeds are fixed, so every run is the same run):
the correct path's lower bound is at most epsilon and at least half of it (not
vacuous); the bug's bound exceeds 2 epsilon. 10^4 draws per side (3000 for the bug),
10^5 with ``--runslow``. Measured (these seeds): correct 0.85 (10^4 draws), 0.94
(10^5); bug 4.63 (3000 draws). The default run takes about 6 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Query, _per_person
from dpkit.analytics._compile import CompiledQuery
from dpkit.analytics._release import release
from dpkit.audit import AuditResult, audit

EPSILON = 1.0
CONFIDENCE = 1 - 1e-6
SALT = 5
SESSION_SEED = 1
AUDIT_SEED = 11
N_BASE = 40
HEAVY_ROWS = 30
SAMPLES = 10_000
SLOW_SAMPLES = 100_000
BUG_SAMPLES = 3_000
FLOOR = 0.5

QUERY = Query().per_person(n="count").filter("n >= 10").bound(max_rows=1).count()


def neighbours() -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(x, x_prime)``: x_prime is x plus one person with HEAVY_ROWS rows."""
    rng = np.random.default_rng(0)
    rows = rng.integers(1, 10, N_BASE)
    base = pd.DataFrame({"uid": np.repeat(np.arange(N_BASE), rows), "minutes": 10})
    heavy = pd.DataFrame({"uid": [999] * HEAVY_ROWS, "minutes": 10})
    return base, pd.concat([base, heavy], ignore_index=True)


@dataclass(frozen=True)
class Prepared:
    compiled: CompiledQuery
    query: Query
    exact: dict[tuple[Any, ...], list[int]]


def prepare(table: pd.DataFrame) -> Prepared:
    session = dp.Session.from_pandas(
        table, privacy_unit="uid", budget=dp.PureDP(EPSILON), rng=SESSION_SEED
    )
    view, stripped = session._view_for(QUERY, SALT)
    compiled = view._compile(stripped, dp.PureDP(EPSILON), salt=SALT)
    assert [s.noise.sensitivity for s in compiled.specs] == [1]
    return Prepared(compiled, stripped, view._engine.aggregate(compiled.plan))


def reading_the_whole_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted bug: each person's ``n`` is the largest person's row count."""
    original = _per_person.person_relation

    def leaking(engine: Any, *args: Any, **kwargs: Any) -> tuple[str, list[Any]]:
        sql, params = original(engine, *args, **kwargs)
        largest = (
            f'(SELECT max(__c) FROM (SELECT count(*) AS __c FROM {engine.relation} GROUP BY "uid")'
            " AS __m)"
        )
        return sql.replace('count(*) AS "n"', f'{largest} AS "n"', 1), params

    monkeypatch.setattr(_per_person, "person_relation", leaking)
    import dpkit.analytics.session as session_module

    monkeypatch.setattr(session_module, "person_relation", leaking)


def releases(state: Prepared, n: int, rng: dp.Random) -> npt.NDArray[Any]:
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        result = release(state.compiled, state.query, state.exact, None, 0.95, rng)
        out[i] = float(result.columns["count"][0])
    return out


def run_audit(samples: int, shift: int) -> AuditResult:
    x_table, x_prime_table = neighbours()
    x, x_prime = prepare(x_table), prepare(x_prime_table)
    assert x_prime.exact[()][0] - x.exact[()][0] == shift
    return audit(releases, x_prime, x, samples=samples, confidence=CONFIDENCE, rng=AUDIT_SEED)


def check_within_claim(samples: int) -> None:
    result = run_audit(samples, shift=1)
    assert result.epsilon_lower_bound <= EPSILON, result
    assert result.epsilon_lower_bound >= FLOOR * EPSILON, result


def test_per_person_count_within_claim() -> None:
    check_within_claim(SAMPLES)


@pytest.mark.slow
def test_per_person_count_within_claim_large() -> None:
    check_within_claim(SLOW_SAMPLES)


def test_planted_bug_a_per_person_value_reading_other_persons_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reading_the_whole_table(monkeypatch)
    result = run_audit(BUG_SAMPLES, shift=N_BASE + 1)
    assert result.epsilon_lower_bound > 2 * EPSILON, result
