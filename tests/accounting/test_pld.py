"""Unit tests of the PLD accountant against closed forms.

Every check is two-sided: the PLD answer must never be below the exact value (it is a
certified upper bound) and must be within 0.1% of it (it is tight).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting import (
    ApproxEvent,
    ComposedEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureEvent,
    RandomizedResponseEvent,
    ZCDPEvent,
    gaussian_delta,
    gaussian_epsilon,
)
from dpkit.accounting._math.pld.convolve import convolve
from dpkit.accounting._math.pld.discretize import from_atoms, from_interval_cdfs
from dpkit.accounting._math.pld.hockey import hockey_stick, smallest_epsilon
from dpkit.accounting._math.pld.mechanisms import GaussianNoise, sampled_cdfs
from dpkit.accounting._math.pld.pmf import LossPmf, truncate
from dpkit.accounting._math.pld.power import self_compose
from dpkit.accounting.pld import PLDAccountant
from dpkit.errors import InvalidParameter, UnsupportedEvent
from dpkit.testing import check_accountant

TIGHT = 1e-3
# gaussian_delta inflates its value by a relative 1e-11 (its own float guard).
GAUSSIAN_GUARD = 1e-11


def test_contract() -> None:
    check_accountant(PLDAccountant, GaussianEvent(1.0), ZCDPEvent(0.1))


@pytest.mark.parametrize(
    ("sigma", "count", "delta"),
    [
        pytest.param(1.0, 1, 1e-5, id="sigma1"),
        pytest.param(0.5, 1, 1e-6, id="sigma0.5"),
        pytest.param(3.0, 1, 1e-9, id="sigma3"),
        pytest.param(10.0, 100, 1e-5, id="sigma10-x100"),
        pytest.param(4.0, 16, 1e-3, id="sigma4-x16"),
    ],
)
def test_gaussian_epsilon_is_certified_and_tight(sigma: float, count: int, delta: float) -> None:
    # T-fold Gaussian with sigma is one Gaussian with sigma / sqrt(T).
    exact = gaussian_epsilon(sigma / math.sqrt(count), delta)
    ours = PLDAccountant().compose(GaussianEvent(sigma), count=count).get_epsilon(delta)
    assert exact <= ours <= exact * (1 + TIGHT)


@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0, 2.5, 4.0])
def test_gaussian_delta_is_certified_and_tight(epsilon: float) -> None:
    exact = gaussian_delta(1.0, epsilon)
    ours = PLDAccountant().compose(GaussianEvent(1.0)).get_delta(epsilon)
    assert exact / (1 + GAUSSIAN_GUARD) <= ours <= exact * (1 + TIGHT)


def test_heterogeneous_gaussians_compose_like_one() -> None:
    # 1/sigma^2 adds: sigma 1 and sigma 2 make sigma 1/sqrt(1.25).
    accountant = PLDAccountant().compose(GaussianEvent(1.0)).compose(GaussianEvent(2.0))
    exact = gaussian_epsilon(1.0 / math.sqrt(1.25), 1e-5)
    assert exact <= accountant.get_epsilon(1e-5) <= exact * (1 + TIGHT)


@pytest.mark.parametrize("scale", [0.5, 1.0, 4.0])
def test_laplace_closed_form(scale: float) -> None:
    # One Laplace mechanism with eps0 = 1/b: delta(eps) = 1 - exp((eps - eps0)/2) for
    # eps < eps0, so eps(delta) = eps0 + 2 log(1 - delta).
    eps0 = 1.0 / scale
    accountant = PLDAccountant().compose(LaplaceEvent(scale))
    for delta in (1e-6, 1e-3, 0.05):
        exact = eps0 + 2.0 * math.log1p(-delta)
        assert exact <= accountant.get_epsilon(delta) <= exact * (1 + TIGHT)
    for epsilon in (0.0, 0.5 * eps0, 0.99 * eps0):
        exact_delta = -math.expm1((epsilon - eps0) / 2.0)
        ours = accountant.get_delta(epsilon)
        assert exact_delta <= ours <= exact_delta * (1 + TIGHT) + 1e-12
    # Exactly 0 in exact arithmetic; the certified bound carries the discretisation's
    # float-error slack (about u/h times the loss spread: ~1e-11 at h = 1e-4).
    assert accountant.get_delta(eps0) <= 1e-10


def _rr_delta(epsilon: float, k: int, at: float) -> float:
    return max(0.0, (math.exp(epsilon) - math.exp(at)) / (math.exp(epsilon) + k - 1))


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(PureEvent(1.0), id="pure"),
        pytest.param(RandomizedResponseEvent(1.0, 2), id="rr2"),
        pytest.param(DiscreteLaplaceEvent(1.0, 1), id="dlap"),
    ],
)
def test_pure_one_dp_profiles(event: PureEvent) -> None:
    # Each of these is exactly binary randomized response with eps = 1.
    accountant = PLDAccountant().compose(event)
    for at in (0.0, 0.25, 0.5):
        exact = _rr_delta(1.0, 2, at)
        assert exact <= accountant.get_delta(at) <= exact + 1e-4 * exact + 1e-14


def test_k_ary_randomized_response() -> None:
    accountant = PLDAccountant().compose(RandomizedResponseEvent(2.0, 5))
    for at in (0.0, 1.0, 1.9):
        exact = _rr_delta(2.0, 5, at)
        assert exact <= accountant.get_delta(at) <= exact * (1 + TIGHT) + 1e-14


def test_approx_event_keeps_delta_at_infinity() -> None:
    accountant = PLDAccountant().compose(ApproxEvent(1.0, 1e-3))
    assert accountant.get_delta(1.0) >= 1e-3
    assert accountant.get_delta(50.0) >= 1e-3
    assert accountant.get_epsilon(0.9e-3) == math.inf
    # RR part: delta(0) = (e - 1)/(e + 1) (1 - delta) + delta.
    exact0 = math.tanh(0.5) * (1 - 1e-3) + 1e-3
    assert exact0 <= accountant.get_delta(0.0) <= exact0 * (1 + TIGHT)
    twice = PLDAccountant().compose(ApproxEvent(1.0, 1e-3), count=2)
    assert twice.get_delta(100.0) >= 1 - (1 - 1e-3) ** 2


def test_subsampling_at_rate_one_is_the_plain_mechanism() -> None:
    plain = PLDAccountant().compose(GaussianEvent(2.0)).get_epsilon(1e-6)
    sampled = PLDAccountant().compose(PoissonSampledEvent(GaussianEvent(2.0), 1.0))
    assert sampled.get_epsilon(1e-6) == pytest.approx(plain, rel=1e-9)


def test_subsampling_amplifies_and_add_remove_differ() -> None:
    accountant = PLDAccountant().compose(PoissonSampledEvent(LaplaceEvent(1.0), 0.1))
    # Pure amplification bound log(1 + q (e^eps - 1)) caps the PLD answer.
    assert 0.0 < accountant.get_epsilon(1e-9) <= math.log1p(0.1 * math.expm1(1.0)) + 1e-3
    remove, add = accountant._remove, accountant._add
    assert not np.array_equal(remove.masses, add.masses)


def test_relation_replace_rejects_poisson_sampling() -> None:
    # The sampled Gaussian has a replace-one analysis (test_pld_replace_one.py); the
    # sampled Laplace does not.
    accountant = PLDAccountant(relation="replace")
    assert accountant.supports(GaussianEvent(1.0))
    assert not accountant.supports(PoissonSampledEvent(LaplaceEvent(1.0), 0.1))
    with pytest.raises(UnsupportedEvent):
        accountant.compose(PoissonSampledEvent(LaplaceEvent(1.0), 0.1))


def test_nothing_composed_and_delta_zero() -> None:
    accountant = PLDAccountant()
    assert accountant.get_epsilon(1e-6) == 0.0
    assert accountant.get_delta(0.0) == pytest.approx(0.0, abs=1e-14)
    accountant.compose(PureEvent(1.0))
    assert accountant.get_epsilon(0.0) == math.inf  # no pure-DP certificate from a PLD


def test_failed_compose_in_composed_event_changes_nothing() -> None:
    accountant = PLDAccountant().compose(GaussianEvent(1.0))
    before = (accountant.get_epsilon(1e-6), accountant.get_delta(1.0), accountant.ledger)
    too_wide = ComposedEvent((GaussianEvent(2.0), GaussianEvent(1e-4)))
    with pytest.raises(InvalidParameter, match="larger discretization"):
        accountant.compose(too_wide)
    assert (accountant.get_epsilon(1e-6), accountant.get_delta(1.0), accountant.ledger) == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"discretization": 0.0},
        {"discretization": 2.0},
        {"discretization": math.nan},
        {"relation": "swap"},
        {"tail_mass": 0.0},
        {"tail_mass": 1e-3},
    ],
)
def test_invalid_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidParameter):
        PLDAccountant(**kwargs)  # type: ignore[arg-type]


def test_repr_and_properties() -> None:
    accountant = PLDAccountant(discretization=1e-3, relation="replace")
    assert accountant.discretization == 1e-3 and accountant.relation == "replace"
    assert repr(accountant).startswith("PLDAccountant(")


# --- the pure functions ------------------------------------------------------------------


def test_from_atoms_keeps_grid_points_and_splits_the_rest() -> None:
    on = from_atoms(np.array([0.5]), np.array([1.0]), 0.25)
    assert on.offset == 2 and on.masses[0] == 1.0
    split = from_atoms(np.array([0.3]), np.array([1.0]), 0.25)
    # Connect-the-dots share of the upper point: (1 - e^{0.25 - 0.3}) / (1 - e^{-0.25}).
    share = -math.expm1(-0.05) / -math.expm1(-0.25)
    assert split.offset == 1
    assert split.masses[1] == pytest.approx(share, rel=1e-12)
    assert split.masses[1] >= share
    # Pessimistic for every eps, including negative ones.
    for eps in (-1.0, 0.0, 0.25, 0.29):
        assert hockey_stick(split, eps) >= -math.expm1(eps - 0.3) - 1e-15


def test_truncate_moves_tails_outward() -> None:
    pmf = LossPmf(1.0, -2, np.array([1e-17, 0.5, 0.5 - 2e-17, 1e-17]), 0.0)
    cut = truncate(pmf, 1e-15)
    assert cut.offset == -1 and cut.masses.size == 2
    assert cut.infinity_mass >= 1e-17
    for eps in (-3.0, -1.0, 0.0, 0.5):
        assert hockey_stick(cut, eps) >= hockey_stick(pmf, eps) - 1e-18


def test_self_compose_matches_repeated_convolution() -> None:
    pmf = from_atoms(np.array([0.7, -0.7, 0.0]), np.array([0.5, 0.2, 0.3]), 0.1)
    by_fft = self_compose(pmf, 5, 1e-15)
    by_conv = pmf
    for _ in range(4):
        by_conv = convolve(by_conv, pmf, 1e-15)
    for eps in (0.0, 0.5, 1.5, 3.0):
        assert hockey_stick(by_fft, eps) == pytest.approx(hockey_stick(by_conv, eps), abs=1e-12)


def test_smallest_epsilon_inverts_hockey_stick() -> None:
    pmf = from_atoms(np.array([1.0, -1.0]), np.array([0.7, 0.3]), 0.01)
    for delta in (1e-3, 0.1, 0.3):
        eps = smallest_epsilon(pmf, delta)
        assert hockey_stick(pmf, eps) <= delta
        assert hockey_stick(pmf, eps * (1 - 1e-6)) > delta


def test_discretisation_slack_is_positive_and_small() -> None:
    # Float error in the CDF values can move mass between adjacent buckets; the
    # discretised PLD must carry a bound on that (omitting it would make slack 0).
    for q in (0.01, 1.0):
        for direction in ("remove", "add"):
            pmf = from_interval_cdfs(sampled_cdfs(GaussianNoise(1.0), q, direction), 1e-4, 1e-15)
            # At least one CDF_REL-sized error per edge; at most ~u/h.
            assert 1e-13 < pmf.slack < 1e-9
    # The slack survives composition: DP-SGD T = 1000 stays within 0.1% of dp_accounting.
    event = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    accountant = PLDAccountant().compose(event, count=1000)
    assert accountant._remove.error_at(0.0) > 1e-11


@pytest.mark.parametrize("boundary", [-(2**40) - 3, -70_001, -2, -1, 0, 1, 2, 255, 256, 70_001])
def test_vectorised_search_finds_the_first_true_index(boundary: int) -> None:
    from dpkit.accounting._math.pld.discretize import _first_true

    calls: list[int] = []

    def pred(j: np.ndarray) -> np.ndarray:
        calls.append(j.size)
        return np.asarray(j >= boundary)

    assert _first_true(pred) == boundary
    assert len(calls) <= 16  # a few batched calls, not one per step


def test_smallest_epsilon_does_not_depend_on_the_bracket_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dpkit.accounting._math.pld import hockey

    accountant = PLDAccountant().compose(PoissonSampledEvent(GaussianEvent(1.0), 0.05), count=50)
    pmf = accountant._remove
    for delta in (1e-3, 1e-5, 1e-8):
        hinted = smallest_epsilon(pmf, delta)
        assert hockey_stick(pmf, hinted) <= delta
        for bad in (0, pmf.masses.size // 3, pmf.masses.size - 1):
            monkeypatch.setattr(hockey, "_first_below", lambda *_args, b=bad: b)
            assert smallest_epsilon(pmf, delta) == hinted
        monkeypatch.undo()


@pytest.mark.parametrize("q", [1.0, 0.3])
@pytest.mark.parametrize("noise_name", ["gaussian", "laplace"])
def test_threshold_spread_bounds_the_exact_measure(q: float, noise_name: str) -> None:
    import mpmath

    from dpkit.accounting._math.pld.mechanisms import LaplaceNoise, _spread

    mpmath.mp.dps = 50
    noise = GaussianNoise(0.7) if noise_name == "gaussian" else LaplaceNoise(0.7)
    rng = np.random.default_rng(7)
    centre = rng.uniform(-8.0, 9.0, 200)
    x_lo = centre - rng.uniform(0.0, 1e-9, 200)
    x_hi = centre + rng.uniform(0.0, 1e-9, 200)
    x_lo[:3] = [-np.inf, 0.2, 1.0]
    x_hi[:3] = [-5.0, 0.2 + 1e-12, np.inf]
    w_mix, w_noise = _spread(noise, q, x_lo, x_hi, x_hi <= 0.5)

    def cdf(x: float, mu: float) -> mpmath.mpf:
        if x == -math.inf:
            return mpmath.mpf(0)
        if x == math.inf:
            return mpmath.mpf(1)
        z = mpmath.mpf(x) - mu
        if isinstance(noise, GaussianNoise):
            return mpmath.ncdf(z / noise.sigma)
        b = noise.b
        return mpmath.exp(z / b) / 2 if z < 0 else 1 - mpmath.exp(-z / b) / 2

    for lo, hi, wm, wn in zip(x_lo, x_hi, w_mix, w_noise, strict=True):
        exact0 = cdf(hi, 0) - cdf(lo, 0)
        exact1 = cdf(hi, 1) - cdf(lo, 1)
        mix = exact1 if q == 1.0 else (1 - mpmath.mpf(q)) * exact0 + q * exact1
        assert wn >= exact0
        assert wm >= mix


def test_shared_leaves_give_a_fresh_accountants_values_and_stay_within_their_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Accountants share leaf PLDs (dpkit.accounting.pld._LeafCache): a composition
    gives the same epsilon and delta with the leaves remembered as computed afresh, a
    different grid, tail or relation is a different leaf, and the cache never holds
    more bytes than its limit (the oldest leaves go first)."""
    from dpkit.accounting import pld as pld_module

    events = [
        GaussianEvent(1.3),
        PoissonSampledEvent(GaussianEvent(0.9), 0.02),
        LaplaceEvent(2.0),
    ]

    def composed(**options: object) -> tuple[float, float]:
        accountant = PLDAccountant(**options)  # type: ignore[arg-type]
        for k, event in enumerate(events):
            accountant = accountant.compose(event, count=3 + k)
        return accountant.get_epsilon(1e-6), accountant.get_delta(1.0)

    monkeypatch.setattr(pld_module, "_LEAVES", pld_module._LeafCache(2**40))
    first = composed()
    remembered = composed()
    assert remembered == first
    monkeypatch.setattr(pld_module, "_LEAVES", pld_module._LeafCache(0))  # nothing kept
    assert composed() == first
    assert composed(discretization=2e-4) != first  # another grid: not the same leaves

    small = pld_module._LeafCache(3 * 2**20)
    monkeypatch.setattr(pld_module, "_LEAVES", small)
    for sigma in (0.7, 0.8, 0.9, 1.0, 1.1, 1.2):
        composed_one = PLDAccountant().compose(GaussianEvent(sigma))
        assert composed_one.get_epsilon(1e-6) > 0
        assert small._bytes <= 3 * 2**20
    assert small._entries  # some were kept, the oldest dropped
    assert (GaussianEvent, GaussianEvent(0.7), 1e-4, 1e-15, "add_remove") not in small._entries
