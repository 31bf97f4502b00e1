"""The selection mechanisms' public surface: validation, calibration, events, releases."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting.events import (
    ExponentialMechanismEvent,
    PermuteAndFlipEvent,
    ReportNoisyMaxEvent,
    zcdp_rho,
)
from dpkit.selection import (
    ExponentialMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
    exponential,
    permute_and_flip,
    report_noisy_max,
)
from dpkit.testing import check_mechanism, seeded

SCORES = [1.0, 4.0, 2.5, 4.0, -3.0]

MECHANISMS = {
    "exponential": lambda **kw: ExponentialMechanism(**kw),
    "rnm-gumbel": lambda **kw: ReportNoisyMax(noise="gumbel", **kw),
    "rnm-exponential": lambda **kw: ReportNoisyMax(noise="exponential", **kw),
    "rnm-laplace": lambda **kw: ReportNoisyMax(noise="laplace", **kw),
    "permute-and-flip": lambda **kw: PermuteAndFlip(**kw),
}

WRAPPERS = {
    "exponential": exponential,
    "report_noisy_max": report_noisy_max,
    "permute_and_flip": permute_and_flip,
}


@pytest.mark.parametrize("make", MECHANISMS.values(), ids=MECHANISMS.keys())
def test_contract(make) -> None:
    check_mechanism(make(epsilon=1.0, sensitivity=2.0), SCORES)


@pytest.mark.parametrize("make", MECHANISMS.values(), ids=MECHANISMS.keys())
@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, True, "1.0", None], ids=repr)
def test_rejects_bad_epsilon(make, bad) -> None:
    with pytest.raises(dp.InvalidParameter, match="epsilon"):
        make(epsilon=bad)


@pytest.mark.parametrize("make", MECHANISMS.values(), ids=MECHANISMS.keys())
@pytest.mark.parametrize("bad", [0.0, -2.0, math.nan, math.inf, False], ids=repr)
def test_rejects_bad_sensitivity(make, bad) -> None:
    with pytest.raises(dp.InvalidParameter, match="sensitivity"):
        make(epsilon=1.0, sensitivity=bad)


@pytest.mark.parametrize("bad", [1, "yes", None, 0.0], ids=repr)
def test_rejects_non_bool_monotonic(bad) -> None:
    with pytest.raises(dp.InvalidParameter, match="monotonic"):
        ExponentialMechanism(epsilon=1.0, monotonic=bad)


@pytest.mark.parametrize("bad", ["gauss", "Gumbel", None, 3], ids=repr)
def test_rejects_unknown_noise(bad) -> None:
    with pytest.raises(dp.InvalidParameter, match="noise"):
        ReportNoisyMax(epsilon=1.0, noise=bad)


def test_rejects_epsilon_over_sensitivity_too_small_to_compute() -> None:
    with pytest.raises(dp.InvalidParameter, match="too small"):
        ExponentialMechanism(epsilon=1e-200, sensitivity=1e200)


def test_weak_epsilon_warns() -> None:
    with pytest.warns(dp.WeakGuaranteeWarning):
        ExponentialMechanism(epsilon=20.0)


@pytest.mark.parametrize("make", MECHANISMS.values(), ids=MECHANISMS.keys())
@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ([], "empty"),
        ([1.0, math.nan], "NaN"),
        ([1.0, math.inf], "NaN or infinite"),
        ([1.0, -math.inf], "NaN or infinite"),
        (["a", "b"], "numbers"),
        ([True, False], "numbers"),
        ([[1.0, 2.0]], "1-dimensional"),
        (3.0, "1-dimensional"),
        ([1 + 2j], "numbers"),
    ],
    ids=["empty", "nan", "inf", "-inf", "strings", "bools", "2d", "scalar", "complex"],
)
def test_rejects_bad_scores(make, scores, message) -> None:
    with pytest.raises(dp.DataError, match=message):
        make(epsilon=1.0).release(scores, rng=seeded(0))


def test_integer_and_list_scores_are_accepted() -> None:
    assert ExponentialMechanism(epsilon=1.0).release([0, 100], rng=seeded(0)).value == 1
    assert ExponentialMechanism(epsilon=1.0).release(np.array([100, 0]), rng=seeded(0)).value == 0


@pytest.mark.parametrize(
    ("epsilon", "sensitivity", "monotonic", "exact"),
    [
        (1.0, 1.0, False, Fraction(1, 2)),
        (1.0, 1.0, True, Fraction(1)),
        (0.1, 3.0, False, Fraction(0.1) / 6),
        (0.7, 0.3, True, Fraction(0.7) / Fraction(0.3)),
        (2.0, 1e-300, False, Fraction(2.0) / (2 * Fraction(1e-300))),
    ],
)
def test_coefficient_is_rounded_down(epsilon, sensitivity, monotonic, exact) -> None:
    c = ExponentialMechanism(
        epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic
    ).coefficient
    assert Fraction(c) <= exact
    assert Fraction(math.nextafter(c, math.inf)) > exact  # and is the float just below
    assert (
        PermuteAndFlip(epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic).coefficient
        == c
    )


def test_scale_is_the_noise_scale_in_score_units() -> None:
    assert ReportNoisyMax(epsilon=1.0, noise="laplace").scale == 2.0
    assert ReportNoisyMax(epsilon=1.0, noise="laplace", monotonic=True).scale == 1.0
    scale = ReportNoisyMax(epsilon=0.3, sensitivity=0.7).scale
    assert Fraction(scale) >= 2 * Fraction(0.7) / Fraction(0.3)


def test_events_and_guarantees() -> None:
    assert ExponentialMechanism(epsilon=0.5).event == ExponentialMechanismEvent(0.5)
    assert ReportNoisyMax(epsilon=0.5).event == ExponentialMechanismEvent(0.5)
    assert ReportNoisyMax(epsilon=0.5, noise="exponential").event == PermuteAndFlipEvent(0.5)
    assert ReportNoisyMax(epsilon=0.5, noise="laplace").event == ReportNoisyMaxEvent(0.5)
    assert PermuteAndFlip(epsilon=0.5).event == PermuteAndFlipEvent(0.5)
    for make in MECHANISMS.values():
        assert make(epsilon=0.5, monotonic=True).guarantee == dp.PureDP(0.5)


def test_exponential_mechanism_zcdp_is_bounded_range() -> None:
    mechanism = ExponentialMechanism(epsilon=0.3)
    assert Fraction(mechanism.rho) >= Fraction(0.3) ** 2 / 8
    assert mechanism.rho == pytest.approx(0.3**2 / 8, rel=1e-15)
    assert mechanism.zcdp == dp.ZCDP(mechanism.rho)
    # The accountant's view of the event agrees (and is not larger).
    assert zcdp_rho(mechanism.event) <= mechanism.rho


@pytest.mark.parametrize("name", WRAPPERS)
def test_wrappers_return_a_release(name) -> None:
    release = WRAPPERS[name](SCORES, epsilon=1.0, sensitivity=1.0, rng=seeded(3))
    assert isinstance(release, dp.Release)
    assert isinstance(release.value, int) and 0 <= release.value < len(SCORES)
    assert release.error is None and release.secure is False
    assert release.guarantee == dp.PureDP(1.0)


def test_wrapper_matches_the_class() -> None:
    for seed in range(5):
        a = report_noisy_max(SCORES, epsilon=1.0, noise="laplace", monotonic=True, rng=seeded(seed))
        b = ReportNoisyMax(epsilon=1.0, noise="laplace", monotonic=True).release(
            SCORES, rng=seeded(seed)
        )
        assert a == b
        c = permute_and_flip(SCORES, epsilon=1.0, rng=seeded(seed))
        d = ReportNoisyMax(epsilon=1.0, noise="exponential").release(SCORES, rng=seeded(seed))
        assert c.value == d.value  # the same sampler, so the same draws


def test_single_candidate_is_always_chosen() -> None:
    for make in MECHANISMS.values():
        assert make(epsilon=1.0).release([7.5], rng=seeded(0)).value == 0


def test_secure_default_rng() -> None:
    release = exponential(SCORES, epsilon=1.0)
    assert release.secure is True


@pytest.mark.parametrize("make", MECHANISMS.values(), ids=MECHANISMS.keys())
def test_accuracy_bound(make) -> None:
    mechanism = make(epsilon=1.0)
    assert mechanism.accuracy(1) == 0.0
    loose = mechanism.accuracy(1000, confidence=0.99)
    assert loose > mechanism.accuracy(1000, confidence=0.9) > mechanism.accuracy(10, confidence=0.9)
    assert make(epsilon=1.0, monotonic=True).accuracy(1000, confidence=0.99) == pytest.approx(
        loose / 2, rel=1e-9
    )
    with pytest.raises(dp.InvalidParameter):
        mechanism.accuracy(0)
    with pytest.raises(dp.InvalidParameter):
        mechanism.accuracy(10, confidence=1.0)


def test_accuracy_closed_forms() -> None:
    # Gumbel: (n - 1) / (1 + e^z) = beta; exponential: (n - 1) e^-z / 2 = beta.
    n, beta = 101, 0.05
    gumbel = ExponentialMechanism(epsilon=1.0).accuracy(n, confidence=1 - beta)
    assert gumbel == pytest.approx(2 * math.log((n - 1) / beta - 1), rel=1e-9)
    flip = PermuteAndFlip(epsilon=1.0).accuracy(n, confidence=1 - beta)
    assert flip == pytest.approx(2 * math.log((n - 1) / (2 * beta)), rel=1e-9)
    laplace = ReportNoisyMax(epsilon=1.0, noise="laplace").accuracy(n, confidence=1 - beta)
    z = laplace / 2
    assert (n - 1) * (2 + z) * math.exp(-z) / 4 == pytest.approx(beta, rel=1e-9)


def test_repr() -> None:
    assert repr(ReportNoisyMax(epsilon=1.0, noise="laplace")) == (
        "ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise='laplace', monotonic=False)"
    )
    assert repr(ExponentialMechanism(epsilon=2.0)).startswith("ExponentialMechanism(epsilon=2.0")
