"""Truncated Poisson sampling (fixed maximum batch size) in the PLD accountant.

Checked (two-sided where exact) against: the stated branch mixture evaluated with
mpmath closed forms; its two limits (never truncated: the Poisson-subsampled Gaussian;
always truncated: the sampled Gaussian at rate B/N with half the noise multiplier); and,
as a lower bound, the exact delta of an explicit pair of neighbouring datasets.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate, stats

from dpkit.accounting import GaussianEvent, PoissonSampledEvent, event_from_dict
from dpkit.accounting._math.pld.truncated import branch_probabilities
from dpkit.accounting.events.allocation import TruncatedPoissonSampledGaussianEvent
from dpkit.accounting.pld import PLDAccountant
from dpkit.errors import InvalidParameter

TIGHT = 1e-3


def _sampled_delta(z: float, rate: float, epsilon: float, direction: str) -> mpmath.mpf:
    """delta of (1-r) N(0) + r N(1) vs N(0) ("remove") or the reverse ("add"), sd z."""
    mpmath.mp.dps = 30
    z_, r, e = mpmath.mpf(z), mpmath.mpf(rate), mpmath.mpf(epsilon)
    if direction == "remove":  # P[L > e]: x above the threshold
        x = z_**2 * mpmath.log((mpmath.exp(e) - 1 + r) / r) + mpmath.mpf(1) / 2
        p_above = (1 - r) * mpmath.ncdf(-x / z_) + r * mpmath.ncdf(-(x - 1) / z_)
        return max(mpmath.mpf(0), p_above - mpmath.exp(e) * mpmath.ncdf(-x / z_))
    inner = (mpmath.exp(-e) - 1 + r) / r  # L > e  <=>  likelihood ratio below this
    if inner <= 0:
        return mpmath.mpf(0)
    x = z_**2 * mpmath.log(inner) + mpmath.mpf(1) / 2
    q_below = (1 - r) * mpmath.ncdf(x / z_) + r * mpmath.ncdf((x - 1) / z_)
    return max(mpmath.mpf(0), mpmath.ncdf(x / z_) - mpmath.exp(e) * q_below)


def _branch_mixture_delta(z: float, q: float, b: int, n: int, epsilon: float) -> float:
    w_plain, w_trunc, rate = branch_probabilities(q, b, n)
    worst = mpmath.mpf(0)
    for direction in ("remove", "add"):
        plain = _sampled_delta(z, q, epsilon, direction)
        trunc = _sampled_delta(z / 2, rate, epsilon, direction) if w_trunc else 0
        worst = max(worst, w_plain * plain + w_trunc * trunc)
    return float(worst)


@pytest.mark.parametrize(
    ("z", "q", "b", "n", "epsilon"),
    [(1.0, 0.01, 100, 10_000, 1.0), (1.0, 0.01, 115, 10_000, 0.5), (0.8, 0.1, 12, 100, 2.0)],
)
def test_one_step_is_the_stated_branch_mixture(
    z: float, q: float, b: int, n: int, epsilon: float
) -> None:
    exact = _branch_mixture_delta(z, q, b, n, epsilon)
    got = (
        PLDAccountant().compose(TruncatedPoissonSampledGaussianEvent(z, q, b, n)).get_delta(epsilon)
    )
    assert exact <= got <= exact * (1 + TIGHT)


def test_never_truncated_is_poisson_and_always_truncated_is_rate_b_over_n() -> None:
    never = PLDAccountant().compose(TruncatedPoissonSampledGaussianEvent(1.0, 0.1, 1000, 1000))
    poisson = PLDAccountant().compose(PoissonSampledEvent(GaussianEvent(1.0), 0.1))
    assert never.get_epsilon(1e-6) == poisson.get_epsilon(1e-6)
    # q = 1: every step truncates to a uniform 100 of 1000 (dp_accounting's
    # "always_truncate" case); the pair is the sampled Gaussian at rate 0.1 with a
    # shift of 2 C. dp_accounting bounds it by its replace-one pair, which is larger.
    always = PLDAccountant().compose(TruncatedPoissonSampledGaussianEvent(1.0, 1.0, 100, 1000))
    shifted = PLDAccountant().compose(PoissonSampledEvent(GaussianEvent(0.5), 0.1))
    assert always.get_epsilon(1e-6) == pytest.approx(shifted.get_epsilon(1e-6), rel=1e-9)
    replace = PLDAccountant(relation="replace").compose(
        PoissonSampledEvent(GaussianEvent(0.5), 0.1)
    )
    assert always.get_epsilon(1e-6) < replace.get_epsilon(1e-6)


def _explicit_pair_delta(z: float, q: float, b: int, n: int, epsilon: float) -> float:
    """Exact delta of one explicit neighbouring pair (scalar, others -1, x at +1)."""
    others = stats.binom(n - 1, q)
    m = np.arange(n)
    pm = others.pmf(m)
    without = -np.minimum(m, b).astype(float)  # centre of the output on D
    # On D' (x added): x sampled and kept, or not kept.
    keep = np.where(m + 1 <= b, 1.0, b / (m + 1.0))
    with_x = np.where(m + 1 <= b, -m + 1.0, -(b - 1.0) + 1.0)

    def dens_d(t: float) -> float:
        return float(np.sum(pm * stats.norm.pdf(t, without, z)))

    def dens_d1(t: float) -> float:
        kept = q * keep * stats.norm.pdf(t, with_x, z)
        dropped = (1 - q * keep) * stats.norm.pdf(t, without, z)
        return float(np.sum(pm * (kept + dropped)))

    lo, hi = -b - 12 * z, 2 + 12 * z
    e = math.exp(epsilon)

    def excess(first: object, second: object) -> float:
        def integrand(t: float) -> float:
            return max(0.0, first(t) - e * second(t))  # type: ignore[operator]

        return float(integrate.quad(integrand, lo, hi, limit=400, points=[-b, 0])[0])

    return max(excess(dens_d1, dens_d), excess(dens_d, dens_d1))


def test_never_below_an_explicit_pair() -> None:
    z, q, b, n = 1.0, 0.2, 3, 20
    event = TruncatedPoissonSampledGaussianEvent(z, q, b, n)
    for epsilon in (0.3, 1.0):
        lower = _explicit_pair_delta(z, q, b, n, epsilon)
        got = PLDAccountant().compose(event).get_delta(epsilon)
        assert got >= lower * (1 + 1e-6)


def test_branch_probabilities_against_mpmath() -> None:
    q, b, n = 0.01, 105, 10_000
    w_plain, w_trunc, rate = branch_probabilities(q, b, n)
    mpmath.mp.dps = 40

    def tail(trials: int, at_least: int) -> mpmath.mpf:
        return mpmath.betainc(at_least, trials - at_least + 1, 0, q, regularized=True)

    tau = tail(n - 1, b)
    r = mpmath.mpf(b) / n * tail(n, b + 1) / tau
    assert w_trunc >= tau and w_plain >= 1 - tau and rate >= r
    assert w_trunc == pytest.approx(float(tau), rel=1e-8)
    assert rate == pytest.approx(float(r), rel=1e-8)


def test_round_trip_and_bad_input() -> None:
    event = TruncatedPoissonSampledGaussianEvent(1.0, 0.01, 128, 60_000)
    assert event_from_dict(event.to_dict()) == event
    for args in ((0.0, 0.1, 5, 10), (1.0, 0.0, 5, 10), (1.0, 1.5, 5, 10), (1.0, 0.1, 0, 10),
                 (1.0, 0.1, 5, 0), (math.nan, 0.1, 5, 10)):  # fmt: skip
        with pytest.raises(InvalidParameter):
            TruncatedPoissonSampledGaussianEvent(*args)  # type: ignore[arg-type]
    assert PLDAccountant(relation="replace").supports(event)


def _replace_delta(z: float, q: float, epsilon: float) -> mpmath.mpf:
    """Exact delta of (1-q) N(0) + q N(1) against (1-q) N(0) + q N(-1), sd z (mpmath)."""
    mpmath.mp.dps = 30
    z_, q_, e = mpmath.mpf(z), mpmath.mpf(q), mpmath.mpf(epsilon)
    alpha = (1 - q_) * mpmath.exp(1 / (2 * z_**2)) / q_
    x = z_**2 * (e / 2 + mpmath.asinh(alpha * mpmath.sinh(e / 2)))

    def above(centre: int) -> mpmath.mpf:
        return (1 - q_) * mpmath.ncdf(-x / z_) + q_ * mpmath.ncdf(-(x - centre) / z_)

    return above(1) - mpmath.exp(e) * above(-1)


@pytest.mark.parametrize(("z", "q", "b", "n", "epsilon"), [(1.0, 0.01, 105, 10_000, 1.0),
                                                           (0.8, 0.1, 12, 100, 2.0)])  # fmt: skip
def test_replace_one_is_the_stated_branch_mixture(
    z: float, q: float, b: int, n: int, epsilon: float
) -> None:
    # Truncated branch: radius 2 C around the common component (noise multiplier halved).
    w_plain, w_trunc, rate = branch_probabilities(q, b, n)
    exact = float(
        w_plain * _replace_delta(z, q, epsilon) + w_trunc * _replace_delta(z / 2, rate, epsilon)
    )
    event = TruncatedPoissonSampledGaussianEvent(z, q, b, n)
    got = PLDAccountant(relation="replace").compose(event).get_delta(epsilon)
    assert exact <= got <= exact * (1 + TIGHT)


def test_replace_one_limits_and_dp_accounting() -> None:
    never = TruncatedPoissonSampledGaussianEvent(1.0, 0.1, 1000, 1000)
    poisson = PoissonSampledEvent(GaussianEvent(1.0), 0.1)
    replace = PLDAccountant(relation="replace")
    assert replace.compose(never).get_epsilon(1e-6) == pytest.approx(
        PLDAccountant(relation="replace").compose(poisson).get_epsilon(1e-6), rel=1e-12
    )
    # dp_accounting's REPLACE_ONE value for the same event (live, one step).
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant as pa

    theirs = pa.PLDAccountant(pa.NeighborRel.REPLACE_ONE)
    theirs.compose(dp_event.TruncatedSubsampledGaussianDpEvent(1000, 1.0, 100, 1.0))
    ours = PLDAccountant(relation="replace").compose(
        TruncatedPoissonSampledGaussianEvent(1.0, 1.0, 100, 1000)
    )
    assert ours.get_epsilon(1e-6) == pytest.approx(float(theirs.get_epsilon(1e-6)), rel=1e-3)


def _explicit_replace_delta(z: float, q: float, b: int, n: int, epsilon: float) -> float:
    """Exact delta of an explicit replace-one pair: others at -1, x at +1, x' at -1."""
    m = np.arange(n)
    pm = stats.binom(n - 1, q).pmf(m)

    def law(g: float) -> tuple[np.ndarray, np.ndarray]:
        centres: list[float] = []
        weights: list[float] = []
        for count, weight in zip(m, pm, strict=True):
            centres.append(-float(min(count, b)))  # the special record not kept
            weights.append(weight * (1 - q))
            if count + 1 <= b:
                centres.append(-float(count) + g)
                weights.append(weight * q)
            else:  # truncated: the special record survives with probability b/(count+1)
                keep = b / (count + 1.0)
                centres += [-(b - 1.0) + g, -float(b)]
                weights += [weight * q * keep, weight * q * (1 - keep)]
        return np.array(centres), np.array(weights)

    (c1, w1), (c2, w2) = law(1.0), law(-1.0)
    e = math.exp(epsilon)

    def excess(ca: np.ndarray, wa: np.ndarray, cb: np.ndarray, wb: np.ndarray) -> float:
        def integrand(t: float) -> float:
            pa = float(np.sum(wa * stats.norm.pdf(t, ca, z)))
            pb = float(np.sum(wb * stats.norm.pdf(t, cb, z)))
            return max(0.0, pa - e * pb)

        lo, hi = -b - 12 * z - 2, 12 * z + 2
        return float(integrate.quad(integrand, lo, hi, limit=500, points=[0.0])[0])

    return max(excess(c1, w1, c2, w2), excess(c2, w2, c1, w1))


@pytest.mark.parametrize(("z", "q", "b", "n"), [(1.0, 0.5, 1, 3), (1.0, 0.3, 2, 10)])
def test_replace_one_truncated_branch_needs_radius_two(z: float, q: float, b: int, n: int) -> None:
    # When the truncated batch keeps y = x' from the others, the common component sits
    # at g(x'): the pair spans 2 C. dpkit stays above this explicit pair; the radius-C
    # replace-one pair at rate r (the tempting shortcut) falls below it.
    event = TruncatedPoissonSampledGaussianEvent(z, q, b, n)
    w_plain, w_trunc, rate = branch_probabilities(q, b, n)
    for epsilon in (0.5, 2.0):
        explicit = _explicit_replace_delta(z, q, b, n, epsilon)
        got = PLDAccountant(relation="replace").compose(event).get_delta(epsilon)
        assert got >= explicit
        shortcut = w_plain * _replace_delta(z, q, epsilon) + w_trunc * _replace_delta(
            z, rate, epsilon
        )
        assert float(shortcut) < explicit
