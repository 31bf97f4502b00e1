"""Attacks on the quantile bins of numeric columns found privately (issue 31).

The analyst controls the schema, the public parameters and -- as the attacker here --
some rows (a victim's, or a neighbour's). A numeric column left to be found privately
is binned at private quantiles (``dp.synth.PrivateBins``, the default), released inside
the run's one charge. These attacks try to (1) make one person's extreme value become a
bin edge or a bound (edges must be a function of the DP releases and public parameters
only), (2) make the run fail after the reserve's charge with awkward values (NaN,
infinities, NULL, BIGINTs near 2^63, UBIGINTs near 2^64, DECIMAL(38,0)), and (3) make the
steps inside the reserve add up to anything but the run's budget.

One attack worked while the quantile bins were written (found by
``test_synth_discovery_attacks.py``'s awkward values): a DOUBLE column with infinities
has a range out to +-2^62, and the coding refused its cuts (the +-2^53 rule of
integer-like bounds) after the charge, locking the Session. Fixed: DOUBLE edges need no
such bound, the edges are checked by the coding before they are used (equal-width bins
are the post-processing fallback), and the property test in
``tests/synth/test_private_bins.py`` checks that every set of releases gives edges the
coding accepts.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import dpkit as dp
from dpkit.analytics import _synthesis_domains as domains_module
from dpkit.analytics._synthesis_domains import _grid, _range, outer_edges, quantile_cuts
from dpkit.errors import SessionLocked
from dpkit.synth import PrivateBins

PERSONS = 400
RUN: dict[str, Any] = {"budget": 1.0, "method": "mst", "iterations": 20, "rows": 50}
VICTIM = 2**40 + 12_345  # odd and far above everyone else: no grid point, no power of two


def table(values: list[Any], kind: pa.DataType, victim: list[Any] | None = None) -> pa.Table:
    """PERSONS persons with one row each cycling through ``values``; with ``victim``,
    person 999 with one row per value of ``victim``."""
    cells = [values[i % len(values)] for i in range(PERSONS)]
    ids = list(range(PERSONS))
    if victim is not None:
        cells += victim
        ids += [999] * len(victim)
    return pa.table({"uid": pa.array(ids, pa.int64()), "v": pa.array(cells, kind)})


def session_of(data: pa.Table, rng: int = 0) -> dp.Session:
    return dp.Session.from_arrow(data, privacy_unit="uid", budget=dp.ZCDP(20.0), rng=rng)


def reserve_spends(session: dp.Session) -> list[Fraction]:
    scopes: dict[str, list[Fraction]] = {}
    for record in session._ledger.history():
        scopes.setdefault(record.scope, []).append(record.amount[0])
    reserves = [v for k, v in scopes.items() if k != session._scope]
    assert len(reserves) == 1
    return reserves[0]


def run(session: dp.Session, **kwargs: Any) -> Any:
    """One run as the analyst sees it; a lock is a failed defence."""
    try:
        result = session.synthesize(**{**RUN, **kwargs})
    except SessionLocked:  # pragma: no cover - the defect this file guards against
        pytest.fail("the run failed after the reserve's charge (the Session locked)")
    assert len(session.history) == 1
    assert sum(reserve_spends(session)) == session.history[0].amount[0]
    return result


# ------------------------------------------- (1) one person's extreme value
def test_edges_are_a_function_of_the_releases_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The attacker adds a victim with an extreme value and reads the edges. Every
    query result the reserve releases is recorded; the coding's bounds and cuts must be
    recomputed exactly from those released values (and public parameters) alone: the
    victim's value reaches them only through the DP releases."""
    released: list[Any] = []
    evaluate = dp.Session.evaluate

    def recording(self: dp.Session, query: Any, **kwargs: Any) -> Any:
        result = evaluate(self, query, **kwargs)
        released.append(result)
        return result

    monkeypatch.setattr(dp.Session, "evaluate", recording)
    values = [0] * 7 + list(range(1000, 60_000, 997))
    session = session_of(table(values, pa.int64(), [VICTIM]))
    result = run(session)
    assert len(released) == 2  # the range, then the quantiles
    found = _range(released[0], "v", "integer", pure=False)
    assert found is not None
    low, high = float(found.low), float(found.high)
    _, step = _grid(low, high, True, "BIGINT")
    levels = [f"q_{j / 32:g}" for j in range(1, 32)]
    quantiles = [float(released[1].columns[name][0]) for name in levels]
    first, last = (float(released[1].columns[f"ends_{q:g}"][0]) for q in (1 / 64, 63 / 64))
    low, high = outer_edges(first, last, low, high, integer=True)
    code = result.codings[0]
    assert (code.low, code.high) == (low, high)
    assert code.cuts == quantile_cuts(quantiles, low, high, step, integer=True)
    # The victim's value is neither an edge nor inside the range (it is clamped).
    assert VICTIM not in code.cuts and code.high < VICTIM
    # The zeros (7 of 67 values) have a bin of their own: no value lies in 1..999.
    assert code.low == 0.0 and 0.0 < code.cuts[0] <= 1000.0


