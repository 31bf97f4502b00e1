"""``Session.synthesize`` and ``dp.synthesize``: the coded table, the accounting, the
refusals before the charge, failing closed after it, and the output's types."""

from __future__ import annotations

import datetime as dt
import json
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics.engines._cells import CellSpec, cell_counts
from dpkit.errors import InternalError
from dpkit.synth import Bins, Categories
from dpkit.synth._columns import plan_columns
from dpkit.synth._domain import Domain
from dpkit.synth._marginals import PrivateMarginals, epsilon_for, sigma_for
from dpkit.synth._mst import DEFAULT_SPLIT, PAPER_SPLIT, check_split, rho_parts, run_mst


def people(n: int = 200, seed: int = 0) -> pd.DataFrame:
    """Persons with 1..6 rows each; ``y`` depends on ``x``."""
    rng = np.random.default_rng(seed)
    uid = np.repeat(np.arange(n), rng.integers(1, 7, n))
    x = rng.choice(["a", "b", "c"], len(uid))
    y = np.where(x == "a", rng.integers(0, 10, len(uid)), rng.integers(50, 60, len(uid)))
    return pd.DataFrame({"uid": uid, "x": x, "y": y, "flag": rng.random(len(uid)) < 0.3})


DOMAINS: dict[str, object] = {"x": ["a", "b", "c"], "y": (0, 99)}


def _coded(session: dp.Session, domains: dict[str, object], k: int, salt: int = 3) -> Any:
    codings = plan_columns(session._schema, list(domains), domains, session._unit, "test")
    spec = CellSpec(codings, session._unit, k, salt)
    return codings, *cell_counts(session._engine, spec)


