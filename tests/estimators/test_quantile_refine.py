"""The refined quantile sampler (dpkit.estimators._refine): exactness, nesting, bounds.

The target distribution is known in closed form on small cases: snap the data to the
fine grid F, compute the exact loss at every fine point (``quantile_loss`` on the
fine histogram) and take ``P(y) ∝ exp(-c loss(y))``. Sampled fine indices must follow
it (chi-square, false-failure alpha = 1e-6) with the default near threshold and with
a forced tiny threshold that sends most of the mass through the far-cell rejection
path (whose use, acceptances and rejections are counted); power: the same samples are
rejected against the PMF at 1.3 epsilon and against the coarse mechanism's PMF mapped
onto F.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit as dp
from dpkit.estimators import _refine
from dpkit.estimators._quantile_loss import loss_lower_bound, quantile_loss, rational_level
from dpkit.random import as_random
from dpkit.selection import ExponentialMechanism
from dpkit.selection._argmax import noisy_argmax
from dpkit.testing import assert_pmf, seeded

ALPHA = 1e-6
BITS = 3
GRID = dp.Grid.linear(0.0, 3.0, size=4)  # cells [0, .5), [.5, 1.5), [1.5, 2.5), [2.5, 3]
DATA = np.array([0.2, 0.55, 0.6, 0.6, 1.2, 1.3, 2.6, 2.9, 7.0])  # 7.0 is clamped


def _coefficient(epsilon: float) -> float:
    return ExponentialMechanism(epsilon=epsilon, sensitivity=1.0).coefficient


def _target(data, q, epsilon, neighbouring, grid=GRID, bits=BITS) -> np.ndarray:
    fine = _refine.fine_snap(grid, np.asarray(data, dtype=float), bits)
    counts = np.bincount(fine, minlength=_refine.fine_size(grid, bits)).astype(np.int64)
    loss = quantile_loss(counts, rational_level(q), neighbouring)
    logits = -_coefficient(epsilon) * loss.astype(float)
    return np.exp(logits - np.logaddexp.reduce(logits))


def _draw(data, q, epsilon, neighbouring, draws, seed, threshold=None, grid=GRID):
    rng = as_random(seed)
    counts = grid.histogram(data)
    values = np.asarray(data, dtype=float)
    c = _coefficient(epsilon)
    return np.array(
        [
            _refine.refined_index(
                grid,
                counts,
                values,
                rational_level(q),
                neighbouring,
                c,
                rng,
                bits=BITS,
                threshold=threshold,
            )
            for _ in range(draws)
        ]
    )


# ------------------------------------------------------------------------ structure


def test_fine_cells_nest_in_coarse_cells():
    values = np.concatenate(
        (np.linspace(-1.0, 4.0, 2001), GRID.cuts, np.nextafter(GRID.cuts, -np.inf), [np.inf])
    )
    fine = _refine.fine_snap(GRID, values, BITS)
    coarse = GRID.snap(values)
    half = 1 << (BITS - 1)
    # Fine index i lies in coarse cell round-half-up(i / 2^b), clipped to the grid.
    assert np.array_equal(np.minimum((fine + half) >> BITS, GRID.size - 1), coarse)
    assert fine.min() == 0 and fine.max() == _refine.fine_size(GRID, BITS) - 1


@pytest.mark.parametrize(
    "grid",
    [dp.Grid.linear(-5.0, 5.0, size=11), dp.Grid.log(1e-3, 1e3, size=7)],
    ids=["linear", "log"],
)
def test_fine_values_monotone_within_bounds_and_coarse_points_kept(grid):
    bits = 4
    index = np.arange(_refine.fine_size(grid, bits))
    values = np.array([_refine.fine_value(grid, int(i), bits) for i in index])
    assert np.all(np.diff(values) > 0)
    assert values[0] == grid.lower and values[-1] < grid.upper
    coarse = np.array([_refine.fine_value(grid, j << bits, bits) for j in range(grid.size - 1)])
    np.testing.assert_allclose(coarse, grid.points[:-1], rtol=1e-12)


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.7, 1.0])
def test_cell_lower_bound_never_exceeds_the_loss(q, neighbouring):
    grid = dp.Grid.linear(0.0, 5.0, size=6)
    rng = np.random.default_rng(3)
    for n in range(0, 12):
        data = rng.uniform(-0.5, 5.5, size=n).round(1)
        fine = _refine.fine_snap(grid, data, BITS)
        counts = np.bincount(fine, minlength=_refine.fine_size(grid, BITS)).astype(np.int64)
        loss = quantile_loss(counts, rational_level(q), neighbouring)
        coarse = grid.histogram(data)
        below = np.cumsum(coarse) - coarse
        bound = loss_lower_bound(below, below + coarse, n, rational_level(q), neighbouring)
        cell = np.minimum((np.arange(loss.size) + (1 << (BITS - 1))) >> BITS, grid.size - 1)
        assert np.all(bound[cell] <= loss)
        # The bound is attained somewhere in each cell that holds the minimum loss.
        assert bound.min() == loss.min() or n == 0


# --------------------------------------------------------------------- exactness


# The sampler has two paths, near cells (default threshold) and far cells with
# rejection (threshold 0); the neighbouring relation only changes the loss it is given.
# The default run keeps one case per path, between them both relations; the other two
# combinations run under ``--runslow``.
@pytest.mark.parametrize(
    ("q", "neighbouring", "threshold"),
    [
        pytest.param(0.5, "add_remove", None, id="median", marks=pytest.mark.slow),
        pytest.param(0.3, "replace", None, id="q0.3-replace"),
        # most mass proposed by far cells, then rejection
        pytest.param(0.5, "add_remove", 0, id="median-far-cells"),
        pytest.param(0.9, "replace", 0, id="q0.9-replace-far-cells", marks=pytest.mark.slow),
    ],
)
def test_samples_follow_the_exact_target(q, neighbouring, threshold, monkeypatch):
    calls = {"far": 0, "rejected": 0}
    far_loss, accept = _refine._far_loss, _refine._accept

    def counting_far_loss(*args, **kwargs):
        calls["far"] += 1
        return far_loss(*args, **kwargs)

    def counting_accept(*args, **kwargs):
        result = accept(*args, **kwargs)
        calls["rejected"] += not result
        return result

    monkeypatch.setattr(_refine, "_far_loss", counting_far_loss)
    monkeypatch.setattr(_refine, "_accept", counting_accept)
    epsilon = 1.0
    samples = _draw(DATA, q, epsilon, neighbouring, 5000, seed=17, threshold=threshold)
    if threshold is not None:
        assert calls["far"] > 500 and calls["rejected"] > 100
    exact = _target(DATA, q, epsilon, neighbouring)
    assert_pmf(samples, dict(enumerate(exact)), alpha=ALPHA)
    # Power: a 30% larger epsilon is rejected by the same samples.
    with pytest.raises(AssertionError):
        wrong = _target(DATA, q, 1.3 * epsilon, neighbouring)
        assert_pmf(samples, dict(enumerate(wrong)), alpha=ALPHA)


def test_power_against_dropping_the_rejection_step(monkeypatch):
    # A planted bug: far proposals accepted without the exact-loss test.
    monkeypatch.setattr(_refine, "_accept", lambda excess, c, rng: True)
    samples = _draw(DATA, 0.5, 1.0, "add_remove", 6000, seed=23, threshold=0)
    with pytest.raises(AssertionError):
        assert_pmf(samples, dict(enumerate(_target(DATA, 0.5, 1.0, "add_remove"))), alpha=ALPHA)


def test_empty_data_is_uniform_over_the_fine_grid():
    samples = _draw(np.empty(0), 0.5, 1.0, "add_remove", 4000, seed=29)
    size = _refine.fine_size(GRID, BITS)
    assert_pmf(samples, {i: 1.0 / size for i in range(size)}, alpha=ALPHA)


def test_argmax_with_multiplicities_is_exact():
    scores = np.array([0.0, -1.0, -2.5, 0.3, -0.7])
    multiplicity = np.array([1, 7, 40, 1, 3], dtype=np.int64)
    c = 0.8
    rng = seeded(31)
    draws = np.array(
        [noisy_argmax("gumbel", scores, c, rng, multiplicity=multiplicity) for _ in range(20_000)]
    )
    weights = multiplicity * np.exp(c * scores)
    assert_pmf(draws, dict(enumerate(weights / weights.sum())), alpha=ALPHA)
    unweighted = np.exp(c * scores)
    with pytest.raises(AssertionError):
        assert_pmf(draws, dict(enumerate(unweighted / unweighted.sum())), alpha=ALPHA)


def test_argmax_multiplicity_refinement_path():
    # Exact ties in the float layer force the decimal refinement: with one candidate
    # of score s and multiplicity 2 against two of the same score, the weights are
    # 2 : 1 : 1 exactly.
    scores = np.zeros(3)
    multiplicity = np.array([2, 1, 1], dtype=np.int64)
    rng = seeded(37)
    draws = np.array(
        [noisy_argmax("gumbel", scores, 1.0, rng, multiplicity=multiplicity) for _ in range(8000)]
    )
    assert_pmf(draws, {0: 0.5, 1: 0.25, 2: 0.25}, alpha=ALPHA)


# --------------------------------------------------------------------- public API


def test_refined_release_is_continuous_and_reports_the_fine_radius():
    data = np.random.default_rng(5).normal(size=20_000)
    release = dp.median(data, bounds=(-10.0, 10.0), epsilon=1.0, rng=seeded(41))
    assert release.mechanism == "RefinedInverseSensitivityQuantile"
    c = _coefficient(1.0)
    size = (100_001 - 1) << _refine.FINE_BITS
    assert release.error.rank_radius == math.floor(math.log(size / 0.05) / c * (1 + 1e-12))
    coarse = dp.median(data, bounds=(-10.0, 10.0), epsilon=1.0, refine=False, rng=seeded(41))
    assert coarse.mechanism == "InverseSensitivityQuantile"
    assert coarse.value in dp.Grid.linear(-10.0, 10.0, size=100_001).points


def test_symlog_grid_is_released_on_its_points():
    grid = dp.Grid.log(-100.0, 100.0, min_magnitude=0.1, size=30)
    release = dp.median([1.0, 2.0, 3.0], grid=grid, epsilon=1.0, rng=seeded(43))
    assert release.value in grid.points


def test_refine_must_be_a_bool():
    with pytest.raises(dp.errors.InvalidParameter):
        dp.median([1.0], bounds=(0.0, 2.0), epsilon=1.0, refine="yes")  # type: ignore[arg-type]
