"""Tree selection (Steinke's binary-tree algorithm): shape, queries, validation, events."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting.events import (
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    RepeatedEvent,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.selection import select_by_tree
from dpkit.selection.tree import TreeSelection, build_tree, tree_depth, walk
from dpkit.testing import check_mechanism, seeded

SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 31, 33, 100, 1000, 1025]


def _intervals(n: int) -> list[list[tuple[int, int]]]:
    """The tree by its definition: per level, the intervals [lo, hi) of the nodes
    (a leaf reached early is carried down unchanged)."""
    levels = [[(0, n)]]
    while any(hi - lo > 1 for lo, hi in levels[-1]):
        below = []
        for lo, hi in levels[-1]:
            if hi - lo == 1:
                below.append((lo, hi))
            else:
                middle = lo + math.ceil((hi - lo) / 2)
                below += [(lo, middle), (middle, hi)]
        levels.append(below)
    return levels


def _leaf_depths(n: int) -> list[int]:
    """Number of queries on the path to each leaf (its depth in the un-padded tree)."""
    depths = [0] * n

    def visit(lo: int, hi: int, depth: int) -> None:
        if hi - lo == 1:
            depths[lo] = depth
            return
        middle = lo + (hi - lo + 1) // 2
        visit(lo, middle, depth + 1)
        visit(middle, hi, depth + 1)

    visit(0, n, 0)
    return depths


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"n={n}")
def test_tree_shape_and_minima(n: int) -> None:
    rng = np.random.default_rng(n)
    losses = rng.uniform(-5, 5, n)
    tree = build_tree(losses)
    levels = _intervals(n)
    assert tree.depth == tree_depth(n) == math.ceil(math.log2(n)) == len(levels) - 1
    for depth, nodes in enumerate(levels):
        # every node is non-empty, halves are ceil/floor, minima are the subtree's
        assert all(hi > lo for lo, hi in nodes)
        expected = [losses[lo:hi].min() for lo, hi in nodes]
        np.testing.assert_array_equal(tree.minima[depth], expected)
        if depth < tree.depth:
            for j, (lo, hi) in enumerate(nodes):
                assert tree.split[depth][j] == (hi - lo >= 2)
                child = levels[depth + 1][tree.first_child[depth][j]]
                assert child[0] == lo and child[1] - child[0] == math.ceil((hi - lo) / 2)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 9, 17, 100], ids=lambda n: f"n={n}")
def test_query_count_is_the_path_length_at_most_k(n: int) -> None:
    depths = _leaf_depths(n)
    k = tree_depth(n)
    assert max(depths) == k and min(depths) >= k - 1
    losses = np.zeros(n)
    tree = build_tree(losses)
    for target in range(n):
        # A scripted oracle that steers the walk to ``target`` and counts its queries.
        path = []
        lo, hi = 0, n
        while hi - lo > 1:
            middle = lo + (hi - lo + 1) // 2
            right = target >= middle
            path.append(right)
            lo, hi = (middle, hi) if right else (lo, middle)
        asked: list[int] = []

        def oracle(q: np.ndarray, path: list[bool] = path, asked: list[int] = asked) -> np.ndarray:
            assert q.size == 1
            step = len(asked)
            asked.append(1)
            return np.array([1.0 if path[step] else -1.0])

        assert walk(tree, 1, oracle)[0] == target
        assert len(asked) == depths[target] <= k


@pytest.mark.parametrize("n", [2, 3, 7, 16, 33], ids=lambda n: f"n={n}")
def test_every_query_has_sensitivity_one(n: int) -> None:
    rng = np.random.default_rng(100 + n)
    for trial in range(200):
        losses = rng.uniform(0, 10, n) * (10.0 ** rng.integers(-3, 4))
        step = rng.uniform(-1, 1, n) if trial % 2 else rng.choice([-1.0, 1.0], n)
        mine, theirs = build_tree(losses), build_tree(losses + step)
        for level in range(mine.depth):
            split = mine.split[level]
            first = mine.first_child[level][split]
            queries = []
            for tree in (mine, theirs):
                below = tree.minima[level + 1]
                queries.append(0.5 * below[first] - 0.5 * below[first + 1])
            assert np.all(np.abs(queries[0] - queries[1]) <= 1.0 + 1e-12)


def test_query_sensitivity_is_attained() -> None:
    # the bound is tight: min(left) up by 1, min(right) down by 1 moves q by exactly 1
    losses = np.array([3.0, 3.0, 3.0, 3.0])
    tree, moved = build_tree(losses), build_tree(losses + np.array([1.0, 1.0, -1.0, -1.0]))
    q = 0.5 * tree.minima[1][0] - 0.5 * tree.minima[1][1]
    q_moved = 0.5 * moved.minima[1][0] - 0.5 * moved.minima[1][1]
    assert q_moved - q == 1.0


@pytest.mark.parametrize("n", [2, 5, 8, 1000], ids=lambda n: f"n={n}")
@pytest.mark.parametrize("rho", [0.5, 0.01, 3.7], ids=lambda r: f"rho={r}")
def test_gaussian_calibration_and_event(n: int, rho: float) -> None:
    mechanism = TreeSelection(n, rho=rho)
    k = tree_depth(n)
    assert mechanism.oracle == "gaussian" and mechanism.depth == k
    assert mechanism.scale**2 == pytest.approx(k / (2 * rho), rel=1e-12)
    event = mechanism.event
    assert event == RepeatedEvent(GaussianEvent(noise_multiplier=mechanism.scale), count=k)
    assert zcdp_rho(event) <= rho  # conservative rounding: never above the target
    assert zcdp_rho(event) == pytest.approx(rho, rel=1e-12)
    assert mechanism.guarantee == dp.ZCDP(rho)
    assert mechanism.expected_excess_bound() >= 0.34 * mechanism.scale * k


@pytest.mark.parametrize("n", [2, 5, 8, 1000], ids=lambda n: f"n={n}")
@pytest.mark.parametrize("epsilon", [1.0, 0.1, 3.0], ids=lambda e: f"eps={e}")
def test_laplace_calibration_and_event(n: int, epsilon: float) -> None:
    mechanism = TreeSelection(n, epsilon=epsilon)
    k = tree_depth(n)
    assert mechanism.oracle == "laplace"
    assert mechanism.scale == pytest.approx(k / epsilon, rel=1e-12)
    assert mechanism.scale >= k / epsilon
    event = mechanism.event
    assert event == RepeatedEvent(LaplaceEvent(noise_multiplier=mechanism.scale), count=k)
    assert pure_epsilon(event) <= epsilon
    assert pure_epsilon(event) == pytest.approx(epsilon, rel=1e-12)
    assert mechanism.guarantee == dp.PureDP(epsilon)
    assert mechanism.expected_excess_bound() >= k * mechanism.scale / math.e


@pytest.mark.parametrize("kwargs", [{"rho": 0.5}, {"epsilon": 1.0}], ids=["gaussian", "laplace"])
def test_contract(kwargs: dict[str, float]) -> None:
    check_mechanism(TreeSelection(6, **kwargs), [3.0, 1.0, 4.0, 1.5, 9.0, 2.6])


@pytest.mark.parametrize("kwargs", [{"rho": 0.5}, {"epsilon": 1.0}], ids=["gaussian", "laplace"])
def test_release(kwargs: dict[str, float]) -> None:
    losses = [5.0, 3.0, 0.0, 4.0, 6.0]
    release = select_by_tree(losses, rng=seeded(3), **kwargs)
    again = select_by_tree(losses, rng=seeded(3), **kwargs)
    assert isinstance(release.value, int) and 0 <= release.value < 5
    assert release.value == again.value
    assert release.error is None and release.secure is False
    assert release.mechanism == "TreeSelection"
    mechanism = TreeSelection(5, **kwargs)
    assert release.event == mechanism.event and release.guarantee == mechanism.guarantee
    assert dp.select_by_tree is select_by_tree


def test_one_candidate_asks_nothing() -> None:
    release = select_by_tree([7.0], rho=0.5, rng=seeded(0))
    assert release.value == 0 and release.event == NoOpEvent()
    assert release.guarantee == dp.ZCDP(0.5)  # stated, and trivially met
    assert TreeSelection(1, epsilon=1.0).expected_excess_bound() == 0.0
    tree = build_tree(np.array([7.0]))

    def oracle(q: np.ndarray) -> np.ndarray:
        raise AssertionError("no query may be asked")

    assert walk(tree, 3, oracle).tolist() == [0, 0, 0]


def test_unreachable_candidates_are_never_selected() -> None:
    losses = np.array([np.inf, 2.0, np.inf, np.inf, 0.5, np.inf, np.inf, 3.0, np.inf])
    mechanism = TreeSelection(losses.size, epsilon=0.5)
    chosen = mechanism.sample_many(losses, 5000, rng=seeded(1))
    assert set(np.unique(chosen)) <= {1, 4, 7}
    probabilities = mechanism.distribution(losses)
    assert np.all(probabilities[np.isinf(losses)] == 0.0)
    assert probabilities.sum() == pytest.approx(1.0)
    # a side that is all +inf is decided without a query (nothing random)
    only = np.full(9, np.inf)
    only[5] = 1.0
    assert set(mechanism.sample_many(only, 100, rng=seeded(2)).tolist()) == {5}


def test_oracle_inference_and_mismatch() -> None:
    assert TreeSelection(4, rho=1.0).oracle == "gaussian"
    assert TreeSelection(4, epsilon=1.0).oracle == "laplace"
    assert TreeSelection(4, rho=1.0, oracle="gaussian").oracle == "gaussian"
    with pytest.raises(dp.InvalidParameter, match="'gaussian' oracle"):
        TreeSelection(4, epsilon=1.0, oracle="gaussian")
    with pytest.raises(dp.InvalidParameter, match="'laplace' oracle"):
        TreeSelection(4, rho=1.0, oracle="laplace")
    with pytest.raises(dp.InvalidParameter, match="rho"):
        TreeSelection(4, rho=1.0, epsilon=1.0)
    with pytest.raises(dp.InvalidParameter, match="rho"):
        TreeSelection(4)
    with pytest.raises(dp.InvalidParameter, match="oracle"):
        TreeSelection(4, rho=1.0, oracle="gumbel")


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, True, "1"], ids=repr)
def test_rejects_bad_privacy_parameters(bad: object) -> None:
    with pytest.raises(dp.InvalidParameter, match="rho"):
        select_by_tree([1.0, 2.0], rho=bad)  # type: ignore[arg-type]
    with pytest.raises(dp.InvalidParameter, match="epsilon"):
        select_by_tree([1.0, 2.0], epsilon=bad)  # type: ignore[arg-type]


def test_rejects_tiny_rho() -> None:
    with pytest.raises(dp.InvalidParameter, match="noise scale"):
        TreeSelection(8, rho=1e-30)


@pytest.mark.parametrize(
    ("losses", "match"),
    [
        ([], "non-empty 1-D"),
        ([[1.0, 2.0]], "1-D"),
        (5.0, "1-D"),
        ([1.0, math.nan], "NaN or -inf"),
        ([1.0, -math.inf], "NaN or -inf"),
        ([math.inf, math.inf], "every loss is"),
        (["a", "b"], "numbers"),
        ([True, False], "numbers"),
    ],
    ids=["empty", "2-D", "scalar", "nan", "-inf", "all-inf", "strings", "bools"],
)
def test_rejects_bad_losses(losses: object, match: str) -> None:
    with pytest.raises(dp.DataError, match=match):
        select_by_tree(losses, rho=0.5, rng=seeded(0))  # type: ignore[arg-type]


def test_release_checks_the_number_of_candidates() -> None:
    with pytest.raises(dp.DataError, match="expected 4 losses"):
        TreeSelection(4, rho=0.5).release([1.0, 2.0, 3.0], rng=seeded(0))


def test_large_candidate_sets_are_linear_time() -> None:
    losses = np.random.default_rng(0).uniform(0, 100, 2**17)
    losses[12345] = -50.0  # a clear winner far below a sea of ties
    release = select_by_tree(losses, rho=0.5, rng=seeded(4))
    assert release.value == 12345
    assert release.event == TreeSelection(2**17, rho=0.5).event