# ------------------------------------------------------------------ the coded table
def test_each_person_keeps_at_most_max_rows() -> None:
    frame = people()
    session = dp.Session.from_pandas(frame, privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    per_person = frame.groupby("uid").size()
    for k in (1, 2, 5):
        _, _, counts = _coded(session, DOMAINS, k)
        assert counts.sum() == np.minimum(per_person, k).sum()


def test_large_bound_gives_the_exact_contingency_table() -> None:
    frame = people()
    session = dp.Session.from_pandas(frame, privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    codings, codes, counts = _coded(session, DOMAINS, k=100)
    x_code = frame["x"].map({"a": 0, "b": 1, "c": 2})
    width = codings[1].width
    y_code = (frame["y"] - 0) // width
    expected = pd.DataFrame({"x": x_code, "y": y_code}).value_counts()
    got = {tuple(int(v) for v in c): int(n) for c, n in zip(codes, counts, strict=True)}
    assert got == {tuple(int(v) for v in key): int(n) for key, n in expected.items()}


def test_nulls_unlisted_values_and_clamping() -> None:
    frame = pd.DataFrame({"c": ["a", "b", None, "zz", "a"], "v": [-5.0, 0.5, np.nan, 20.0, 1.0]})
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(1.0), rng=1)
    domains: dict[str, object] = {"c": ["a", "b"], "v": Bins(0.0, 1.0, 2)}
    _, codes, counts = _coded(session, domains, k=1)
    got = {tuple(int(v) for v in c): int(n) for c, n in zip(codes, counts, strict=True)}
    # c: a=0, b=1, NULL/unlisted=2; v: [0, .5)=0, [.5, 1]=1, NULL/NaN=2; clamped ends.
    assert got == {(0, 0): 1, (1, 1): 1, (2, 2): 1, (2, 1): 1, (0, 1): 1}
    dropped: dict[str, object] = {"c": Categories(["a", "b"], nulls=False), "v": Bins(0.0, 1.0, 2)}
    _, codes, counts = _coded(session, dropped, k=1)
    assert counts.sum() == 3  # the rows with c NULL or 'zz' are dropped


def test_spark_gives_the_duckdb_cells(spark: Any) -> None:
    frame = people(30)
    on_duckdb = dp.Session.from_pandas(frame, privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    on_spark = dp.Session.from_spark(
        spark.createDataFrame(frame), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1
    )
    _, codes_a, counts_a = _coded(on_duckdb, DOMAINS, k=2)
    _, codes_b, counts_b = _coded(on_spark, DOMAINS, k=2)

    def cells(codes: Any, counts: Any) -> dict[tuple[int, ...], int]:
        return {tuple(int(v) for v in c): int(n) for c, n in zip(codes, counts, strict=True)}

    assert cells(codes_a, counts_a) == cells(codes_b, counts_b)


# ------------------------------------------------------------------ accounting
def test_charged_once_with_the_runs_budget() -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    result = session.synthesize(budget=0.4, method="mst", domains=DOMAINS, max_rows=2)
    assert len(session.history) == 1
    assert session.history[0].amount == (Fraction(0.4) * Fraction(1.0),)
    assert session.spent == dp.ZCDP(0.4)
    description = json.loads(session.history[0].description)
    assert description["synthesize"] == "mst" and description["max_rows"] == 2
    assert result.guarantee == dp.ZCDP(0.4)


HALF_QUARTERS = (Fraction(1, 2), Fraction(1, 4), Fraction(1, 4))


@pytest.mark.parametrize("split", [None, DEFAULT_SPLIT, PAPER_SPLIT, HALF_QUARTERS])
@pytest.mark.parametrize("k", [1, 3])
def test_mst_steps_add_up_to_at_most_its_budget(
    k: int, split: tuple[Fraction, Fraction, Fraction] | None
) -> None:
    domain = Domain(("a", "b", "c"), (3, 4, 5))
    rng = np.random.default_rng(0)
    codes = np.stack([rng.integers(0, s, 500) for s in domain.sizes], axis=1)
    budget = Fraction(1, 7)
    ones = np.ones(500, dtype=np.int64)
    data = PrivateMarginals(codes, ones, domain, sensitivity=k, rho=budget, rng=dp.as_random(1))
    if split is None:
        run_mst(data)  # the default split
        split = DEFAULT_SPLIT
    else:
        run_mst(data, split=split)
    assert data.spent <= budget
    assert data.spent >= budget * Fraction(999, 1000)  # it uses (nearly) all of it
    # Each step spends (nearly all of) its part of the split, and no more.
    one, select, two = rho_parts(budget, split)
    spent = [c for kind, *_, c in data.steps]
    kinds = [kind for kind, *_ in data.steps]
    assert kinds == ["measure"] * 3 + ["select"] * 2 + ["measure"] * 2
    for part, costs in ((one, spent[:3]), (select, spent[3:5]), (two, spent[5:])):
        assert part * Fraction(999, 1000) <= sum(costs) <= part
    # Every measurement's noise is calibrated to the sensitivity k.
    for kind, _, scale, cost in data.steps:
        if kind == "measure":
            assert cost == Fraction(k) ** 2 / (2 * Fraction(scale) ** 2)


def test_mst_split_parts_are_exact_and_checked() -> None:
    rho = Fraction(3, 10)
    assert (Fraction(2, 5), Fraction(1, 5), Fraction(2, 5)) == DEFAULT_SPLIT
    assert rho_parts(rho) == (Fraction(3, 25), Fraction(3, 50), Fraction(3, 25))
    assert rho_parts(rho, PAPER_SPLIT) == (Fraction(1, 10), Fraction(1, 10), Fraction(1, 10))
    assert sum(rho_parts(rho, HALF_QUARTERS)) == rho
    assert rho_parts(rho, HALF_QUARTERS)[0] == Fraction(3, 20)
    for bad in [
        (Fraction(1, 2), Fraction(1, 2), Fraction(0)),
        (Fraction(1, 2), Fraction(1, 4), Fraction(1, 3)),
        (Fraction(1, 2), Fraction(1, 2)),
    ]:
        with pytest.raises(InternalError, match="split"):
            rho_parts(rho, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "parts"),
    [
        ((0.4, 0.2, 0.4), DEFAULT_SPLIT),  # floats as written: exactly 2/5, 1/5, 2/5
        ((1 / 3, 1 / 3, 1 / 3), PAPER_SPLIT),  # float rounding, normalised exactly
        ([Fraction(1, 2), Fraction(1, 4), Fraction(1, 4)], HALF_QUARTERS),
        ((1, 1, 1e-12), None),  # sums to 2: refused below
    ],
)
def test_check_split_gives_exact_parts(
    given: Any, parts: tuple[Fraction, Fraction, Fraction] | None
) -> None:
    if parts is None:
        with pytest.raises(dp.InvalidParameter, match="mst_split"):
            check_split(given, "test")
        return
    got = check_split(given, "test")
    assert got == parts and sum(got) == 1


@pytest.mark.parametrize(
    "bad",
    [
        (0.5, 0.5, 0.0),
        (0.5, 0.6, -0.1),
        (0.5, 0.25),
        (0.25, 0.25, 0.25, 0.25),
        (0.5, 0.25, 0.26),
        (0.5, 0.25, float("nan")),
        (0.5, 0.25, float("inf")),
        (True, 0.0, 0.0),
        ("a", "b", "c"),
        "0.4,0.2,0.4",
        0.4,
    ],
)
def test_bad_mst_split_is_refused_before_anything_is_spent(bad: Any) -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    with pytest.raises(dp.InvalidParameter, match="mst_split"):
        session.synthesize(budget=0.5, method="mst", domains=DOMAINS, mst_split=bad)
    with pytest.raises(dp.InvalidParameter, match="mst_split"):
        session.explain_synthesis(budget=0.5, method="mst", domains=DOMAINS, mst_split=bad)
    assert len(session.history) == 0 and session.spent == dp.ZCDP(0.0)


def test_mst_split_is_for_mst_only() -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    with pytest.raises(dp.InvalidParameter, match="'mst' only"):
        session.synthesize(budget=0.5, method="aim", domains=DOMAINS, mst_split=(0.4, 0.2, 0.4))
    assert len(session.history) == 0


@pytest.mark.parametrize("split", [None, (1 / 3, 1 / 3, 1 / 3), (0.5, 0.25, 0.25)])
def test_explain_states_the_split_and_its_noise(split: Any) -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    text = session.explain_synthesis(
        budget=0.5, method="mst", domains=DOMAINS, max_rows=2, mst_split=split
    )
    parts = DEFAULT_SPLIT if split is None else check_split(split, "test")
    one, select, two = rho_parts(Fraction(0.5), parts)
    d = 3  # x, y and the boolean flag
    assert f"split of rho (1-way, selection, 2-way): {', '.join(map(str, parts))}" in text
    assert f"noise sigma {sigma_for(one / d, 2):.4g} each" in text
    assert f"epsilon {epsilon_for(select / (d - 1)):.4g}" in text
    assert f"two-way marginals, noise sigma {sigma_for(two / (d - 1), 2):.4g}" in text
    assert len(session.history) == 0


def test_a_run_with_the_papers_split_is_charged_the_same() -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    result = session.synthesize(
        budget=0.4, method="mst", domains=DOMAINS, max_rows=2, mst_split=(1 / 3, 1 / 3, 1 / 3)
    )
    assert len(session.history) == 1 and session.spent == dp.ZCDP(0.4)
    assert result.guarantee == dp.ZCDP(0.4)
    # The 1-way marginals were measured with the thirds' noise, the 2-way with the thirds'.
    rho = Fraction(0.4)
    sigmas = {m.columns: m.sigma for m in result.measurements}
    assert sigmas[("x",)] == sigma_for(rho / 3 / 3, 2)
    assert sigmas[next(c for c in sigmas if len(c) == 2)] == sigma_for(rho / 3 / 2, 2)


def test_approx_session_charges_rho_and_states_what_it_is_worth() -> None:
    session = dp.Session.from_pandas(
        people(), privacy_unit="uid", budget=dp.ApproxDP(2.0, 1e-6), selection_delta=0.0, rng=1
    )
    result = session.synthesize(budget="remaining", method="mst", domains=DOMAINS)
    assert session.remaining_approx is not None
    assert any("Worth ApproxDP" in note for note in result.notes)
    assert len(session.history) == 1


# ------------------------------------------------------------------ refusals: nothing spent
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "gan"}, "method"),
        ({"domains": {"y": (0, 99)}}, "ApproxDP Session"),
        ({"domains": {**DOMAINS, "nope": [1]}}, "unknown column"),
        ({"columns": ["uid", "x"]}, "privacy unit"),
        ({"rows": 0}, "rows"),
        ({"max_rows": 0}, "max_rows"),
        ({"workload": [("x", "zz")]}, "workload"),
        ({"method": "mst", "workload": [("x", "y")]}, "'aim' only"),
        ({"budget": 1e-30}, "too small"),
        ({"budget": dp.PureDP(0.5)}, "Gaussian"),
        ({"domains": {"x": ["a", "b"], "y": (5, 5)}}, "low < high"),
        ({"domains": {"x": ["a", "a"], "y": (0, 5)}}, "same value"),
        ({"domains": {"x": [str(i) for i in range(20_000)], "y": (0, 1)}}, "codes"),
    ],
)
def test_refused_before_anything_is_spent(kwargs: dict[str, Any], match: str) -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    arguments: dict[str, Any] = {"budget": 0.5, "domains": DOMAINS, "method": "aim"}
    arguments.update(kwargs)
    with pytest.raises(dp.InvalidParameter, match=match):
        session.synthesize(**arguments)
    assert session.history == [] or len(session.history) == 0
    assert session.spent == dp.ZCDP(0.0)


