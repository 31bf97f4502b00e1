"""Amplification by Poisson subsampling: formulas against the posts, rounding, limits."""

from __future__ import annotations

import builtins
import math
from typing import Any

import mpmath
import pytest

from dpkit.accounting import ApproxDP, LaplaceEvent, PoissonSampledEvent, PureDP, pure_epsilon
from dpkit.accounting.subsampling import (
    OptionalDependencyError,
    amplified_delta,
    amplified_epsilon,
    amplify,
    epsilon_before_sampling,
    noise_ratio,
    noise_ratio_lower_bound,
    plot_noise_ratio,
)
from dpkit.errors import DPError, InvalidParameter

mpmath.mp.dps = 60

# p = 1 is the identity (tested below); mpmath's log(1 + expm1(x)) is not exact enough
# to compare a float with itself.
RATES = [1e-6, 1e-3, 0.01, 0.1, 0.5, 0.9]
EPSILONS = [1e-8, 1e-3, 0.1, 1.0, 5.0, 30.0, 750.0]


def exact_amplified(epsilon: float, p: float) -> mpmath.mpf:
    return mpmath.log(1 + mpmath.mpf(p) * mpmath.expm1(mpmath.mpf(epsilon)))


def exact_inverse(target: float, p: float) -> mpmath.mpf:
    return mpmath.log(1 + mpmath.expm1(mpmath.mpf(target)) / mpmath.mpf(p))


@pytest.mark.parametrize("p", RATES)
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_amplified_epsilon_is_a_tight_upper_bound(epsilon: float, p: float) -> None:
    value = amplified_epsilon(epsilon, sampling_probability=p)
    exact = exact_amplified(epsilon, p)
    assert value >= exact  # rounded up: never optimistic
    assert value <= exact * (1 + 1e-14)
    assert value <= epsilon


@pytest.mark.parametrize("p", RATES)
@pytest.mark.parametrize("target", EPSILONS)
def test_inverse_rounds_down_and_round_trips_below_target(target: float, p: float) -> None:
    inner = epsilon_before_sampling(target, sampling_probability=p)
    assert inner <= exact_inverse(target, p)
    assert inner >= exact_inverse(target, p) * (1 - 1e-14)
    # The calibrated mechanism never exceeds the target, with the library's own rounding.
    assert amplified_epsilon(inner, sampling_probability=p) <= target
    if inner < 700:  # PoissonSampledEvent overflows above ~709.78 (reported upstream)
        event_epsilon = pure_epsilon(PoissonSampledEvent(LaplaceEvent(1.0 / inner), p))
        assert event_epsilon == pytest.approx(target, rel=1e-14)


@pytest.mark.parametrize("p", [1e-4, 0.01, 0.1, 0.5, 0.99])
@pytest.mark.parametrize("target", [1e-4, 0.01, 0.3, 1.0, 4.0])
def test_the_posts_bounds_on_eps_p(target: float, p: float) -> None:
    # "Limits of ..." eq. 6: eps/(p+eps) <= ln(1 + eps/p) <= eps_p <= eps/p.
    eps_p = exact_inverse(target, p)
    lower = mpmath.log(1 + mpmath.mpf(target) / p)
    assert target / (p + target) <= lower <= eps_p <= mpmath.mpf(target) / p
    # ... and the ratio of eq. 7 lies in [p/(p+eps), 1].
    ratio = noise_ratio(target, sampling_probability=p)
    assert p / (p + target) * (1 - 1e-12) <= ratio <= 1.0


@pytest.mark.parametrize("p", [0.01, 0.1, 0.5])
def test_taylor_expansion_of_eps_p(p: float) -> None:
    # eq. 5: eps_p = eps/p - (1-p) eps^2/(2p^2) + (2-p)(1-p) eps^3/(6p^3) + O(eps^4):
    # the remainder divided by eps^4 stays bounded as eps -> 0.
    remainders = []
    for k in range(4, 9):
        eps = mpmath.mpf(p) * mpmath.mpf(10) ** (-k / 2)
        series = eps / p - (1 - p) * eps**2 / (2 * p**2) + (2 - p) * (1 - p) * eps**3 / (6 * p**3)
        remainders.append(abs(exact_inverse(float(eps), p) - series) / eps**4)
    assert max(remainders) < 2 * remainders[-1] + 1e-30
    # and the float function agrees with the series where the series is accurate
    eps = 1e-4 * p
    series = eps / p - (1 - p) * eps**2 / (2 * p**2) + (2 - p) * (1 - p) * eps**3 / (6 * p**3)
    assert epsilon_before_sampling(eps, sampling_probability=p) == pytest.approx(series, rel=1e-12)


def test_values_from_the_post() -> None:
    # "Limits of ...": with eps <= 2p the ratio is at least 1/2 ...
    assert noise_ratio_lower_bound(2.0) == pytest.approx(math.log(3) / 2)
    assert noise_ratio_lower_bound(2.0) > 0.5
    # ... and c / ln(1 + c) is the largest noise inflation when eps <= c p.
    assert 1 / noise_ratio_lower_bound(1.0) == pytest.approx(1 / math.log(2))


