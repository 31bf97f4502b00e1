"""Bins of numeric columns whose domain is found privately: edges at private quantiles
(``dp.synth.PrivateBins``), their construction from released values, their coding in
SQL, and the budget split inside the run's one charge."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit as dp
from dpkit.analytics._synthesis_domains import RANGE_PART, quantile_cuts
from dpkit.analytics.engines._cells import CellSpec, cell_counts
from dpkit.synth import PrivateBins
from dpkit.synth._columns import Cuts, code_of

# ------------------------------------------------------------ edges from released values


@pytest.mark.parametrize(
    ("values", "low", "high", "step", "integer", "expected"),
    [
        pytest.param(
            [10.0, 20.0, 30.0], 0.0, 99.0, 1.0, True, (10.0, 20.0, 30.0), id="distinct-integers"
        ),
        pytest.param(
            # capital_gain: 0 for 90% of the values -> a bin {0}, then bins above.
            [0.0] * 29 + [3000.0, 7000.0],
            0.0,
            131071.0,
            1.0,
            True,
            (1.0, 3000.0, 7000.0),
            id="mostly-zero-integer",
        ),
        pytest.param(
            # An integer grid of step 2 (a wide range): the point mass's cell is still {0}.
            [0.0] * 29 + [3000.0, 7000.0],
            0.0,
            131071.0,
            2.0,
            True,
            (1.0, 2999.0, 6999.0),
            id="mostly-zero-integer-step-2",
        ),
        pytest.param(
            [10.0, 20.0, 40.0, 40.0, 40.0, 50.0],
            0.0,
            99.0,
            1.0,
            True,
            (10.0, 20.0, 40.0, 41.0, 50.0),
            id="point-mass-inside",
        ),
        pytest.param(
            # Few distinct integers in a wide range: a bin for each, bins between.
            [0.0] * 10 + [1000.0] * 10 + [5000.0] * 11,
            0.0,
            8191.0,
            1.0,
            True,
            (1.0, 1000.0, 1001.0, 5000.0, 5001.0),
            id="few-distinct-integers-in-a-wide-range",
        ),
        pytest.param([99.0] * 5, 0.0, 99.0, 1.0, True, (99.0,), id="mass-at-the-top"),
        pytest.param([0.0] * 31, 0.0, 99.0, 1.0, True, (1.0,), id="mass-at-the-bottom"),
        pytest.param([0.0] * 31, 0.0, 1.0, 1e-4, False, (5e-5,), id="double-mass-at-low"),
        pytest.param(
            # A 0/1 flag stored as DOUBLE (few distinct values): a bin around each.
            [0.0] * 20 + [1.0] * 11,
            0.0,
            2.0,
            2e-4,
            False,
            (1e-4, 1.0 - 1e-4, 1.0 + 1e-4),
            id="few-distinct-doubles",
        ),
        pytest.param(
            [2.5, 7.5], 0.0, 10.0, 1e-3, False, (2.5 - 5e-4, 7.5 - 5e-4), id="distinct-doubles"
        ),
        pytest.param([], 0.0, 10.0, 1.0, True, (), id="no-values"),
    ],
)
def test_quantile_cuts(
    values: list[float],
    low: float,
    high: float,
    step: float,
    integer: bool,
    expected: tuple[float, ...],
) -> None:
    cuts = quantile_cuts(values, low, high, step, integer=integer)
    assert cuts == pytest.approx(expected, abs=1e-12)
    assert all(a < b for a, b in itertools.pairwise(cuts))


def test_quantile_cuts_ignore_order_outside_values_and_non_finite_values() -> None:
    """Released values in any order, outside the range or not finite: the cuts are those
    of the sorted, clipped, finite values (deterministic post-processing)."""
    messy = [50.0, math.nan, 10.0, 500.0, -3.0, math.inf, 10.0, -math.inf]
    clean = [-3.0, 10.0, 10.0, 50.0, 500.0]
    first = quantile_cuts(messy, 0.0, 99.0, 1.0, integer=True)
    assert first == quantile_cuts(clean, 0.0, 99.0, 1.0, integer=True)
    assert first == (10.0, 11.0, 50.0, 99.0)  # -3 is at low (no cut), 500 is high: a cut
    assert first == quantile_cuts(messy, 0.0, 99.0, 1.0, integer=True)


def test_integer_cuts_near_2_53_are_exact_and_accepted() -> None:
    high = float(2**53)
    cuts = quantile_cuts([high] * 3 + [high - 50], high - 100, high, 1.0, integer=True)
    assert cuts == (high - 50, high)  # 2^53 + 1 rounds to 2^53: deduplicated
    code = code_of("v", "BIGINT", Cuts(high - 100, high, cuts), "test")
    assert code.bins == 3


finite = st.floats(min_value=-(2.0**62), max_value=2.0**62, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.one_of(finite, st.sampled_from([math.nan, math.inf, -math.inf]))),
    ends=st.tuples(finite, finite),
    points=st.integers(3, 2**16 + 1),
    integer=st.booleans(),
)
def test_every_set_of_released_values_gives_edges_the_coding_accepts(
    values: list[float], ends: tuple[float, float], points: int, integer: bool
) -> None:
    """Whatever the releases, the cuts increase strictly inside the range and the coding
    takes them: nothing can fail after the charge on account of the edges."""
    low, high = sorted(ends)
    if integer:
        low, high = (float(math.floor(min(max(v, -(2.0**53)), 2.0**53))) for v in (low, high))
    if not low < high:
        return
    step = (high - low) / (points - 1)
    cuts = quantile_cuts(values, low, high, step, integer=integer)
    assert all(a < b for a, b in itertools.pairwise(cuts))
    assert all(low < c <= high if integer else low < c < high for c in cuts)
    # At most one cut per released value and one more per value released twice: the
    # number of codes is bounded by the public number of levels.
    released = [v for v in values if math.isfinite(v)]
    assert len(cuts) <= len(released) + len(released) // 2
    if cuts:
        code = code_of("v", "BIGINT" if integer else "DOUBLE", Cuts(low, high, cuts), "test")
        assert code.bins == len(cuts) + 1


# ------------------------------------------------------------ coding and decoding


def test_sql_codes_match_python_codes_for_awkward_values() -> None:
    """The SQL of bins cut at edges clamps in the column's own type: NaN, +-inf, NULL,
    BIGINTs at +-2^63 all get a code: NaN the NULL code (its canonical form is NULL, as
    the docs say), the others the Python coding's."""
    doubles = [-1e300, -math.inf, math.nan, None, 0.0, -0.0, 0.5, 0.99, 1.0, 2.0, math.inf]
    integers = [-(2**63), 2**63 - 1, None, 0, 1, 5, 6, 9, 10, 11, 12]
    table = pa.table({"d": pa.array(doubles, pa.float64()), "i": pa.array(integers, pa.int64())})
    session = dp.Session.from_arrow(table, budget=dp.ZCDP(1.0))
    d = code_of("d", session._schema["d"], Cuts(0.0, 1.0, (0.5, 0.75)), "test")
    i = code_of("i", session._schema["i"], Cuts(0.0, 10.0, (1.0, 6.0, 10.0)), "test")
    for code, values in ((d, doubles), (i, integers)):
        spec = CellSpec((code,), None, 1, 3)
        codes, counts = cell_counts(session._engine, spec)
        got = sorted(np.repeat(codes[:, 0], counts).tolist())
        expected = []
        for v in values:
            if v is None or (isinstance(v, float) and math.isnan(v)):
                expected.append(code.bins)  # the NULL code
            else:
                expected.append(int(code.code_numbers(np.array([float(v)]))[0]))
        assert got == sorted(expected)


