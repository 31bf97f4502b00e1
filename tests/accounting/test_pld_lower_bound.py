"""The certified lower bound on epsilon (``dpkit.accounting.pld_bounds``).

1. Exact closed form: ``k`` Gaussian mechanisms with ``sigma`` are one with
   ``sigma / sqrt(k)``; its delta(eps) is analytic. lower <= exact <= upper everywhere,
   and the gap shrinks as the grid is refined.
2. Poisson-subsampled Gaussian: lower <= upper; the interval contains prv_accountant's
   estimate and overlaps its [lower, upper]; one step against a 50-digit mpmath
   evaluation of the exact delta.
3. Power: the checks of 1 catch a "lower bound" that is really an upper bound (the
   pessimistic PLD, or the optimistic one without its rounding shift), and the
   interval is narrow (lower > 0.99 upper at typical settings).
4. Bad input and unsupported events raise dpkit errors.
Also: compositions of different events (closed form for Gaussians, prv_accountant for
subsampled ones), the accountant method and the CLI.
"""

from __future__ import annotations

import functools
import json
import math

import pytest

from dpkit.accounting import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RepeatedEvent,
    gaussian_epsilon,
)
from dpkit.accounting._math.gaussian import _log_delta
from dpkit.accounting._pld_lower import _profiles
from dpkit.accounting.calibrate import dpsgd_epsilon, dpsgd_epsilon_bounds
from dpkit.accounting.pld import PLDAccountant
from dpkit.accounting.pld_bounds import (
    EpsilonInterval,
    delta_lower_bound,
    epsilon_interval,
    epsilon_lower_bound,
    supports_lower_bound,
)
from dpkit.errors import DPError, InvalidParameter, UnsupportedEvent

EPSILONS = [0.0, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0]


def _exact_gaussian_delta(s: float, eps: float) -> float:
    """delta(eps) of N(0, s^2) vs N(1, s^2), *not* rounded up (so a too-high value shows)."""
    return math.exp(_log_delta(s, eps))


def _lower_profile(sigma: float, count: int, h: float) -> object:
    event = RepeatedEvent(GaussianEvent(sigma), count)
    (profile,) = _profiles(event, h, 1e-15, "test")
    return profile


def _violations(candidate: object, exact: object) -> list[float]:
    """The eps where a claimed lower bound ``candidate(eps)`` exceeds ``exact(eps)``."""
    return [eps for eps in EPSILONS if candidate(eps) > exact(eps)]  # type: ignore[operator]


# ------------------------------------------------------------------ 1. closed form


@pytest.mark.parametrize(("sigma", "count"), [(10.0, 100), (3.0, 9), (30.0, 1000)])
def test_gaussian_composition_is_bracketed(sigma: float, count: int) -> None:
    s = sigma / math.sqrt(count)
    profile = _lower_profile(sigma, count, 1e-4)
    upper = PLDAccountant().compose(GaussianEvent(sigma), count=count)
    for eps in EPSILONS:
        exact = _exact_gaussian_delta(s, eps)
        lower = profile.delta(eps)  # type: ignore[attr-defined]
        assert lower <= exact <= upper.get_delta(eps)
        if exact > 1e-12:
            assert lower >= 0.9 * exact  # close, not just valid (measured >= 0.94)
    for delta in (1e-3, 1e-5, 1e-8):
        lower_eps = epsilon_lower_bound(
            RepeatedEvent(GaussianEvent(sigma), count), delta, discretization=1e-4
        )
        exact_eps = gaussian_epsilon(s, delta)
        assert lower_eps <= exact_eps <= upper.get_epsilon(delta)
        assert lower_eps >= exact_eps - 0.02


@pytest.mark.parametrize(
    ("s1", "k1", "s2", "k2"),
    # The second mix (14 s on a busy machine) runs with --runslow: the first runs the
    # same product of two different Gaussians through the same code by default.
    [(10.0, 50, 5.0, 10), pytest.param(3.0, 4, 20.0, 300, marks=pytest.mark.slow)],
)
def test_heterogeneous_gaussians_are_bracketed(s1: float, k1: int, s2: float, k2: int) -> None:
    # k1 steps at s1 and k2 at s2 are one Gaussian with 1/s^2 = k1/s1^2 + k2/s2^2.
    event = ComposedEvent(
        (RepeatedEvent(GaussianEvent(s1), k1), RepeatedEvent(GaussianEvent(s2), k2))
    )
    s = 1.0 / math.sqrt(k1 / s1**2 + k2 / s2**2)
    (profile,) = _profiles(event, 3e-5, 1e-15, "test")
    upper = PLDAccountant().compose(event)
    for eps in EPSILONS:
        exact = _exact_gaussian_delta(s, eps)
        lower_delta = profile.delta(eps)  # once per eps: ~0.5 s a call on this fine grid
        assert lower_delta <= exact <= upper.get_delta(eps)
        if exact > 1e-12:
            assert lower_delta >= 0.98 * exact  # measured >= 0.99
    lower = epsilon_lower_bound(event, 1e-8)
    assert gaussian_epsilon(s, 1e-8) - 0.005 <= lower <= gaussian_epsilon(s, 1e-8)


