"""dp.count/sum/mean/var/std/histogram(2d): input checks, NaN/inf, empty data, shapes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.testing import seeded

MOMENTS: list[Callable[..., Any]] = [dp.sum, dp.mean, dp.var, dp.std]
IDS = ["sum", "mean", "var", "std"]


def untouched(random: dp.Random) -> bool:
    """True when ``random`` drew nothing since it was made from seed 0."""
    return random.uint64(4).tolist() == seeded(0).uint64(4).tolist()


BAD_BOUNDS = [None, (1.0, 0.0), (0.0, 0.0), (math.nan, 1.0), (0.0, math.inf), (0.0,), "01", 5]


@pytest.mark.parametrize("tool", MOMENTS, ids=IDS)
@pytest.mark.parametrize("bounds", BAD_BOUNDS, ids=[repr(b) for b in BAD_BOUNDS])
def test_bad_or_missing_bounds_are_refused_before_any_draw(tool: Any, bounds: Any) -> None:
    random = seeded(0)
    with pytest.raises(dp.InvalidParameter, match="bounds"):
        tool([1.0, 2.0], bounds=bounds, epsilon=1.0, rng=random)
    assert untouched(random)


def test_missing_bounds_message_says_what_to_do() -> None:
    with pytest.raises(dp.InvalidParameter, match="never derives bounds from the data"):
        dp.mean([1.0, 2.0], epsilon=1.0)


BAD_BUDGETS: list[dict[str, Any]] = [
    {},
    {"epsilon": 1.0, "rho": 0.5},
    {"epsilon": math.inf},
    {"epsilon": math.nan},
    {"epsilon": -1.0},
    {"epsilon": 0.0},
    {"epsilon": "1"},
    {"epsilon": True},
    {"rho": -0.1},
]


@pytest.mark.parametrize("tool", [*MOMENTS, dp.count], ids=[*IDS, "count"])
@pytest.mark.parametrize("budget", BAD_BUDGETS, ids=[repr(b) for b in BAD_BUDGETS])
def test_bad_budgets_are_refused_before_any_draw(tool: Any, budget: dict[str, Any]) -> None:
    random = seeded(0)
    kwargs = {} if tool is dp.count else {"bounds": (0.0, 1.0)}
    with pytest.raises(dp.InvalidParameter):
        tool([0.5], **kwargs, **budget, rng=random)
    assert untouched(random)


@pytest.mark.parametrize(
    "kwargs",
    [{"neighbouring": "bounded"}, {"confidence": 1.0}, {"confidence": 0.0}, {"confidence": "x"}],
    ids=["neighbouring", "confidence-1", "confidence-0", "confidence-str"],
)
@pytest.mark.parametrize("tool", MOMENTS, ids=IDS)
def test_bad_options_are_refused(tool: Any, kwargs: dict[str, Any]) -> None:
    random = seeded(0)
    with pytest.raises(dp.InvalidParameter):
        tool([0.5], bounds=(0, 1), epsilon=1.0, **kwargs, rng=random)
    assert untouched(random)


@pytest.mark.parametrize("tool", [*MOMENTS, dp.count], ids=[*IDS, "count"])
@pytest.mark.parametrize(
    "data",
    [np.zeros((3, 2)), [[1.0, 2.0]], pd.DataFrame({"a": [1.0], "b": [2.0]}), 3.0, "abc", None],
    ids=["2d", "nested", "dataframe", "scalar", "string", "none"],
)
def test_data_that_is_not_one_dimensional_is_refused(tool: Any, data: Any) -> None:
    random = seeded(0)
    kwargs = {} if tool is dp.count else {"bounds": (0.0, 1.0)}
    with pytest.raises(dp.InvalidParameter, match="1-D"):
        tool(data, **kwargs, epsilon=1.0, rng=random)
    assert untouched(random)


@pytest.mark.parametrize("tool", MOMENTS, ids=IDS)
@pytest.mark.parametrize(
    "data", [["a", "b"], [True, False], np.array([1, "x"], dtype=object)], ids=str
)
def test_non_numeric_data_is_a_data_error(tool: Any, data: Any) -> None:
    with pytest.raises(dp.DataError, match="numbers"):
        tool(data, bounds=(0, 1), epsilon=1.0, rng=seeded(0))


def test_count_under_replace_is_refused_the_count_is_public() -> None:
    with pytest.raises(dp.InvalidParameter, match="public"):
        dp.count([1, 2], epsilon=1.0, neighbouring="replace")


@pytest.mark.filterwarnings("ignore::dpkit.WeakGuaranteeWarning")
def test_count_drops_missing_values_of_any_dtype() -> None:
    big = 30.0  # P(noise != 0) = 2e^-30: the exact count shows through
    assert dp.count([1.0, np.nan, 3.0], epsilon=big, rng=seeded(1)).value == 2
    assert dp.count(["a", None, "b", "c"], epsilon=big, rng=seeded(1)).value == 3
    series = pd.Series([1, None, 3], dtype="Int64")
    assert dp.count(series, epsilon=big, rng=seeded(1)).value == 2
    assert dp.count(pd.Series(["x", None]), epsilon=big, rng=seeded(1)).value == 1


@pytest.mark.filterwarnings("ignore::dpkit.WeakGuaranteeWarning")
def test_nan_dropped_and_infinities_clamped() -> None:
    # epsilon 10 (above 10 warns): noise standard deviations below 0.15 / n, so the
    # tolerances (>= 7 standard deviations) tell each wrong handling of NaN/inf apart.
    big = 10.0
    data = [1.0, np.nan, np.inf, -np.inf, 0.5]
    # sum of clamped values in [0, 1]: 1 + 1 + 0 + 0.5 (dropping inf would give 1.5)
    assert dp.sum(data, bounds=(0, 1), epsilon=big, rng=seeded(1)).value == pytest.approx(
        2.5, abs=0.5
    )
    # mean 0.625 (dropping the infinities: 0.75)
    assert dp.mean(data, bounds=(0, 1), epsilon=big, rng=seeded(1)).value == pytest.approx(
        0.625, abs=0.06
    )
    expected_var = float(np.var([1.0, 1.0, 0.0, 0.5]))
    for relation in ("add_remove", "replace"):
        got = dp.var(data, bounds=(0, 1), epsilon=big, neighbouring=relation, rng=seeded(2))
        assert got.value == pytest.approx(expected_var, abs=0.06)
    # pandas nullable integers: NA is dropped like NaN
    series = pd.Series([1, None, 3], dtype="Int64")
    assert dp.mean(series, bounds=(0, 4), epsilon=big, rng=seeded(3)).value == pytest.approx(
        2.0, abs=0.5
    )


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("tool", [dp.mean, dp.var, dp.std], ids=["mean", "var", "std"])
def test_empty_data_gets_a_private_answer_with_the_public_range(tool: Any, relation: str) -> None:
    release = tool([], bounds=(2.0, 6.0), epsilon=1.0, neighbouring=relation, rng=seeded(4))
    assert release.error.uninformative is True
    low, high = release.error.interval(release.value)
    public = {dp.mean: (2.0, 6.0), dp.var: (0.0, 4.0), dp.std: (0.0, 2.0)}[tool]
    assert (low, high) == public and public[0] <= release.value <= public[1]
    assert release.guarantee == dp.PureDP(1.0)


def test_empty_count_sum_and_histogram() -> None:
    assert dp.count([], epsilon=1.0, rng=seeded(5)).value >= 0
    assert dp.sum([], bounds=(0, 10), epsilon=1.0, rng=seeded(5)).value >= 0
    counts, edges = dp.histogram([], bins=3, range=(0, 1), epsilon=1.0, rng=seeded(5)).value
    assert counts.shape == (3,) and (counts >= 0).all() and edges.tolist() == [0, 1 / 3, 2 / 3, 1]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bins": 4},  # no range
        {"bins": [0.0, 1.0], "range": (0, 1)},  # edges and range
        {"bins": [1.0, 0.0]},
        {"bins": [0.0, np.nan, 1.0]},
        {"bins": [0.0]},
        {"bins": 0, "range": (0, 1)},
        {"bins": True, "range": (0, 1)},
        {"bins": 3, "range": (1, 0)},
    ],
    ids=["no-range", "both", "decreasing", "nan-edge", "one-edge", "zero", "bool", "reversed"],
)
def test_histogram_needs_public_bins(kwargs: dict[str, Any]) -> None:
    random = seeded(0)
    with pytest.raises(dp.InvalidParameter):
        dp.histogram([0.5], **kwargs, epsilon=1.0, rng=random)
    assert untouched(random)


@pytest.mark.filterwarnings("ignore::dpkit.WeakGuaranteeWarning")
def test_histograms_match_numpy_with_tiny_noise() -> None:
    data = np.array([0.1, 0.2, 0.2, 0.9, 1.0, np.nan, -3.0, np.inf])
    counts, _ = dp.histogram(data, bins=4, range=(0, 1), epsilon=30.0, rng=seeded(6)).value
    expected, _ = np.histogram(data[np.isfinite(data)], bins=4, range=(0, 1))
    assert counts.tolist() == expected.tolist()
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.5, 0.5, 0.5])
    release = dp.histogram2d(
        data, y, bins=(2, [0.0, 0.5, 1.0]), range=((0, 1), None), epsilon=30.0, rng=seeded(7)
    )
    cells, ex, ey = release.value
    keep = np.isfinite(data)
    expected2, _, _ = np.histogram2d(data[keep], y[keep], bins=[ex, ey])
    assert cells.tolist() == expected2.tolist()
    with pytest.raises(dp.InvalidParameter, match="same length"):
        dp.histogram2d([0.1], [0.1, 0.2], bins=2, range=((0, 1), (0, 1)), epsilon=1.0)


def test_release_shape_and_accounting() -> None:
    release = dp.mean([1.0, 2.0], bounds=(0, 4), epsilon=1.0, rng=seeded(8))
    assert isinstance(release, dp.Release) and isinstance(release.error, dp.ErrorBound)
    assert release.secure is False and release.mechanism == "DiscreteLaplace"
    accountant = dp.accounting.PureAccountant()
    accountant.compose(release.event)
    assert accountant.get_epsilon(0.0) <= 1.0
    zcdp = dp.var([1.0, 2.0], bounds=(0, 4), rho=0.5, rng=seeded(9))
    assert zcdp.guarantee == dp.ZCDP(0.5) and zcdp.mechanism == "DiscreteGaussian"