def test_spark_codes_bins_cut_at_edges_as_duckdb(spark: Any) -> None:
    """The same CASE over the clamped value on both engines: the same cells, with
    NaN, infinities, NULL and extreme integers."""
    frame = pd.DataFrame(
        {
            "uid": list(range(10)),
            "d": [-math.inf, math.nan, None, 0.0, 0.3, 0.5, 0.75, 0.9, 1.0, math.inf],
            "i": [-(2**63), 2**63 - 1, 0, 1, 5, 6, 9, 10, 11, 3],
            "day": [
                dt.date(1, 1, 1),
                dt.date(9999, 12, 31),
                None,
                dt.date(2024, 1, 1),
                dt.date(2024, 1, 31),
                dt.date(2024, 2, 1),
                dt.date(2024, 6, 30),
                dt.date(2024, 7, 1),
                dt.date(2024, 12, 31),
                dt.date(2025, 1, 1),
            ],
        }
    )
    cuts = {
        "d": Cuts(0.0, 1.0, (0.5, 0.75)),
        "i": Cuts(0.0, 10.0, (1.0, 6.0, 10.0)),
        # Dates cut at released days (a date domain found privately): whole days.
        "day": Cuts(
            dt.date(2024, 1, 1), dt.date(2024, 12, 31), (dt.date(2024, 2, 1), dt.date(2024, 7, 1))
        ),
    }
    cells = []
    for session in (
        dp.Session.from_pandas(frame, privacy_unit="uid", budget=dp.ZCDP(1.0)),
        dp.Session.from_spark(
            spark.createDataFrame(frame), privacy_unit="uid", budget=dp.ZCDP(1.0)
        ),
    ):
        codings = tuple(code_of(n, session._schema[n], c, "test") for n, c in cuts.items())
        codes, counts = cell_counts(session._engine, CellSpec(codings, "uid", 1, 3))
        cells.append(sorted(zip(map(tuple, codes.tolist()), counts.tolist(), strict=True)))
    assert cells[0] == cells[1]