def test_pure_session_is_refused() -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.PureDP(1.0), rng=1)
    with pytest.raises(dp.InvalidParameter, match="zCDP"):
        session.synthesize(budget=0.5, method="mst", domains=DOMAINS)
    assert len(session.history) == 0


def test_max_rows_without_a_unit_is_refused() -> None:
    session = dp.Session.from_pandas(people(), budget=dp.ZCDP(1.0), rng=1)
    with pytest.raises(dp.InvalidParameter, match="max_rows"):
        session.synthesize(budget=0.5, method="mst", domains=DOMAINS, max_rows=2)


def test_budget_that_does_not_fit_spends_nothing() -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    with pytest.raises(dp.BudgetExceeded):
        session.synthesize(budget=dp.ZCDP(2.0), method="mst", domains=DOMAINS)
    assert len(session.history) == 0


# ------------------------------------------------------------------ failing closed
def test_a_failure_after_the_charge_locks_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpkit.synth._mst as mst

    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("out of memory")

    monkeypatch.setattr(mst, "run_mst", broken)
    with pytest.raises(dp.SessionLocked):
        session.synthesize(budget=0.25, method="mst", domains=DOMAINS)
    with pytest.raises(dp.SessionLocked):
        session.synthesize(budget=0.25, method="mst", domains=DOMAINS)
    assert session.remaining == dp.ZCDP(0.0)


