"""Quantile loss against brute force, the quantile API, bad input, the generic mechanism."""

from __future__ import annotations

import bisect
import itertools
import math
from collections import deque
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest

import dpkit as dp
from dpkit.errors import DataError, InvalidParameter
from dpkit.estimators._quantile_loss import quantile_loss, rational_level
from dpkit.estimators.quantiles import quantile_from_counts
from dpkit.testing import seeded

# ------------------------------------------------------------------ brute force
# A dataset is a vector of counts over a grid. Its q-quantiles are the grid points y
# with z_(lo) <= y <= z_(hi), lo = max(1, ceil(q n)), hi = min(n, floor(q n) + 1), found
# by walking the counts (no closed form). The loss at y is the shortest path of
# single-record moves (add or remove one record; or move one record, for replace) to a
# dataset having y among its q-quantiles.


def order_statistic_index(cumulative: Sequence[int], rank: int) -> int:
    """The grid index of the ``rank``-th smallest record: the first index whose
    cumulative count reaches ``rank`` (``cumulative`` lists the running totals)."""
    return bisect.bisect_left(cumulative, rank)


def quantile_ranks(q: Fraction, n: int) -> tuple[int, int]:
    return max(1, math.ceil(q * n)), min(n, math.floor(q * n) + 1)


def brute_force_losses(
    counts: tuple[int, ...], levels: Sequence[Fraction], neighbouring: str
) -> list[list[int]]:
    """The loss vector at each level, from one breadth-first search.

    The search visits datasets in order of distance whatever the level; only what is
    recorded at each dataset depends on it. So one search serves all the levels, and
    gives for each exactly what a search for that level alone gives.
    """
    size = len(counts)
    best: list[list[int | None]] = [[None] * size for _ in levels]
    missing = [size] * len(levels)  # per level: grid points whose loss is not yet known
    # The ranks of each level by number of records (Fraction arithmetic, once per n
    # rather than once per dataset visited).
    ranks: dict[int, list[tuple[int, int]]] = {}
    seen = {counts}
    queue = deque([(counts, 0)])
    while queue and any(missing):
        state, dist = queue.popleft()
        n = sum(state)
        if n > 0:  # the empty dataset has no quantile
            if n not in ranks:
                ranks[n] = [quantile_ranks(q, n) for q in levels]
            cumulative = list(itertools.accumulate(state))
            for k, (lo, hi) in enumerate(ranks[n]):
                if not missing[k]:
                    continue  # this level is done
                first = order_statistic_index(cumulative, lo)
                last = order_statistic_index(cumulative, hi)
                for index in range(first, last + 1):  # the q-quantiles of this dataset
                    if best[k][index] is None:
                        best[k][index] = dist
                        missing[k] -= 1
        for nxt in _moves(state, neighbouring):
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, dist + 1))
    return [[int(b) if b is not None else -1 for b in level_best] for level_best in best]


def brute_force_loss(counts: tuple[int, ...], q: Fraction, neighbouring: str) -> list[int]:
    return brute_force_losses(counts, [q], neighbouring)[0]


def _moves(state: tuple[int, ...], neighbouring: str) -> list[tuple[int, ...]]:
    out = []
    size = len(state)
    if neighbouring == "add_remove":
        for i in range(size):
            up = list(state)
            up[i] += 1
            out.append(tuple(up))
            if state[i] > 0:
                down = list(state)
                down[i] -= 1
                out.append(tuple(down))
    else:
        for i in range(size):
            if state[i] == 0:
                continue
            for j in range(size):
                if j != i:
                    moved = list(state)
                    moved[i] -= 1
                    moved[j] += 1
                    out.append(tuple(moved))
    return out


LEVELS = [0.0, 0.1, 0.25, 1 / 3, 0.37, 0.5, 0.6, 2 / 3, 0.75, 0.9, 1.0]