@pytest.mark.parametrize("type_name", ["BIGINT", "DOUBLE"])
def test_decoded_values_fall_back_into_their_bins(type_name: str) -> None:
    cuts = (1.0, 3000.0, 7000.0) if type_name == "BIGINT" else (0.25, 0.5, 0.5 + 1e-12)
    high = 131071.0 if type_name == "BIGINT" else 1.0
    code = code_of("v", type_name, Cuts(0.0, high, cuts), "test")
    codes = np.repeat(np.arange(code.bins + 1), 200)  # every bin and the NULL code
    values = code.decode(codes, np.random.default_rng(0))
    numbers = values.astype("float64").to_numpy()
    inside = codes < code.bins
    assert np.isnan(numbers[~inside]).all()
    assert (code.code_numbers(numbers[inside]) == codes[inside]).all()
    if type_name == "BIGINT":
        assert str(values.dtype) == "Int64"
        assert set(values[codes == 0].tolist()) == {0}  # the point mass comes back exact
    assert code.labels()[0] == ("0" if type_name == "BIGINT" else "[0, 0.25)")


def test_private_bins_validates_its_parameters() -> None:
    for bad in ({"bins": 0}, {"bins": 10_000}, {"bins": True}, {"edges": "log"}):
        with pytest.raises(dp.InvalidParameter):
            PrivateBins(**bad)  # type: ignore[arg-type]


def test_private_bins_on_a_text_column_is_refused_before_the_charge() -> None:
    session = dp.Session.from_pandas(
        pd.DataFrame({"s": ["a", "b"], "x": [1, 2]}), budget=dp.ApproxDP(1.0, 1e-6)
    )
    with pytest.raises(dp.InvalidParameter, match="PrivateBins applies"):
        session.synthesize(budget=0.5, method="mst", domains={"s": PrivateBins()})
    assert len(session.history) == 0


# ------------------------------------------------------------ on a Session: one charge