# ------------------------------------------------------------------ the output
def test_output_types_and_bounds() -> None:
    rng = np.random.default_rng(1)
    n = 400
    frame = pd.DataFrame(
        {
            "i": rng.integers(0, 50, n),
            "f": rng.random(n) * 10,
            "d": [dt.date(2024, 1, 1) + dt.timedelta(days=int(v)) for v in rng.integers(0, 300, n)],
            "b": rng.random(n) < 0.5,
            "s": rng.choice(["u", "v"], n),
        }
    )
    frame.loc[::7, "s"] = None
    result = dp.synthesize(
        frame,
        budget=dp.ZCDP(5.0),
        method="mst",
        domains={
            "i": (0, 49),
            "f": (0.0, 10.0),
            "d": (dt.date(2024, 1, 1), dt.date(2024, 12, 31)),
            "s": ["u", "v"],
        },
        rows=123,
        rng=2,
    )
    data = result.data
    assert len(data) == 123
    assert list(data.columns) == ["i", "f", "d", "b", "s"]
    assert str(data["i"].dtype) == "Int64" and data["i"].dropna().between(0, 49).all()
    assert data["f"].dtype == np.float64 and data["f"].dropna().between(0, 10).all()
    assert str(data["d"].dtype).startswith("datetime64")
    days = data["d"].dropna()
    assert (days >= pd.Timestamp("2024-01-01")).all() and (days <= pd.Timestamp("2024-12-31")).all()
    assert str(data["b"].dtype) == "boolean"
    assert set(data["s"].dropna()) <= {"u", "v"}