def _all_datasets(grid_size: int, max_n: int):
    for n in range(max_n + 1):
        for combo in itertools.combinations_with_replacement(range(grid_size), n):
            yield tuple(
                int(c) for c in np.bincount(np.array(combo, dtype=int), minlength=grid_size)
            )


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
def test_loss_matches_breadth_first_search(neighbouring):
    # Every dataset of at most 6 records on a 4-point grid, 11 levels: the closed form
    # equals the shortest path to a dataset whose quantile is y.
    checked = 0
    levels = [rational_level(q) for q in LEVELS]
    for counts in _all_datasets(4, 6):
        if neighbouring == "replace" and sum(counts) == 0:
            continue  # no replacement neighbours
        # One search for the 11 levels (the same losses as one search per level).
        searched = brute_force_losses(counts, [Fraction(*level) for level in levels], neighbouring)
        for q, level, expected in zip(LEVELS, levels, searched, strict=True):
            got = quantile_loss(np.array(counts, dtype=np.int64), level, neighbouring)
            assert got.tolist() == expected, (counts, q)
            checked += 1
    assert checked > 2000


def test_loss_matches_search_on_a_wider_grid():
    rng = np.random.default_rng(5)
    for _ in range(60):
        counts = tuple(int(c) for c in rng.multinomial(int(rng.integers(0, 9)), [0.2] * 5))
        q = float(rng.uniform())
        level = rational_level(q)
        for neighbouring in ("add_remove", "replace"):
            if neighbouring == "replace" and sum(counts) == 0:
                continue
            expected = brute_force_loss(counts, Fraction(*level), neighbouring)
            got = quantile_loss(np.array(counts, dtype=np.int64), level, neighbouring).tolist()
            assert got == expected, (counts, q, neighbouring)


def test_loss_zero_exactly_at_the_quantile():
    counts = np.array([3, 0, 4, 1, 2], dtype=np.int64)  # n = 10, median m = 5 -> index 2
    for neighbouring in ("add_remove", "replace"):
        loss = quantile_loss(counts, rational_level(0.5), neighbouring)
        assert np.flatnonzero(loss == 0).tolist() == [2]


def test_loss_zero_on_the_whole_central_gap():
    # n = 4 records at indices 0, 2, 5, 7: every point from x_(2) (index 2) to x_(3)
    # (index 5), the gap included, is a median, for either neighbouring relation; one
    # step outside costs two added/removed records or one replaced record.
    counts = np.array([1, 0, 1, 0, 0, 1, 0, 1], dtype=np.int64)
    level = rational_level(0.5)
    assert quantile_loss(counts, level, "add_remove").tolist() == [2, 2, 0, 0, 0, 0, 2, 2]
    assert quantile_loss(counts, level, "replace").tolist() == [1, 1, 0, 0, 0, 0, 1, 1]


@pytest.mark.parametrize(
    ("q", "expected"),
    [(0.5, (1, 2)), (0.1, (1, 10)), (1 / 3, (1, 3)), (0.999999, (999999, 1000000))],
)
def test_rational_level(q, expected):
    assert rational_level(q) == expected


def test_quantile_value_and_error():
    data = np.arange(101.0)
    release = dp.quantile(
        data, 0.25, bounds=(0, 100), epsilon=5.0, grid_size=101, refine=False, rng=seeded(1)
    )
    assert release.value in np.arange(101.0)
    assert abs(release.value - 25.0) <= release.error.rank_radius
    beta = 0.05
    assert release.error == dp.mechanisms.RankErrorBound(
        rank_radius=math.floor((2 / 5.0) * math.log(101 / beta)), confidence=0.95
    ) or release.error.rank_radius == math.floor((2 / 5.0) * math.log(101 / beta) * (1 + 1e-12))
    assert release.guarantee == dp.PureDP(5.0)
    assert release.mechanism == "InverseSensitivityQuantile"
    assert release.secure is False


def test_median_is_quantile_half():
    data = np.random.default_rng(0).normal(size=500)
    a = dp.median(data, bounds=(-5, 5), epsilon=1.0, rng=seeded(4))
    b = dp.quantile(data, 0.5, bounds=(-5, 5), epsilon=1.0, rng=seeded(4))
    assert a == b