def test_heterogeneous_against_prv_accountant() -> None:
    prv = pytest.importorskip("prv_accountant")
    (s1, q1, k1), (s2, q2, k2), delta = (1.0, 0.01, 500), (2.0, 0.05, 200), 1e-5
    event = ComposedEvent(
        (
            RepeatedEvent(PoissonSampledEvent(GaussianEvent(s1), q1), k1),
            RepeatedEvent(PoissonSampledEvent(GaussianEvent(s2), q2), k2),
        )
    )
    bounds = epsilon_interval(event, delta)
    accountant = prv.PRVAccountant(
        prvs=[
            prv.PoissonSubsampledGaussianMechanism(noise_multiplier=s1, sampling_probability=q1),
            prv.PoissonSubsampledGaussianMechanism(noise_multiplier=s2, sampling_probability=q2),
        ],
        max_self_compositions=[k1, k2],
        eps_error=0.01,
        delta_error=delta / 1000,
    )
    prv_lower, estimate, prv_upper = accountant.compute_epsilon(
        delta=delta, num_self_compositions=[k1, k2]
    )
    # measured: dpkit [2.03715, 2.03972], prv [2.02958, 2.03972, 2.04985]
    assert bounds.lower <= estimate <= bounds.upper * (1.0 + 1e-6)
    assert bounds.lower <= prv_upper and prv_lower <= bounds.upper
    assert bounds.lower > 0.998 * bounds.upper


def test_gap_shrinks_as_the_grid_is_refined() -> None:
    gaps = []
    for h in (1e-3, 1e-4):
        lower = epsilon_lower_bound(RepeatedEvent(GaussianEvent(10.0), 100), 1e-6, discretization=h)
        gaps.append(gaussian_epsilon(1.0, 1e-6) - lower)
    assert 0.0 <= gaps[1] < gaps[0] / 5  # measured: 0.031 -> 0.0034


# ------------------------------------------------------------ 2. subsampled Gaussian

PRV_SETTINGS = [
    # (sigma, q, steps, delta)
    (0.8, 0.01, 1000, 1e-5),
    (1.0, 0.01, 1000, 1e-5),
    (2.0, 0.1, 100, 1e-8),
    (1.0, 1e-3, 10_000, 1e-6),
    (1.0, 0.05, 100, 1e-5),
]


@functools.cache
def _dpsgd_bounds(q: float, sigma: float, steps: int, delta: float) -> EpsilonInterval:
    """dpsgd_epsilon_bounds, once per schedule: the typical one (q = 0.01, sigma = 1,
    1000 steps, delta = 1e-5) is checked against prv_accountant and for its width."""
    return dpsgd_epsilon_bounds(
        sampling_probability=q, noise_multiplier=sigma, steps=steps, delta=delta
    )


@pytest.mark.parametrize(("sigma", "q", "steps", "delta"), PRV_SETTINGS)
def test_interval_against_prv_accountant(sigma: float, q: float, steps: int, delta: float) -> None:
    prv = pytest.importorskip("prv_accountant")
    bounds = _dpsgd_bounds(q, sigma, steps, delta)
    assert bounds.upper == dpsgd_epsilon(
        sampling_probability=q, noise_multiplier=sigma, steps=steps, delta=delta,
        accountant="pld",
    )  # fmt: skip
    accountant = prv.PRVAccountant(
        prvs=prv.PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q),
        max_self_compositions=steps,
        eps_error=0.01,
        delta_error=delta / 1000,
    )
    prv_lower, prv_estimate, prv_upper = accountant.compute_epsilon(
        delta=delta, num_self_compositions=steps
    )
    assert 0.0 < bounds.lower <= bounds.upper
    # prv's estimate is not a bound: it may sit a hair (1e-6 relative) above the upper end.
    assert bounds.lower <= prv_estimate <= bounds.upper * (1.0 + 1e-6)
    assert bounds.lower <= prv_upper and prv_lower <= bounds.upper  # the intervals overlap
    assert bounds.lower >= 0.98 * bounds.upper  # measured 0.982 - 0.9996


