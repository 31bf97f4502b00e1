"""Grid construction and the snapping rule (exact agreement with searchsorted on the cuts)."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit as dp
from dpkit.errors import DataError, InvalidParameter
from dpkit.estimators.grid import MAX_GRID_SIZE

GRIDS = {
    "linear": lambda: dp.Grid.linear(-3.0, 7.0, size=1001),
    "linear-step": lambda: dp.Grid.linear(0.0, 1.0, step=0.003),
    "log-wide": lambda: dp.Grid.log(1e-6, 1e9, ratio=1.01),
    "symlog": lambda: dp.Grid.log(-50.0, 1e6, min_magnitude=1e-3, size=300),
    "symlog-nonneg": lambda: dp.Grid.log(0.0, 1e6, min_magnitude=1e-3, size=300),
}


def _adversarial_values(grid: dp.Grid) -> np.ndarray:
    rng = np.random.default_rng(0)
    wide = rng.normal(size=20_000) * 10 ** rng.uniform(-8, 10, 20_000)
    cuts = grid.cuts
    return np.concatenate(
        [
            wide,
            cuts,
            np.nextafter(cuts, -np.inf),
            np.nextafter(cuts, np.inf),
            grid.points,
            [np.inf, -np.inf, 0.0, -0.0, np.nan, grid.lower, grid.upper],
        ]
    )


@pytest.mark.parametrize("make", GRIDS.values(), ids=GRIDS.keys())
def test_snap_is_the_cut_rule(make):
    grid = make()
    values = _adversarial_values(grid)
    expected = np.searchsorted(grid.cuts, values, side="right")
    expected[np.isnan(values)] = -1
    np.testing.assert_array_equal(grid.snap(values), expected)
    counts = grid.histogram(values)
    np.testing.assert_array_equal(counts, np.bincount(expected[expected >= 0], minlength=grid.size))


@pytest.mark.parametrize("make", GRIDS.values(), ids=GRIDS.keys())
def test_points_sorted_and_cuts_between(make):
    grid = make()
    assert grid.size == grid.points.size == grid.cuts.size + 1 == len(grid)
    assert np.all(grid.points[:-1] < grid.cuts) and np.all(grid.cuts < grid.points[1:])
    assert grid.points[0] >= grid.lower and grid.points[-1] <= grid.upper
    with pytest.raises(ValueError):
        grid.points[0] = 1.0  # read-only


def test_linear_size_and_step():
    grid = dp.Grid.linear(0.0, 10.0, size=11)
    np.testing.assert_array_equal(grid.points, np.arange(11.0))
    assert (grid.kind, grid.lower, grid.upper) == ("linear", 0.0, 10.0)
    stepped = dp.Grid.linear(0.0, 1.0, step=0.3)  # step used <= step asked
    assert stepped.size == 5 and stepped.points[-1] == 1.0


def test_log_endpoints_and_ratio():
    grid = dp.Grid.log(1e-6, 1e9, ratio=1.01)
    assert grid.points[0] == 1e-6 and grid.points[-1] == 1e9
    assert np.max(grid.points[1:] / grid.points[:-1]) <= 1.01 * (1 + 1e-12)


def test_symlog_has_zero_and_small_values_snap_to_it():
    grid = dp.Grid.log(-10.0, 10.0, min_magnitude=0.1, size=5)
    zero = int(np.flatnonzero(grid.points == 0.0)[0])
    assert grid.snap([0.0, 0.01, -0.01]).tolist() == [zero, zero, zero]
    assert grid.points[0] == -10.0 and grid.points[-1] == 10.0


def test_histogram_drops_nan_clamps_inf_accepts_ints():
    grid = dp.Grid.linear(0.0, 10.0, size=11)
    counts = grid.histogram([np.nan, np.inf, -np.inf, 100.0, -5.0, 3.2])
    assert counts.sum() == 5 and counts[0] == 2 and counts[-1] == 2 and counts[3] == 1
    np.testing.assert_array_equal(grid.histogram(np.arange(11)), np.ones(11, dtype=np.int64))
    np.testing.assert_array_equal(grid.histogram([]), np.zeros(11, dtype=np.int64))


BAD = {
    "reversed": lambda: dp.Grid.linear(1.0, 0.0, size=3),
    "equal": lambda: dp.Grid.linear(1.0, 1.0, size=3),
    "inf-bound": lambda: dp.Grid.linear(0.0, np.inf, size=3),
    "nan-bound": lambda: dp.Grid.log(np.nan, 1.0, size=3),
    "size-and-step": lambda: dp.Grid.linear(0.0, 1.0, size=3, step=0.1),
    "neither": lambda: dp.Grid.linear(0.0, 1.0),
    "size-1": lambda: dp.Grid.linear(0.0, 1.0, size=1),
    "ratio-1": lambda: dp.Grid.log(1.0, 2.0, ratio=1.0),
    "log-nonpositive": lambda: dp.Grid.log(0.0, 1.0, size=3),
    "min-magnitude-positive": lambda: dp.Grid.log(1.0, 2.0, size=3, min_magnitude=0.5),
    "min-magnitude-too-big": lambda: dp.Grid.log(-1.0, 1.0, size=3, min_magnitude=5.0),
}


@pytest.mark.parametrize("make", BAD.values(), ids=BAD.keys())
def test_bad_parameters(make):
    with pytest.raises(InvalidParameter):
        make()


@pytest.mark.parametrize(
    "make",
    [
        lambda: dp.Grid.linear(0.0, 1.0, size=MAX_GRID_SIZE + 1),
        lambda: dp.Grid.linear(0.0, 1e9, step=1e-3),
        lambda: dp.Grid.log(1e-300, 1e300, ratio=1.0 + 1e-9),
    ],
    ids=["size", "step", "ratio"],
)
def test_too_large_grid_says_how_to_coarsen(make):
    with pytest.raises(InvalidParameter, match="Coarsen"):
        make()


@pytest.mark.parametrize(
    "values", [["a", "b"], [True, False], [1 + 2j]], ids=["str", "bool", "complex"]
)
def test_non_numeric_values(values):
    with pytest.raises(DataError):
        dp.Grid.linear(0.0, 1.0, size=3).histogram(values)