def test_nan_dropped_and_inf_clamped():
    base = np.array([1.0, 2.0, 3.0, 10.0, 0.0])
    with_nan = np.array([1.0, np.nan, 2.0, 3.0, np.nan, 10.0, 0.0])
    with_inf = np.array([1.0, 2.0, 3.0, np.inf, -np.inf])
    kwargs = {"bounds": (0.0, 10.0), "epsilon": 1.0, "grid_size": 11}
    assert dp.median(with_nan, **kwargs, rng=seeded(2)) == dp.median(base, **kwargs, rng=seeded(2))
    assert dp.median(with_inf, **kwargs, rng=seeded(3)) == dp.median(base, **kwargs, rng=seeded(3))
    grid = dp.Grid.linear(0.0, 10.0, size=11)
    np.testing.assert_array_equal(grid.histogram(with_inf), grid.histogram(base))


def test_empty_data_gets_a_private_answer():
    # Every grid point has loss 1 for the empty dataset: the release is uniform.
    counts = np.zeros(7, dtype=np.int64)
    assert quantile_loss(counts, rational_level(0.5), "add_remove").tolist() == [1] * 7
    release = dp.median([], bounds=(0, 6), epsilon=1.0, grid_size=7, refine=False, rng=seeded(0))
    assert release.value in range(7)
    # Refined, it is uniform over the fine grid (tests/estimators/test_quantile_refine.py).
    assert 0.0 <= dp.median([], bounds=(0, 6), epsilon=1.0, rng=seeded(0)).value <= 6.0


def test_grid_choices():
    data = np.random.default_rng(1).lognormal(size=300)
    log = dp.median(
        data, bounds=(1e-6, 1e9), epsilon=1.0, grid="log", grid_size=2001, rng=seeded(0)
    )
    assert 0.2 < log.value < 5.0
    grid = dp.Grid.log(-1e3, 1e9, min_magnitude=1e-3, ratio=1.01)
    sym = dp.median(data, grid=grid, epsilon=1.0, rng=seeded(0))
    assert sym.value in grid.points
    same = dp.median(data, grid=grid, bounds=(-1e3, 1e9), epsilon=1.0, rng=seeded(0))
    assert same == sym


def test_quantiles_monotone_in_q_and_budget():
    data = np.random.default_rng(2).normal(size=50)
    qs = [0.9, 0.1, 0.5, 0.5, 0.2]
    for seed in range(20):
        release = dp.quantiles(
            data, qs, bounds=(-4, 4), epsilon=0.3, grid_size=801, rng=seeded(seed)
        )
        order = np.argsort(qs, kind="stable")
        by_q = [release.value[i] for i in order]
        assert by_q == sorted(by_q)
    assert release.guarantee == dp.PureDP(0.3)
    assert release.event.count == 5 and release.event.event.epsilon * 5 <= 0.3
    assert release.error.confidence == 0.95


BAD_PARAMETERS = {
    "q-negative": ({"q": -0.1}, InvalidParameter),
    "q-above-one": ({"q": 1.5}, InvalidParameter),
    "q-nan": ({"q": float("nan")}, InvalidParameter),
    "bounds-reversed": ({"bounds": (1.0, 0.0)}, InvalidParameter),
    "bounds-inf": ({"bounds": (0.0, float("inf"))}, InvalidParameter),
    "bounds-missing": ({"bounds": None}, InvalidParameter),
    "bounds-not-pair": ({"bounds": 3.0}, InvalidParameter),
    "epsilon-zero": ({"epsilon": 0.0}, InvalidParameter),
    "epsilon-inf": ({"epsilon": float("inf")}, InvalidParameter),
    "neighbouring": ({"neighbouring": "swap"}, InvalidParameter),
    "confidence": ({"confidence": 1.0}, InvalidParameter),
    "grid-name": ({"grid": "cubic"}, InvalidParameter),
    "log-grid-with-zero": ({"grid": "log"}, InvalidParameter),
    "grid-too-large": ({"grid_size": 10**9}, InvalidParameter),
    "strings": ({"data": ["a", "b"]}, DataError),
    "objects": ({"data": [object()]}, DataError),
}