def _exact_sampled_delta(sigma: float, q: float, eps: float) -> float:
    """One Poisson-subsampled Gaussian step, worse of both orderings, to 50 digits."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(50):
        s, q_, e = mp.mpf(sigma), mp.mpf(q), mp.mpf(eps)

        def sf(z: object) -> object:
            return mp.erfc(z / mp.sqrt(2)) / 2

        # remove: P = (1-q) N(0) + q N(1) against Q = N(0); P/Q > e^eps beyond x_r.
        x_r = s**2 * mp.log((mp.exp(e) - 1 + q_) / q_) + mp.mpf(1) / 2
        remove = (1 - q_) * sf(x_r / s) + q_ * sf((x_r - 1) / s) - mp.exp(e) * sf(x_r / s)
        # add: P = N(0) against the mixture; P/Q > e^eps below x_a (if any).
        v = (mp.exp(-e) - 1 + q_) / q_
        add = mp.mpf(0)
        if v > 0:
            x_a = s**2 * mp.log(v) + mp.mpf(1) / 2
            mix = (1 - q_) * sf(-x_a / s) + q_ * sf((1 - x_a) / s)
            add = sf(-x_a / s) - mp.exp(e) * mix
        return float(max(remove, add))


@pytest.mark.parametrize(("sigma", "q"), [(0.8, 0.01), (1.0, 0.1), (2.0, 0.5)])
def test_single_step_against_mpmath(sigma: float, q: float) -> None:
    event = PoissonSampledEvent(GaussianEvent(sigma), q)
    profiles = _profiles(event, 3e-5, 1e-15, "test")
    upper = PLDAccountant().compose(event)
    for eps in EPSILONS:
        exact = _exact_sampled_delta(sigma, q, eps)
        lower = max(p.delta(eps) for p in profiles)
        assert lower <= exact <= upper.get_delta(eps)
        if exact > 1e-12:
            assert lower >= 0.99 * exact  # measured >= 0.995


# ------------------------------------------------------------------------ 3. power


def test_the_checks_catch_an_upper_bound_posing_as_a_lower_one() -> None:
    s = 1.0
    exact = lambda eps: _exact_gaussian_delta(s, eps)  # noqa: E731
    # The pessimistic PLD (connect-the-dots, float error added) is above the exact
    # value: used as a "lower bound" it fails the check of test 1.
    pessimistic = PLDAccountant().compose(GaussianEvent(10.0), count=100)
    assert _violations(pessimistic.get_delta, exact)
    # A lower bound moved by 0.003 in eps (the rounding shift tau here is ~0.003)
    # fails it too: the check resolves errors of that size.
    profile = _lower_profile(10.0, 100, 1e-4)
    assert not _violations(profile.delta, exact)  # type: ignore[attr-defined]
    assert _violations(lambda eps: profile.delta(eps - 3e-3), exact)  # type: ignore[attr-defined]


def test_interval_is_narrow_at_typical_settings() -> None:
    bounds = _dpsgd_bounds(0.01, 1.0, 1000, 1e-5)
    assert isinstance(bounds, EpsilonInterval)
    assert bounds.lower > 0.995 * bounds.upper  # measured 0.9981
    assert 0.0 < bounds.width < 0.01
    assert str(bounds).startswith("eps in [1.82")


def test_delta_interval_and_monotone_in_epsilon() -> None:
    event = RepeatedEvent(PoissonSampledEvent(GaussianEvent(1.0), 0.01), 200)
    upper = PLDAccountant().compose(event)
    previous = 1.0
    for eps in (0.0, 0.5, 1.0, 2.0):
        lower = delta_lower_bound(event, eps)
        assert 0.0 < lower <= upper.get_delta(eps) and lower <= previous
        previous = lower
    assert delta_lower_bound(event, math.inf) == 0.0


# ------------------------------------------------------------------ 4. bad input


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-5, math.nan, "x"])
def test_bad_delta(delta: object) -> None:
    event = GaussianEvent(1.0)
    with pytest.raises(InvalidParameter):
        epsilon_lower_bound(event, delta)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter):
        epsilon_interval(event, delta)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [{"discretization": 0.0}, {"discretization": 2.0}, {"tail_mass": 1e-3}, {"tail_mass": 0}],
)
def test_bad_grid(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidParameter):
        epsilon_lower_bound(GaussianEvent(1.0), 1e-5, **kwargs)


def test_bad_event_and_epsilon() -> None:
    with pytest.raises(InvalidParameter):
        epsilon_lower_bound("GaussianEvent(1.0)", 1e-5)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter):
        delta_lower_bound(GaussianEvent(1.0), -0.5)
    with pytest.raises(InvalidParameter):
        dpsgd_epsilon_bounds(sampling_probability=0.0, noise_multiplier=1.0, steps=10, delta=1e-5)
    with pytest.raises(InvalidParameter):
        dpsgd_epsilon_bounds(sampling_probability=0.1, noise_multiplier=1.0, steps=0, delta=1e-5)


@pytest.mark.parametrize(
    "event",
    [
        LaplaceEvent(1.0),
        PoissonSampledEvent(LaplaceEvent(1.0), 0.1),
        ComposedEvent((GaussianEvent(1.0), LaplaceEvent(1.0))),
    ],
)
def test_unsupported_events_raise(event: object) -> None:
    assert not supports_lower_bound(event)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedEvent, match="lower bound"):
        epsilon_lower_bound(event, 1e-5)  # type: ignore[arg-type]
    with pytest.raises(DPError):
        epsilon_interval(event, 1e-5)  # type: ignore[arg-type]


def test_supported_shapes() -> None:
    step = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    # Copies of one event, however written, are one event composed count times.
    two_ways = [
        RepeatedEvent(step, 300),
        ComposedEvent((RepeatedEvent(step, 100), RepeatedEvent(step, 200))),
    ]
    assert all(supports_lower_bound(e) for e in two_ways)
    lowers = {epsilon_lower_bound(e, 1e-5) for e in two_ways}
    assert len(lowers) == 1
    assert epsilon_lower_bound(ComposedEvent(()), 1e-5) == 0.0


def test_cli_prints_the_interval() -> None:
    from typer.testing import CliRunner

    from dpkit.cli.main import app

    runner = CliRunner()
    args = ["account", "dpsgd", "--sampling-rate", "0.01", "--steps", "100",
            "--noise-multiplier", "1.0", "--delta", "1e-5"]  # fmt: skip
    text = runner.invoke(app, [*args, "--accountant", "prv"])
    assert text.exit_code == 0 and "eps in [" in text.output
    payload = json.loads(runner.invoke(app, [*args, "--accountant", "prv", "--json"]).output)
    bounds = dpsgd_epsilon_bounds(
        sampling_probability=0.01, noise_multiplier=1.0, steps=100, delta=1e-5
    )
    assert payload["epsilon_lower"] == bounds.lower and payload["epsilon"] == bounds.upper
    # Other accountants' output is unchanged: no interval.
    pld = runner.invoke(app, [*args, "--accountant", "pld"])
    assert "eps in [" not in pld.output
    pld_json = json.loads(runner.invoke(app, [*args, "--accountant", "pld", "--json"]).output)
    assert "epsilon_lower" not in pld_json
    # --relation replace: the upper bound as before, and the lower bound said unavailable.
    replace = runner.invoke(app, [*args, "--accountant", "prv", "--relation", "replace"])
    assert replace.exit_code == 0 and "not available" in replace.output


def test_accountant_method() -> None:
    step = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    accountant = PLDAccountant().compose(step, count=100).compose(step, count=200)
    interval = accountant.get_epsilon_interval(1e-5)
    # The lower bound sees one event composed 300 times; the upper is the accountant's.
    assert interval.lower == epsilon_lower_bound(RepeatedEvent(step, 300), 1e-5)
    assert interval.upper == accountant.get_epsilon(1e-5)
    assert PLDAccountant().get_epsilon_interval(1e-5).lower == 0.0  # nothing composed
    with pytest.raises(UnsupportedEvent, match="add/remove"):
        PLDAccountant(relation="replace").compose(step).get_epsilon_interval(1e-5)
    mixed = accountant.compose(GaussianEvent(5.0), count=3)  # a mix is covered
    assert mixed.get_epsilon_interval(1e-5).lower <= mixed.get_epsilon(1e-5)
    with pytest.raises(UnsupportedEvent, match="lower bound"):
        accountant.compose(LaplaceEvent(1.0)).get_epsilon_interval(1e-5)
    with pytest.raises(InvalidParameter):
        accountant.get_epsilon_interval(0.0)


def test_remembered_profiles_give_the_values_of_a_fresh_computation() -> None:
    """The last two compositions' profiles are remembered (an interval, epsilon at
    several deltas): the values are those of a fresh computation, whichever way the
    event is written, and the shared arrays cannot be changed by a caller."""
    import numpy as np

    from dpkit.accounting import _pld_lower

    sampled = PoissonSampledEvent(GaussianEvent(1.0), 0.05)
    ways = [
        RepeatedEvent(sampled, 20),
        ComposedEvent((RepeatedEvent(sampled, 5), RepeatedEvent(sampled, 15))),
    ]
    other = RepeatedEvent(GaussianEvent(3.0), 7)
    _pld_lower._composed_profiles.cache_clear()
    fresh = [epsilon_lower_bound(ways[0], 1e-6), delta_lower_bound(ways[0], 1.0)]
    for event in (*ways, other, GaussianEvent(2.0), ways[1]):
        epsilon_lower_bound(event, 1e-5)
    assert [epsilon_lower_bound(ways[1], 1e-6), delta_lower_bound(ways[1], 1.0)] == fresh
    profiles = _pld_lower._profiles(ways[0], 3e-5, 1e-15, "test")
    masses = profiles[0].parts[0].masses
    assert isinstance(masses, np.ndarray) and not masses.flags.writeable
    with pytest.raises(ValueError):
        masses[0] = 1.0