def test_strong_dependence_is_reproduced_at_a_large_budget() -> None:
    """x determines y's range: a model with the (x, y) pair keeps it (MST measures the
    pair with noise sigma ~ 1 here; the check allows a wide margin)."""
    frame = people(600)
    result = dp.synthesize(
        frame[["x", "y"]], budget=dp.ZCDP(50.0), method="mst", domains=DOMAINS, rng=4
    )
    data = result.data.dropna()
    low = data["y"] < 30
    agree = ((data["x"] == "a") == low).mean()
    assert agree > 0.95, agree
    fidelity = result.fidelity()
    assert set(fidelity["marginal"]) >= {"x", "y", "x x y"}


def test_explain_synthesis_spends_nothing() -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    text = session.explain_synthesis(budget=0.5, method="mst", domains=DOMAINS, max_rows=2)
    assert "MST over 3 columns" in text and "sigma" in text
    assert len(session.history) == 0


def test_multi_table_source() -> None:
    frame = people(100)
    users = pd.DataFrame({"uid": np.arange(100), "group": np.arange(100) % 2})
    session = dp.Session.from_tables(
        {"visits": frame, "users": users},
        privacy_unit={"visits": "uid", "users": "uid"},
        budget=dp.ZCDP(1.0),
        rng=1,
    )
    source = dp.Query.from_table("visits").join("users", on="uid", truncate=1)
    result = session.synthesize(
        budget=0.5,
        method="mst",
        domains={**DOMAINS, "group": [0, 1]},
        columns=["x", "y", "group"],
        source=source,
        max_rows=2,
    )
    assert list(result.data.columns) == ["x", "y", "group"]
    assert len(session.history) == 1


# ------------------------------------------------------------------ domains found privately
def test_domains_found_privately_inside_the_one_charge() -> None:
    session = dp.Session.from_pandas(
        people(300), privacy_unit="uid", budget=dp.ApproxDP(3.0, 1e-6), rng=1
    )
    text = session.explain_synthesis(budget=0.5, method="mst", columns=["x", "y"], max_rows=2)
    assert "found privately" in text
    result = session.synthesize(budget=0.5, method="mst", columns=["x", "y"], max_rows=2)
    root = [r for r in session.history if r.scope == "root"]
    assert len(root) == 1  # the Session is charged once, rho and key-selection delta
    assert root[0].amount[0] > 0 and root[0].amount[1] > 0
    assert set(result.data["x"].dropna()) <= {"a", "b", "c"}
    assert any("found by private key selection" in n for n in result.notes)
    assert any("found privately" in n for n in result.notes)  # y's range
    assert session.remaining_selection_delta < 0.5e-6


def test_numeric_range_found_privately_in_a_zcdp_session() -> None:
    session = dp.Session.from_pandas(people(300), privacy_unit="uid", budget=dp.ZCDP(2.0), rng=1)
    result = session.synthesize(
        budget=1.0, method="mst", columns=["x", "y"], domains={"x": ["a", "b", "c"]}, max_rows=2
    )
    y = result.data["y"].dropna()
    assert y.min() >= 0 and y.max() <= 127  # the occupied power-of-two bins of 0..59
    assert len([r for r in session.history if r.scope == "root"]) == 1