@pytest.mark.parametrize(
    "seeds", [pytest.param(1, id="1-seed"), pytest.param(3, id="3-seeds", marks=pytest.mark.slow)]
)
def test_neighbours_with_an_extreme_value_get_edges_inside_the_bulk(seeds: int) -> None:
    """With and without the victim (one seed in the default run, three with --runslow),
    no edge and no bound is the victim's value, and synthetic values never exceed the
    found range."""
    values = list(range(0, 50_000, 131))
    for seed in range(seeds):
        for victim in (None, [VICTIM], [VICTIM, -VICTIM]):
            result = run(session_of(table(values, pa.int64(), victim), rng=seed))
            code = result.codings[0]
            assert code.high < 2**17 and code.low > -1  # the bulk's power-of-two range
            assert all(abs(c) != VICTIM for c in code.cuts)
            drawn = result.data["v"].dropna()
            assert drawn.min() >= code.low and drawn.max() <= code.high


# ------------------------------------------- (2) awkward values after the charge
AWKWARD: dict[str, tuple[pa.DataType, list[Any], list[Any]]] = {
    "NaN, infinities, -0.0 and NULL doubles": (
        pa.float64(),
        [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, None, 1.5, 2.5],
        [float("nan"), float("inf"), None],
    ),
    "mostly NaN with a few values": (
        pa.float64(),
        [float("nan")] * 9 + [3.0],
        [float("-inf")],
    ),
    "huge and tiny doubles": (pa.float64(), [1e300, -1e300, 5e-324, 1.0], [float("inf")]),
    "BIGINT near 2^63": (pa.int64(), [2**63 - 1 - i for i in range(50)] + [0, 7], [2**63 - 1]),
    "BIGINT near -2^63": (pa.int64(), [-(2**63) + i for i in range(50)] + [5], [-(2**63)]),
    "BIGINT around 2^53": (pa.int64(), [2**53 + i * 7_919 for i in range(-40, 40)], [2**53]),
    "UBIGINT near 2^64": (pa.uint64(), [2**64 - 1 - i for i in range(40)] + [3], [2**64 - 1]),
    "DECIMAL(38,0) near 1e30": (
        pa.decimal128(38, 0),
        [Decimal(10**30 + i) for i in range(40)] + [Decimal(1)],
        [Decimal(10**37)],
    ),
    "a constant column": (pa.int64(), [42], [42]),
    "a constant double": (pa.float64(), [0.1], [0.1]),
    "two values far apart": (pa.int64(), [0, 10**15], [10**15]),
    # Dates (found on their days since 1970): the ends of Python's calendar, and days
    # beyond year 9999 that DuckDB holds but datetime.date does not (as date32 days).
    "dates at the calendar's ends": (
        pa.date32(),
        [-719_162, 2_932_896, 0, 19_000, None],
        [2_932_896],
    ),
    "dates beyond year 9999": (pa.date32(), [3_000_000 + i for i in range(40)], [2**31 - 1]),
    "dates before year 1": (pa.date32(), [-800_000 - i for i in range(40)] + [0], [-(2**31)]),
    "one date": (pa.date32(), [19_500], [19_500]),
    # Timestamps (found on their seconds since 1970, epoch): Python's calendar's ends in
    # microseconds, instants DuckDB holds beyond year 9999 and before year 1, fractions
    # of a second with a time zone, a single instant.
    "timestamps at the calendar's ends": (
        pa.timestamp("us"),
        [-62_135_596_800_000_000, 253_402_300_799_999_999, 0, 1_700_000_000_000_000, None],
        [253_402_300_799_999_999],
    ),
    "timestamps beyond year 9999": (
        pa.timestamp("us"),
        [300_000_000_000_000_000 + i for i in range(40)],
        [2**62],
    ),
    "timestamps before year 1": (
        pa.timestamp("us"),
        [-100_000_000_000_000_000 - i for i in range(40)] + [0],
        [-(2**62)],
    ),
    "zoned timestamps a microsecond apart": (
        pa.timestamp("us", tz="UTC"),
        [1_700_000_000_123_457 + i for i in range(40)],
        [1_700_000_000_000_001],
    ),
    "one timestamp": (pa.timestamp("us"), [1_700_000_000_000_000], [1_700_000_000_000_000]),
}