@pytest.mark.parametrize(("change", "error"), BAD_PARAMETERS.values(), ids=BAD_PARAMETERS.keys())
def test_bad_input(change, error):
    kwargs = {"data": [1.0, 2.0, 3.0], "q": 0.5, "bounds": (0.0, 10.0), "epsilon": 1.0}
    kwargs.update(change)
    with pytest.raises(error) as info:
        dp.quantile(kwargs.pop("data"), kwargs.pop("q"), **kwargs)
    assert "2.0" not in str(info.value) or "epsilon" in str(info.value)


def test_bad_counts():
    grid = dp.Grid.linear(0.0, 1.0, size=3)
    with pytest.raises(DataError):
        quantile_from_counts([1, 2], grid, 0.5, epsilon=1.0)
    with pytest.raises(DataError):
        quantile_from_counts([1, -2, 0], grid, 0.5, epsilon=1.0)
    with pytest.raises(DataError):
        quantile_from_counts([1.5, 2, 0], grid, 0.5, epsilon=1.0)
    with pytest.raises(InvalidParameter):
        quantile_from_counts([1, 2, 0], "grid", 0.5, epsilon=1.0)
    with pytest.raises(InvalidParameter):
        dp.quantiles([1.0], [], bounds=(0, 1), epsilon=1.0)


def test_quantile_from_counts_matches_quantile():
    data = np.random.default_rng(3).uniform(0, 1, 1000)
    grid = dp.Grid.linear(0.0, 1.0, size=501)
    a = quantile_from_counts(grid.histogram(data), grid, 0.9, epsilon=1.0, rng=seeded(9))
    b = dp.quantile(data, 0.9, grid=grid, epsilon=1.0, refine=False, rng=seeded(9))
    assert a == b


# ------------------------------------------------------------------ generic mechanism


def _median_loss(x, ys):
    x = np.sort(np.asarray(x, dtype=float))
    below = np.searchsorted(x, ys, side="left")
    at_or_below = np.searchsorted(x, ys, side="right")
    m = max(1, math.ceil(x.size / 2))
    return np.maximum(0, np.maximum(below - m + 1, m - at_or_below))


def test_inverse_sensitivity_generic():
    release = dp.inverse_sensitivity(
        [1, 2, 2, 9], list(range(11)), _median_loss, epsilon=1.0, rng=seeded(0)
    )
    assert release.value in range(11)
    assert release.event == dp.accounting.events.ExponentialMechanismEvent(1.0)
    assert release.error is None and release.mechanism == "InverseSensitivity"


def test_infinite_loss_is_never_chosen():
    def loss(_x, ys):
        return np.where(np.asarray(ys) % 2 == 0, np.inf, 0.0)

    for seed in range(30):
        assert (
            dp.inverse_sensitivity(None, np.arange(10), loss, epsilon=0.1, rng=seeded(seed)).value
            % 2
            == 1
        )


@pytest.mark.parametrize(
    "loss",
    [
        lambda _x, ys: np.full(len(ys), np.inf),
        lambda _x, ys: np.zeros(len(ys) + 1),
        lambda _x, ys: -np.ones(len(ys)),
        lambda _x, ys: np.full(len(ys), np.nan),
    ],
    ids=["all-inf", "wrong-length", "negative", "nan"],
)
def test_bad_loss(loss):
    with pytest.raises(InvalidParameter):
        dp.inverse_sensitivity(None, [1, 2, 3], loss, epsilon=1.0)


def test_bad_candidates():
    with pytest.raises(InvalidParameter):
        dp.inverse_sensitivity(None, [], _median_loss, epsilon=1.0)
