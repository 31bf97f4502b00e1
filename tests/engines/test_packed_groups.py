"""Packed group keys (SqlEngine._packs_groups) give the unpacked form's integers.

With public text keys, DuckDB's statement joins the rows to the groups' index and
groups the pairs by one packed BIGINT (rank * 2^31 + hash slice) instead of by the
groups. The claim is that nothing else changes: the same rows, pairs, kept groups and
sums. Here the same plan runs both ways on random tables -- text that differs only by
case, trailing space or Unicode normalisation, NULL keys, keys no row has, a second key
column of another type (doubles with NaN and -0.0, booleans, dates, integers), a total
bound -- and the exact integers must be equal. (Spark never packs; its parity with
DuckDB is tests/engines/test_parity.py.)
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics.engines._sql import SqlEngine

TEXTS = ["a", "A", "a ", "é", "e\u0301", "", "ß", "ss", "Ω", "ﬁ", "fi", "zz"]
SECOND = {
    "d": [0.0, -0.0, 1.5, float("nan"), -1.0],
    "b": [True, False],
    "day": [dt.date(2020, 1, 1) + dt.timedelta(days=k) for k in range(3)],
    "i": [-2, 0, 1, 5],
}


def _table(rng: np.random.Generator) -> pd.DataFrame:
    n = int(rng.integers(1, 250))
    text: list[Any] = [TEXTS[i] for i in rng.integers(0, len(TEXTS), n)]
    text = [None if rng.random() < 0.05 else t for t in text]
    return pd.DataFrame(
        {
            "user": rng.integers(-3, int(rng.integers(2, 30)), n),
            "t": text,
            **{c: [v[k] for k in rng.integers(0, len(v), n)] for c, v in SECOND.items()},
            "x": rng.uniform(-10, 10, n),
        }
    )


def _exact(session: dp.Session, query: Query, salt: int) -> dict[Any, list[int]]:
    compiled = session._compile(query, dp.PureDP(1.0), salt=salt)
    return dict(session._engine.aggregate(compiled.plan))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_packed_and_unpacked_statements_give_the_same_integers(seed: int) -> None:
    rng = np.random.default_rng(seed)
    table = _table(rng)
    columns = ["t"]
    if rng.random() < 0.6:
        columns.append(str(rng.choice(list(SECOND))))
        if rng.random() < 0.3:
            columns.reverse()
    # Keys are never NULL or NaN (KeySet refuses them); the rows have both.
    domains = [[*TEXTS, "never"] if c == "t" else [v for v in SECOND[c] if v == v] for c in columns]
    keys = list(itertools.product(*domains))
    random.Random(seed).shuffle(keys)
    keys = keys[: int(rng.integers(2, min(len(keys), 60) + 1))]
    keyset = (
        KeySet.from_values(t=[k[0] for k in keys])
        if len(columns) == 1
        else KeySet.from_tuples(tuple(columns), keys)
    )
    bounds: dict[str, int] = {
        "max_groups": int(rng.integers(1, 4)),
        "max_rows": int(rng.integers(1, 4)),
    }
    if rng.random() < 0.4:
        bounds["max_total_rows"] = int(rng.integers(1, 6))
    low = float(rng.integers(-5, 1))
    query = (
        Query()
        .group_by(*columns, keys=keyset)
        .bound(**bounds)
        .count()
        .sum("x", bounds=(low, low + float(rng.integers(1, 8))))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        session = dp.Session.from_pandas(table, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    plan = session._compile(query, dp.PureDP(1.0), salt=seed).plan
    engine = session._engine
    assert isinstance(engine, SqlEngine)
    # Packed unless every person keeps all their groups (no more keys than max_groups).
    assume(engine._packs_groups(plan))
    packed = _exact(session, query, seed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SqlEngine, "_packs_groups", lambda self, plan: False)
        unpacked = _exact(session, query, seed)
    assert packed == unpacked
