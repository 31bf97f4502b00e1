"""Binned group columns: the SQL's binary search puts every value in the bin that a
linear scan of the edges does (``numpy.searchsorted(..., side="right")``)."""

from __future__ import annotations

import duckdb
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.analytics.engines._sql import _bin_search, _literal

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=60, deadline=None)
@given(
    edges=st.lists(st.sampled_from([-3.5, -1.0, 0.0, 0.25, 1.0, 2.0, 1e300]) | finite, max_size=40),
    values=st.lists(finite | st.sampled_from([-1.0, 0.0, 2.0, -0.0, 1e300]), min_size=1),
)
def test_binary_search_is_the_linear_scan(edges: list[float], values: list[float]) -> None:
    interior = sorted(edges)
    index = _bin_search("x", [_literal(e) for e in interior])
    got = duckdb.execute(
        f"SELECT {index} FROM (SELECT unnest(CAST(? AS DOUBLE[])) AS x, "
        "generate_subscripts(CAST(? AS DOUBLE[]), 1) AS i) ORDER BY i",
        [values, values],
    ).fetchall()
    expected = np.searchsorted(np.asarray(interior, dtype=np.float64), values, side="right")
    assert [int(row[0]) for row in got] == [int(e) for e in expected]
