"""Tests of the Private-PGM engine: junction trees, estimation, marginals, sampling.

The statistical checks are deterministic bounds or bounds with a stated false-failure
rate (1e-6, union over every cell checked); none is tuned to the seeds.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpkit.errors import InvalidParameter
from dpkit.synth._domain import Domain, Measurement
from dpkit.synth._graphical import GraphicalModel, estimate, junction_tree_cells
from dpkit.synth._junction import JunctionTree, build_junction_tree

FALSE_FAILURE = 1e-6

# A tree-structured truth over five columns: a -> b -> c -> d and b -> e.
NAMES = ("a", "b", "c", "d", "e")
SIZES = (2, 3, 4, 3, 2)
EDGES = (("a", "b"), ("b", "c"), ("c", "d"), ("b", "e"))


def check_junction_tree(tree: JunctionTree, cliques: list[tuple[int, ...]]) -> None:
    """Every clique is covered, the tree spans, and running intersection holds."""
    k = len(tree.cliques)
    assert sorted(tree.order) == list(range(k))
    assert sum(p < 0 for p in tree.parent) == 1
    for c in cliques:
        assert any(set(c) <= set(m) for m in tree.cliques)
    for a, b in itertools.combinations(tree.cliques, 2):
        assert not set(a) <= set(b) and not set(b) <= set(a)  # maximal
    for v in range(len(tree.sizes)):
        holders = {i for i, c in enumerate(tree.cliques) if v in c}
        assert holders
        # Connected: exactly one holder has its parent outside the holders.
        tops = [i for i in holders if tree.parent[i] not in holders]
        assert len(tops) == 1, (v, holders)


def test_cycle_is_triangulated() -> None:
    domain = Domain(("a", "b", "c", "d"), (2, 3, 4, 5))
    cycle = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]
    tree = build_junction_tree(domain, cycle)
    check_junction_tree(tree, [(0, 1), (1, 2), (2, 3), (0, 3)])
    # The cheaper chord is a-c: cliques abc (24 cells) and acd (40), not abd + bcd (90).
    assert sorted(tree.cliques) == [(0, 1, 2), (0, 2, 3)]
    assert junction_tree_cells(domain, cycle) == 2 * 3 * 4 + 2 * 4 * 5


def test_chordal_graph_keeps_its_cliques() -> None:
    domain = Domain(tuple("abcdef"), (2, 3, 4, 5, 6, 7))
    tree_edges = [("a", "b"), ("b", "c"), ("b", "d"), ("d", "e")]
    tree = build_junction_tree(domain, tree_edges)
    assert sorted(tree.cliques) == [(0, 1), (1, 2), (1, 3), (3, 4), (5,)]
    assert junction_tree_cells(domain, tree_edges) == 6 + 12 + 15 + 30 + 7
    assert junction_tree_cells(domain, []) == sum(domain.sizes)


@pytest.mark.parametrize("seed", range(20), ids=lambda s: f"seed{s}")
def test_random_graphs_give_valid_junction_trees(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    domain = Domain(tuple(f"x{i}" for i in range(n)), tuple(int(s) for s in rng.integers(2, 6, n)))
    cliques = [
        tuple(sorted(rng.choice(n, size=int(rng.integers(1, 4)), replace=False).tolist()))
        for _ in range(int(rng.integers(1, 2 * n)))
    ]
    names = [[domain.names[v] for v in c] for c in cliques]
    tree = build_junction_tree(domain, names)
    check_junction_tree(tree, cliques)
    assert tree == build_junction_tree(domain, names)  # deterministic


def tree_truth(rng: np.random.Generator, concentration: float) -> np.ndarray:
    """Joint distribution of the tree model (axes in NAMES order)."""
    p_a = rng.dirichlet(np.full(2, concentration))
    p_b = rng.dirichlet(np.full(3, concentration), size=2)
    p_c = rng.dirichlet(np.full(4, concentration), size=3)
    p_d = rng.dirichlet(np.full(3, concentration), size=4)
    p_e = rng.dirichlet(np.full(2, concentration), size=3)
    return np.einsum("a,ab,bc,cd,be->abcde", p_a, p_b, p_c, p_d, p_e)


def marginal_of(joint: np.ndarray, columns: tuple[str, ...]) -> np.ndarray:
    idx = [NAMES.index(c) for c in columns]
    summed = joint.sum(axis=tuple(i for i in range(joint.ndim) if i not in idx))
    return np.transpose(summed, np.argsort(np.argsort(idx)))


def tree_measurements(counts: np.ndarray, sigma: float = 1.0) -> list[Measurement]:
    cols = [(c,) for c in NAMES] + [e[::-1] for e in EDGES]  # some out of domain order
    return [Measurement(c, marginal_of(counts, c), sigma) for c in cols]


DOMAIN = Domain(NAMES, SIZES)


def test_exact_recovery_of_measured_and_unmeasured_marginals() -> None:
    # Noise-free measurements of a tree model's exact expected counts: the fit is that
    # model, so every marginal, measured or not, spanning cliques or not, matches.
    joint = tree_truth(np.random.default_rng(1), concentration=5.0) * 10_000
    model = estimate(DOMAIN, tree_measurements(joint), iterations=3000)
    assert model.total == pytest.approx(10_000)
    assert model.loss < 1e-12
    for k in (1, 2, 3, 5):
        for cols in itertools.permutations(NAMES, k) if k < 3 else itertools.combinations(NAMES, k):
            got = model.marginal(cols)
            assert got.shape == DOMAIN.shape(cols)
            np.testing.assert_allclose(got, marginal_of(joint, cols), rtol=1e-6, atol=1e-6)
    assert model.marginal(()) == pytest.approx(10_000)


def test_exact_recovery_from_sampled_data() -> None:
    # A data set drawn from the tree: its measured marginals are fitted to 1e-6, and a
    # 3-way marginal across two cliques is the tree's n_ab n_bc / n_b.
    rng = np.random.default_rng(2)
    joint = tree_truth(rng, concentration=5.0)
    draws = rng.choice(joint.size, size=200_000, p=joint.ravel())
    counts = np.bincount(draws, minlength=joint.size).reshape(joint.shape).astype(float)
    assert counts.sum((2, 3, 4)).min() > 0 and counts.sum((0, 3, 4)).min() > 0
    ms = tree_measurements(counts)
    model = estimate(DOMAIN, ms, iterations=3000)
    for m in ms:
        np.testing.assert_allclose(model.marginal(m.columns), m.values, rtol=1e-6)
    n_ab, n_bc, n_b = marginal_of(counts, ("a", "b")), marginal_of(counts, ("b", "c")), None
    n_b = marginal_of(counts, ("b",))
    expected = n_ab[:, :, None] * n_bc[None, :, :] / n_b[None, :, None]
    np.testing.assert_allclose(model.marginal(("a", "b", "c")), expected, rtol=1e-6)


def weighted_error(
    ms: list[Measurement], fitted: list[np.ndarray], truth: list[np.ndarray]
) -> float:
    return sum(
        float(np.sum((f - t) ** 2)) / m.sigma**2 for m, f, t in zip(ms, fitted, truth, strict=True)
    )


def test_noisy_fit_is_closer_to_the_truth_than_the_noise() -> None:
    # With the true total, the fit is the weighted least-squares projection of the
    # measurements onto a convex set that holds the true marginals, and a projection
    # onto a convex set never moves a point away from a member of the set.
    rng = np.random.default_rng(3)
    counts = tree_truth(rng, concentration=1.0) * 5_000
    ms = [
        Measurement(m.columns, m.values + rng.normal(0, 20.0, m.values.shape), 20.0)
        for m in tree_measurements(counts)
    ]
    model = estimate(DOMAIN, ms, total=5_000.0, iterations=2000)
    truth = [marginal_of(counts, m.columns) for m in ms]
    fitted = [model.marginal(m.columns) for m in ms]
    noise = weighted_error(ms, [m.values for m in ms], truth)
    assert weighted_error(ms, fitted, truth) < noise
    assert model.loss < sum(
        0.5 * weighted_error([m], [m.values], [t]) for m, t in zip(ms, truth, strict=True)
    )


def test_total_is_the_inverse_variance_weighted_mean() -> None:
    domain = Domain(("a", "b"), (2, 2))
    ms = [
        Measurement(("a",), np.array([60.0, 40.0]), 1.0),  # total 100, variance 2
        Measurement(("a", "b"), np.full((2, 2), 30.0), 2.0),  # total 120, variance 16
    ]
    model = estimate(domain, ms, iterations=10)
    w = np.array([1 / 2, 1 / 16])
    assert model.total == pytest.approx(float(np.dot(w, [100.0, 120.0]) / w.sum()))
    assert estimate(domain, [], iterations=5).total == 1.0
    assert estimate(domain, ms, total=50.0, iterations=5).total == 50.0


def test_unmeasured_columns_are_uniform_and_independent() -> None:
    domain = Domain(("a", "b", "z"), (2, 3, 4))
    model = estimate(domain, [Measurement(("a", "b"), np.arange(6.0).reshape(2, 3) + 1, 1.0)])
    assert ("z",) in model.cliques
    np.testing.assert_allclose(model.marginal(("z",)), np.full(4, 21 / 4))
    np.testing.assert_allclose(
        model.marginal(("z", "a")), np.outer(np.full(4, 0.25), model.marginal(("a",)))
    )


def test_warm_start_reaches_the_same_fit_in_fewer_iterations() -> None:
    rng = np.random.default_rng(4)
    counts = tree_truth(rng, concentration=2.0) * 20_000
    noisy = [
        Measurement(m.columns, m.values + rng.normal(0, 5.0, m.values.shape), 5.0)
        for m in tree_measurements(counts)
    ]
    first = estimate(DOMAIN, noisy)
    extra = Measurement(("a", "c", "e"), marginal_of(counts, ("a", "c", "e")) + 1.0, 5.0)
    cold = estimate(DOMAIN, [*noisy, extra])
    warm = estimate(DOMAIN, [*noisy, extra], warm_start=first)
    assert warm.iterations < cold.iterations
    assert warm.loss == pytest.approx(cold.loss, rel=1e-3)
    for cols in (("a", "c", "e"), ("b", "d")):
        np.testing.assert_allclose(warm.marginal(cols), cold.marginal(cols), rtol=1e-2, atol=0.5)
    again = estimate(DOMAIN, noisy, warm_start=first)
    assert again.iterations <= 10
    assert again.loss <= first.loss * (1 + 1e-9)


def test_estimate_is_deterministic() -> None:
    ms = tree_measurements(tree_truth(np.random.default_rng(5), 1.0) * 1000 + 1.5)
    a, b = estimate(DOMAIN, ms, iterations=50), estimate(DOMAIN, ms, iterations=50)
    assert a.loss == b.loss
    np.testing.assert_array_equal(a.marginal(("a", "d")), b.marginal(("a", "d")))


def fitted_tree_model() -> GraphicalModel:
    joint = tree_truth(np.random.default_rng(6), concentration=1.0) * 1000
    return estimate(DOMAIN, tree_measurements(joint), iterations=200)


def test_sample_clique_marginals_within_the_rounding_bound() -> None:
    # Deterministic bound (false-failure rate 0): each step's counts are within one of
    # n_S(s) q(x | s), so a clique's L1 error is at most the cells of the cliques on
    # its path to the root, at most all the tree's cells.
    model = fitted_tree_model()
    rows = 100_000
    data = model.sample(rows, np.random.default_rng(7))
    assert data.shape == (rows, len(NAMES)) and data.dtype == np.int64
    assert (data >= 0).all() and (data < np.array(SIZES)).all()
    bound = junction_tree_cells(DOMAIN, EDGES)
    for clique in model.cliques:
        for k in range(1, len(clique) + 1):
            for cols in itertools.combinations(clique, k):
                idx = [NAMES.index(c) for c in cols]
                flat = np.ravel_multi_index(tuple(data[:, i] for i in idx), DOMAIN.shape(cols))
                got = np.bincount(flat, minlength=DOMAIN.cells(cols)).reshape(DOMAIN.shape(cols))
                want = model.marginal(cols) * rows / model.total
                assert np.abs(got - want).sum() <= bound


def test_sample_across_cliques_mixes_at_random() -> None:
    # Given the sample's own (a, b) and (b, c) counts, each (a, b, c) count is
    # hypergeometric (the rows of value b get their c values in uniformly random
    # order), independent over b, so n(a, c) - sum_b n_ab n_bc / n_b is sub-Gaussian
    # with variance proxy n_a / 4 (Hoeffding 1963, Thm 4): two-sided bound at
    # FALSE_FAILURE / cells.
    model = fitted_tree_model()
    data = model.sample(50_000, np.random.default_rng(8))
    a, b, c = data[:, 0], data[:, 1], data[:, 2]
    n_ab = np.bincount(a * 3 + b, minlength=6).reshape(2, 3).astype(float)
    n_bc = np.bincount(b * 4 + c, minlength=12).reshape(3, 4).astype(float)
    n_b = n_ab.sum(axis=0)
    n_ac = np.bincount(a * 4 + c, minlength=8).reshape(2, 4)
    expected = (n_ab[:, :, None] * n_bc[None, :, :] / n_b[None, :, None]).sum(axis=1)
    t = np.sqrt(n_ab.sum(axis=1, keepdims=True) * math.log(2 * n_ac.size / FALSE_FAILURE) / 2)
    assert (np.abs(n_ac - expected) <= t).all()
    # ... and the marginal itself is the model's, to that bound plus the rounding one.
    want = model.marginal(("a", "c")) * len(data) / model.total
    assert (np.abs(n_ac - want) <= t + junction_tree_cells(DOMAIN, EDGES)).all()


def test_sample_is_exact_in_size_and_reproducible() -> None:
    model = fitted_tree_model()
    for rows in (0, 1, 7, 1000):
        assert model.sample(rows, np.random.default_rng(0)).shape == (rows, 5)
    np.testing.assert_array_equal(
        model.sample(500, np.random.default_rng(9)), model.sample(500, np.random.default_rng(9))
    )


def test_rounding_is_unbiased() -> None:
    # Systematic sampling of the remainders: P(extra row) = frac exactly, so the mean
    # count over R runs is n q. Counts are within one of n q, so Hoeffding's bound on
    # the mean of R runs is sqrt(ln(2 K / FALSE_FAILURE) / (2 R)).
    from dpkit.synth._sampling import rounded_counts

    rng = np.random.default_rng(10)
    q = np.array([[0.13, 0.29, 0.05, 0.53], [0.25, 0.25, 0.25, 0.25]])
    n = np.array([7, 10])
    runs = np.stack([rounded_counts(n, q, rng) for _ in range(5_000)])
    assert (runs.sum(axis=2) == n).all()
    assert (np.abs(runs - n[:, None] * q) < 1).all()
    t = math.sqrt(math.log(2 * q.size / FALSE_FAILURE) / (2 * len(runs)))
    assert (np.abs(runs.mean(axis=0) - n[:, None] * q) <= t).all()


BAD = [
    ("unknown column", lambda: [Measurement(("zz",), np.ones(2), 1.0)], "no column"),
    ("wrong shape", lambda: [Measurement(("a",), np.ones(3), 1.0)], "shape"),
    ("NaN value", lambda: [Measurement(("a",), np.array([1.0, np.nan]), 1.0)], "finite"),
    ("inf value", lambda: [Measurement(("a",), np.array([1.0, np.inf]), 1.0)], "finite"),
    ("sigma zero", lambda: [Measurement(("a",), np.ones(2), 0.0)], "sigma"),
    ("sigma negative", lambda: [Measurement(("a",), np.ones(2), -1.0)], "sigma"),
    ("sigma NaN", lambda: [Measurement(("a",), np.ones(2), math.nan)], "sigma"),
    ("sigma inf", lambda: [Measurement(("a",), np.ones(2), math.inf)], "sigma"),
    ("repeated column", lambda: [Measurement(("a", "a"), np.ones((2, 2)), 1.0)], "distinct"),
    ("not a measurement", lambda: [("a", np.ones(2), 1.0)], "Measurement"),
]


@pytest.mark.parametrize(("measurements", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_measurements(measurements: object, message: str) -> None:
    with pytest.raises(InvalidParameter, match=message):
        estimate(DOMAIN, measurements())  # type: ignore[operator]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"total": 0.0}, "total"),
        ({"total": math.nan}, "total"),
        ({"iterations": -1}, "iterations"),
        ({"cliques": [("a", "nope")]}, "no column"),
        ({"warm_start": "model"}, "warm_start"),
        ({"tolerance": -1.0}, "tolerance"),
    ],
    ids=["total zero", "total NaN", "iterations", "clique column", "warm start", "tolerance"],
)
def test_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    ms = [Measurement(("a",), np.ones(2), 1.0)]
    with pytest.raises(InvalidParameter, match=message):
        estimate(DOMAIN, ms, **kwargs)  # type: ignore[arg-type]


def test_warm_start_over_another_domain_is_refused() -> None:
    other = estimate(Domain(("a",), (2,)), [], iterations=1)
    with pytest.raises(InvalidParameter, match="warm_start"):
        estimate(DOMAIN, [], warm_start=other)


def test_bad_queries() -> None:
    model = fitted_tree_model()
    with pytest.raises(InvalidParameter, match="no column"):
        model.marginal(("a", "zz"))
    with pytest.raises(InvalidParameter, match="distinct"):
        model.marginal(("a", "a"))
    with pytest.raises(InvalidParameter, match="string"):
        model.marginal("ab")
    with pytest.raises(InvalidParameter, match="rows"):
        model.sample(-1, np.random.default_rng(0))
    with pytest.raises(InvalidParameter, match="rng"):
        model.sample(3, 0)  # type: ignore[arg-type]


def test_negative_noisy_counts_are_fitted() -> None:
    domain = Domain(("a", "b"), (3, 2))
    y = np.array([[-5.0, 10.0], [3.0, -1.0], [50.0, 20.0]])
    model = estimate(domain, [Measurement(("a", "b"), y, 2.0)], iterations=2000)
    fit = model.marginal(("a", "b"))
    assert (fit >= 0).all()
    assert fit.sum() == pytest.approx(model.total)
    # Least squares over the scaled simplex: the negative cells go to (nearly) zero.
    assert fit[0, 0] < 1.0 and fit[1, 1] < 1.0


def test_warm_start_from_a_model_with_other_cliques() -> None:
    # The old cliques (a triangulated cycle) do not fit the new tree: their potentials
    # are projected onto it, a start point only; the fit is the cold one.
    domain = Domain(("a", "b", "c", "d"), (2, 3, 4, 5))
    rng = np.random.default_rng(11)
    joint = rng.dirichlet(np.full(120, 3.0)).reshape(2, 3, 4, 5) * 1000
    cycle = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]
    axes = {c: tuple(i for i in range(4) if domain.names[i] not in c) for c in cycle}
    old = estimate(domain, [Measurement(c, joint.sum(axes[c]), 1.0) for c in cycle])
    assert ("a", "b", "c") in old.cliques
    chain = [Measurement(c, joint.sum(axes[c]), 1.0) for c in cycle[:2]]
    warm = estimate(domain, chain, warm_start=old, iterations=3000)
    cold = estimate(domain, chain, iterations=3000)
    assert ("a", "b", "c") not in warm.cliques
    assert warm.loss < 1e-9 and cold.loss < 1e-9
    np.testing.assert_allclose(warm.marginal(("a", "c")), cold.marginal(("a", "c")), rtol=1e-6)