@pytest.mark.parametrize("name", list(AWKWARD))
def test_awkward_values_cannot_fail_after_the_charge(name: str) -> None:
    """Quantile bins on awkward columns, with and without a neighbour: the run completes,
    charged once, its reserve's steps adding up to exactly the run's rho."""
    kind, values, victim = AWKWARD[name]
    for neighbour in (None, victim):
        result = run(session_of(table(values, kind, neighbour)), domains={"v": PrivateBins()})
        code = result.codings[0]
        assert code.size <= PrivateBins().bins * 3 // 2 + 2


def test_many_point_masses_stay_within_the_code_limit() -> None:
    """The attacker makes every quantile a point mass (each value held by 1/256 of the
    persons) and asks for the most bins: the codes stay below the public limit."""
    values = [i * 1000 for i in range(256)]
    data = table(values * 4, pa.int64())
    session = dp.Session.from_arrow(data, privacy_unit="uid", budget=dp.ZCDP(1e4), rng=1)
    result = session.synthesize(
        budget=1.0, method="mst", iterations=5, rows=10, domains={"v": PrivateBins(bins=512)}
    )
    code = result.codings[0]
    assert code.bins <= 512 * 3 // 2 and code.size <= domains_module.MAX_DISCOVERED + 1


# ------------------------------------------- (3) the split
def test_a_refused_quantile_query_leaves_its_share_to_the_measurements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Should the quantile query be refused (before it spends: its noise cannot run at
    the released range), the column gets equal-width bins and the run still spends
    exactly its budget: the share goes to the measurements."""
    evaluate = dp.Session.evaluate

    def refuse_quantiles(self: dp.Session, query: Any, **kwargs: Any) -> Any:
        if any(a.kind == "quantile" for a in query.aggregations):
            raise dp.InvalidParameter("refused before the charge (test)")
        return evaluate(self, query, **kwargs)

    monkeypatch.setattr(dp.Session, "evaluate", refuse_quantiles)
    session = session_of(table(list(range(0, 9000, 7)), pa.int64()))
    result = run(session)
    assert len(reserve_spends(session)) == 2  # the range, then the measurements
    assert not result.codings[0].cuts and result.codings[0].bins == 32
    assert np.isfinite(result.data["v"].astype("float64")).all()