@pytest.mark.parametrize("unit", [None, "uid"])
@pytest.mark.parametrize("zone", [None, "UTC"])
def test_a_timestamp_domain_is_found_privately_inside_the_one_charge(
    unit: str | None, zone: str | None
) -> None:
    """A TIMESTAMP (or TIMESTAMP WITH TIME ZONE) column with no public bounds: its range
    and quantile edges are found on its seconds since 1970 (``epoch``, with the
    fraction) inside the run's charge; the synthetic times keep the column's type, lie in
    the found range, and follow the data's quartiles."""
    rng = np.random.default_rng(6)
    n = 4000
    start = dt.datetime(2023, 3, 1)
    moments = [start + dt.timedelta(seconds=float(v)) for v in rng.gamma(2.0, 20 * 86400.0, n)]
    times = pd.Series(moments, dtype="datetime64[us]")
    if zone is not None:
        times = times.dt.tz_localize(zone)
    frame = pd.DataFrame({"uid": np.arange(n) // 2, "t": times, "x": rng.choice(["a", "b"], n)})
    session = dp.Session.from_pandas(frame, privacy_unit=unit, budget=dp.ApproxDP(4.0, 1e-6), rng=3)
    assert session.columns["t"] == ("TIMESTAMP WITH TIME ZONE" if zone else "TIMESTAMP")
    result = session.synthesize(
        budget=1.0,
        method="mst",
        columns=["t", "x"],
        domains={"x": ["a", "b"]},
        **({"max_rows": 2} if unit else {}),
    )
    assert len([r for r in session.history if r.scope == "root"]) == 1
    coding = next(c for c in result.codings if c.name == "t")
    assert coding.cuts and not coding.whole
    # The range step finds the data's year (2023, year bins) and the outer quantiles
    # narrow it towards the data's span (2023-03-01 to about 2023-10).
    low, high = (pd.Timestamp(int(v), unit="us") for v in (coding.low, coding.high))
    assert pd.Timestamp("2023-01-01") <= low <= pd.Timestamp("2023-03-15")
    assert pd.Timestamp("2023-05-01") <= high <= pd.Timestamp("2024-01-01")
    assert any("t: range [2023-" in note and "private quantiles" in note for note in result.notes)
    synthetic = result.data["t"].dropna()
    assert str(result.data["t"].dtype) == str(frame["t"].dtype)
    naive = synthetic.dt.tz_localize(None) if zone else synthetic
    assert naive.min() >= low and naive.max() <= high
    # Quantile bins: the synthetic quartiles within a few days of the data's.
    real = frame["t"].dt.tz_localize(None) if zone else frame["t"]
    for level in (0.25, 0.5, 0.75):
        gap = abs(naive.quantile(level) - real.quantile(level))
        assert gap < pd.Timedelta(days=6), (level, gap)


def test_a_timestamp_of_a_type_synthesis_cannot_code_is_refused_before_the_charge() -> None:
    moments = pd.Series([dt.datetime(2024, 1, 1) + dt.timedelta(hours=7 * i) for i in range(20)])
    frame = pd.DataFrame({"t": moments.astype("datetime64[ns]"), "x": ["a"] * 20})
    session = dp.Session.from_pandas(frame, budget=dp.ApproxDP(1.0, 1e-6), rng=1)
    assert session.columns["t"] == "TIMESTAMP_NS"
    with pytest.raises(dp.InvalidParameter, match="TIMESTAMP_NS"):
        session.synthesize(budget=0.5, method="mst")
    assert len(session.history) == 0


@pytest.mark.parametrize("unit", [None, "uid"])
def test_a_date_domain_is_found_privately_inside_the_one_charge(unit: str | None) -> None:
    """A DATE column with no public bounds: its range and quantile edges are found on
    its days since 1970 (the canonical number line) inside the run's charge, and the
    synthetic dates lie in the found range, close to the data's."""
    rng = np.random.default_rng(4)
    n = 3000
    start = dt.date(2023, 3, 1)
    frame = pd.DataFrame(
        {
            "uid": np.arange(n) // 2,
            "d": [start + dt.timedelta(days=int(v)) for v in rng.integers(0, 400, n)],
            "x": rng.choice(["a", "b"], n),
        }
    )
    frame.loc[:400, "d"] = dt.date(2023, 12, 25)  # a point mass
    session = dp.Session.from_pandas(frame, privacy_unit=unit, budget=dp.ApproxDP(4.0, 1e-6), rng=3)
    result = session.synthesize(
        budget=1.0,
        method="mst",
        columns=["d", "x"],
        domains={"x": ["a", "b"]},
        **({"max_rows": 2} if unit else {}),
    )
    assert len([r for r in session.history if r.scope == "root"]) == 1
    coding = next(c for c in result.codings if c.name == "d")
    assert coding.cuts and coding.whole
    low, high = (dt.date(1970, 1, 1) + dt.timedelta(days=int(v)) for v in (coding.low, coding.high))
    # The range step finds the data's years (2023-2024, year bins), and the outer
    # quantiles narrow it towards the data (2023-03-01 to 2024-04-04).
    assert dt.date(2023, 1, 1) <= low <= dt.date(2023, 4, 1)
    assert dt.date(2024, 2, 1) <= high <= dt.date(2024, 12, 31)
    assert any("d: range [2023-" in note and "private quantiles" in note for note in result.notes)
    days = pd.to_datetime(result.data["d"].dropna())
    assert str(result.data["d"].dtype).startswith("datetime64")
    assert days.min() >= pd.Timestamp(low) and days.max() <= pd.Timestamp(high)
    # The point mass has a bin of its own and comes back about as often.
    share = (days == pd.Timestamp("2023-12-25")).mean()
    assert 0.08 < share < 0.2


def test_a_date_domain_found_on_spark_is_duckdbs(spark: Any) -> None:
    """The date's days (a derived column in the allowlisted grammar) and its quantile
    bins on Spark: the same releases as on DuckDB with the same generator, so the same
    coding."""
    rng = np.random.default_rng(5)
    n = 600
    frame = pd.DataFrame(
        {
            "uid": np.arange(n) // 2,
            "d": [dt.date(2023, 3, 1) + dt.timedelta(days=int(v)) for v in rng.integers(0, 400, n)],
            "x": rng.choice(["a", "b"], n),
        }
    )
    options: dict[str, Any] = {
        "budget": 1.0,
        "method": "mst",
        "columns": ["d", "x"],
        "domains": {"x": ["a", "b"]},
        "max_rows": 2,
    }
    budget = dp.ApproxDP(4.0, 1e-6)
    on_duckdb = dp.Session.from_pandas(frame, privacy_unit="uid", budget=budget, rng=3)
    on_spark = dp.Session.from_spark(
        spark.createDataFrame(frame), privacy_unit="uid", budget=budget, rng=3
    )
    codings = [s.synthesize(**options).codings[0] for s in (on_duckdb, on_spark)]
    assert codings[0] == codings[1] and codings[0].cuts


@pytest.mark.slow  # 30-55 s: Spark runs each statement in seconds. The default run keeps
# the date's Spark parity (above) and epoch's (tests/engines/test_spark_epoch.py).
def test_a_timestamp_domain_found_on_spark_is_duckdbs(spark: Any) -> None:
    """Timestamps' seconds (``epoch``, which the Spark engine computes as DuckDB does,
    fraction included) and their quantile bins on Spark, a wall-clock column and a
    zoned one: the same releases as on DuckDB with the same generator, so the same
    codings, with Spark's session in another time zone than UTC."""
    rng = np.random.default_rng(7)
    n = 600
    start = dt.datetime(2023, 3, 1)
    times = pd.Series(
        [start + dt.timedelta(microseconds=int(v)) for v in rng.integers(0, 400 * 86400e6, n)],
        dtype="datetime64[us]",
    )
    frame = pd.DataFrame(
        {
            "uid": np.arange(n) // 2,
            "t": times,
            "tz": times.sample(frac=1.0, random_state=1).dt.tz_localize("UTC").to_numpy(),
            "x": rng.choice(["a", "b"], n),
        }
    )
    options: dict[str, Any] = {
        "budget": 1.0,
        "method": "mst",
        "columns": ["t", "tz", "x"],
        "domains": {"x": ["a", "b"]},
        "max_rows": 2,
    }
    budget = dp.ApproxDP(4.0, 1e-6)
    on_duckdb = dp.Session.from_pandas(frame, privacy_unit="uid", budget=budget, rng=3)
    sparked = spark.createDataFrame(frame)
    # A wall-clock column stays one (Spark reads pandas' naive datetimes as instants).
    sparked = sparked.withColumn("t", sparked["t"].cast("timestamp_ntz"))
    on_spark = dp.Session.from_spark(sparked, privacy_unit="uid", budget=budget, rng=3)
    assert on_spark.columns == on_duckdb.columns
    zones = on_spark._engine._spark.conf  # dpkit's own Spark session (a newSession())
    previous = zones.get("spark.sql.session.timeZone")
    zones.set("spark.sql.session.timeZone", "America/New_York")
    try:
        codings = [s.synthesize(**options).codings[:2] for s in (on_duckdb, on_spark)]
    finally:
        zones.set("spark.sql.session.timeZone", previous)
    assert codings[0] == codings[1]
    assert all(coding.cuts for coding in codings[0])


def test_aim_steps_add_up_to_at_most_its_budget_and_anneal() -> None:
    from dpkit.synth._aim import run_aim

    domain = Domain(("a", "b", "c"), (3, 4, 2))
    rng = np.random.default_rng(1)
    a = rng.integers(0, 3, 2000)
    codes = np.stack([a, (a + rng.integers(0, 2, 2000)) % 4, rng.integers(0, 2, 2000)], axis=1)
    budget = Fraction(1, 2)
    data = PrivateMarginals(
        codes, np.ones(2000, dtype=np.int64), domain, sensitivity=2, rho=budget,
        rng=dp.as_random(2),
    )  # fmt: skip
    model, measured = run_aim(data, iterations=50)
    assert data.spent <= budget
    assert data.spent >= budget * Fraction(999, 1000)
    scales = [scale for kind, _, scale, _ in data.steps if kind == "measure"]
    assert len(measured) == len(scales) >= 3
    # Annealing: later measurements are at least as precise as the first ones.
    assert min(scales) < scales[0]
    assert model.total > 0


def test_rows_times_columns_is_bounded_before_the_charge() -> None:
    session = dp.Session.from_pandas(people(), privacy_unit="uid", budget=dp.ZCDP(1.0), rng=1)
    with pytest.raises(dp.InvalidParameter, match="rows x columns"):
        session.synthesize(budget=0.5, method="mst", domains=DOMAINS, rows=10**8)
    assert len(session.history) == 0


def test_decimal_columns_come_back_as_decimals_at_their_scale() -> None:
    from decimal import Decimal

    import pyarrow as pa

    amounts = pa.array([Decimal(f"{i}.25") for i in range(60)], pa.decimal128(10, 2))
    table = pa.table({"amount": amounts, "k": pa.array(["a", "b"] * 30)})
    session = dp.Session.from_arrow(table, budget=dp.ZCDP(2.0), rng=3)
    result = session.synthesize(
        budget=1.0, method="mst", domains={"amount": (0, 60), "k": ["a", "b"]}, rows=50
    )
    values = result.data["amount"].dropna()
    assert len(values) > 0
    assert all(isinstance(v, Decimal) and v.as_tuple().exponent == -2 for v in values)
    assert all(Decimal(0) <= v <= Decimal(60) for v in values)


def test_a_null_typed_column_is_refused_with_a_clear_reason() -> None:
    # pandas gives DuckDB a column of only None as type NULL (public schema).
    import pandas as pd

    frame = pd.DataFrame({"a": [0, 1, 2] * 100, "b": [None] * 300})
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(1.0))
    with pytest.raises(dp.InvalidParameter, match="type NULL"):
        session.synthesize(budget=0.5, method="mst", domains={"a": [0, 1, 2]})
    assert session.history == []  # nothing spent