@pytest.mark.parametrize("c", [0.1, 0.5, 1.0, 2.0, 10.0])
def test_limits_bound_holds_and_is_approached(c: float) -> None:
    bound = noise_ratio_lower_bound(c)
    for p in [1e-6, 1e-3, 0.01, 0.1, 0.5, 1.0]:
        for fraction in [1e-3, 0.1, 0.5, 1.0]:
            ratio = noise_ratio(fraction * c * p, sampling_probability=p)
            assert ratio >= bound * (1 - 1e-12)
    # The infimum: p -> 0 with eps = c p.
    assert noise_ratio(c * 1e-9, sampling_probability=1e-9) == pytest.approx(bound, rel=1e-6)


def test_amplify_keeps_the_type_and_matches_the_event() -> None:
    pure = amplify(PureDP(1.0), sampling_probability=0.1)
    assert isinstance(pure, PureDP)
    assert pure.epsilon == amplified_epsilon(1.0, sampling_probability=0.1)
    event_epsilon = pure_epsilon(PoissonSampledEvent(LaplaceEvent(1.0), 0.1))
    assert event_epsilon == pytest.approx(pure.epsilon, rel=1e-15)
    approx = amplify(ApproxDP(1.0, 1e-5), sampling_probability=0.1)
    assert isinstance(approx, ApproxDP)
    assert approx.delta >= 1e-6 and approx.delta == pytest.approx(1e-6, rel=1e-15)
    assert amplified_delta(0.0, sampling_probability=0.3) == 0.0


def test_rate_one_and_zero_epsilon_are_identities() -> None:
    assert amplified_epsilon(0.7, sampling_probability=1.0) == 0.7
    assert epsilon_before_sampling(0.7, sampling_probability=1.0) == 0.7
    assert amplified_epsilon(0.0, sampling_probability=0.2) == 0.0
    assert epsilon_before_sampling(0.0, sampling_probability=0.2) == 0.0
    assert noise_ratio(3.0, sampling_probability=1.0) == 1.0


@pytest.mark.parametrize(
    ("function", "kwargs"),
    [
        (amplified_epsilon, {"epsilon": -1.0, "sampling_probability": 0.5}),
        (amplified_epsilon, {"epsilon": math.nan, "sampling_probability": 0.5}),
        (amplified_epsilon, {"epsilon": math.inf, "sampling_probability": 0.5}),
        (amplified_epsilon, {"epsilon": 1.0, "sampling_probability": 0.0}),
        (amplified_epsilon, {"epsilon": 1.0, "sampling_probability": 1.5}),
        (amplified_delta, {"delta": 1.0, "sampling_probability": 0.5}),
        (epsilon_before_sampling, {"target_epsilon": -0.1, "sampling_probability": 0.5}),
        (epsilon_before_sampling, {"target_epsilon": 0.1, "sampling_probability": True}),
        (noise_ratio, {"target_epsilon": 0.0, "sampling_probability": 0.5}),
        (noise_ratio_lower_bound, {"c": 0.0}),
        (amplify, {"guarantee": 1.0, "sampling_probability": 0.5}),
    ],
)
def test_bad_input(function: Any, kwargs: dict[str, Any]) -> None:
    if "epsilon" in kwargs and function is amplified_epsilon:
        with pytest.raises(InvalidParameter):
            function(kwargs["epsilon"], sampling_probability=kwargs["sampling_probability"])
        return
    if "delta" in kwargs:
        with pytest.raises(InvalidParameter):
            function(kwargs["delta"], sampling_probability=kwargs["sampling_probability"])
        return
    if "target_epsilon" in kwargs:
        with pytest.raises(InvalidParameter):
            function(kwargs["target_epsilon"], sampling_probability=kwargs["sampling_probability"])
        return
    if "c" in kwargs:
        with pytest.raises(InvalidParameter):
            function(kwargs["c"])
        return
    with pytest.raises(InvalidParameter):
        function(kwargs["guarantee"], sampling_probability=kwargs["sampling_probability"])


def test_plot_without_matplotlib_raises_a_dpkit_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    import sys

    for module in [m for m in sys.modules if m.startswith("matplotlib")]:
        monkeypatch.delitem(sys.modules, module)
    with pytest.raises(OptionalDependencyError, match=r"dpkit\[plot\]") as info:
        plot_noise_ratio()
    assert isinstance(info.value, DPError) and isinstance(info.value, ImportError)


def test_plot_with_matplotlib() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    ax = plot_noise_ratio([0.1, 0.01], epsilons=[0.001, 0.01, 0.1, 1.0])
    assert len(ax.get_lines()) == 3  # two curves and the reference line at 1
    with pytest.raises(InvalidParameter):
        plot_noise_ratio([])