def skewed(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """A mostly-zero integer column (capital_gain-like) and a public category."""
    rng = np.random.default_rng(seed)
    gain = np.where(rng.random(n) < 0.9, 0, rng.integers(1000, 100_000, n))
    return pd.DataFrame({"gain": gain, "sex": rng.choice(["F", "M"], n)})


def reserve_spends(session: dp.Session) -> list[tuple[Fraction, ...]]:
    scopes: dict[str, list[tuple[Fraction, ...]]] = {}
    for record in session._ledger.history():
        scopes.setdefault(record.scope, []).append(tuple(record.amount))
    reserves = [v for k, v in scopes.items() if k != session._scope]
    assert len(reserves) == 1
    return reserves[0]


RUN: dict[str, Any] = {"method": "mst", "iterations": 30, "domains": {"sex": ["F", "M"]}}


def test_quantile_edges_are_found_inside_the_one_charge_with_the_stated_split() -> None:
    """One spend of the Session; inside its reserve: the range (RANGE_PART of the
    column's share), the quantiles (the rest of the share), the measurements (what is
    left), adding up to exactly the run's rho."""
    session = dp.Session.from_pandas(skewed(), budget=dp.ZCDP(2.0), rng=4)
    text = session.explain_synthesis(budget=0.5, method="mst", domains=RUN["domains"])
    assert "31 quantiles" in text and len(session.history) == 0
    result = session.synthesize(budget=0.5, **RUN)
    assert [r.amount for r in session.history] == [(Fraction(1),)]
    rho = Fraction(1)
    share = rho / 20  # DISCOVERY_SHARE of the run, one column found privately
    spends = [a[0] for a in reserve_spends(session)]
    assert spends[:2] == [share * RANGE_PART, share * (1 - RANGE_PART)]
    assert len(spends) == 3 and sum(spends) == rho
    gain = next(c for c in result.codings if c.name == "gain")
    assert gain.cuts and gain.cuts[0] == 1.0  # a bin of its own for the zeros
    assert any("cut at private quantiles" in n for n in result.notes)
    zeros = (result.data["gain"] == 0).mean()
    assert 0.8 < zeros < 1.0


def test_equal_width_bins_spend_the_whole_share_on_the_range() -> None:
    session = dp.Session.from_pandas(skewed(), budget=dp.ZCDP(2.0), rng=4)
    domains = {"sex": ["F", "M"], "gain": PrivateBins(edges="equal", bins=16)}
    result = session.synthesize(budget=0.5, **{**RUN, "domains": domains})
    assert [r.amount for r in session.history] == [(Fraction(1),)]  # the same charge
    spends = [a[0] for a in reserve_spends(session)]
    assert spends[0] == Fraction(1, 20) and len(spends) == 2 and sum(spends) == 1
    gain = next(c for c in result.codings if c.name == "gain")
    assert not gain.cuts and gain.bins == 16


def test_a_few_integer_range_gets_one_bin_per_value_without_quantiles() -> None:
    """A range of at most ``bins`` integers: one bin each; the quantile share is left
    to the measurements (the steps still add up to the run's rho)."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"level": rng.integers(1, 9, 3000), "sex": rng.choice(["F", "M"], 3000)})
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(2.0), rng=2)
    result = session.synthesize(budget=0.5, **RUN)
    spends = [a[0] for a in reserve_spends(session)]
    assert spends[0] == Fraction(1, 20) * RANGE_PART and len(spends) == 2 and sum(spends) == 1
    level = next(c for c in result.codings if c.name == "level")
    assert not level.cuts and level.width == 1
    assert any("one bin per integer" in n for n in result.notes)


def test_aim_with_quantile_bins_and_the_reports() -> None:
    """AIM on bins cut at private quantiles; the evaluation-only comparison recodes the
    real and synthetic tables with the same cuts (the synthetic codes come back as
    drawn), and the HTML report labels the bins."""
    frame = skewed(2000, seed=3)
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(4.0), rng=6)
    result = session.synthesize(budget=1.0, method="aim", iterations=20, domains=RUN["domains"])
    assert len(session.history) == 1 and sum(a[0] for a in reserve_spends(session)) == 4
    gain = next(c for c in result.codings if c.name == "gain")
    assert gain.cuts and gain.labels()[0] == "0"
    compared = result.compare_with_real(frame, [("gain", "sex")])
    assert not compared["private"].any() and compared["l1_vs_real"].iloc[0] < 0.1
    assert result.to_html().startswith("<!doctype html>")
