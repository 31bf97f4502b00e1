"""The DP-SGD one-run audit: valid against dpkit's accountant, non-trivial, and it catches a bug."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpkit.accounting import dpsgd_epsilon, gaussian_epsilon
from dpkit.audit.dpsgd import audit_dpsgd_one_run
from dpkit.audit.one_run import one_run_epsilon
from dpkit.errors import DataError, InvalidParameter
from dpkit.testing import seeded

# Full-batch DP-SGD with sigma = 2 over 4 steps is the Gaussian mechanism with
# sigma / sqrt(4) = 1 on each canary: epsilon(1e-5) = 4.38 exactly (PLD is tight here).
SMALL = {"canaries": 1000, "steps": 4, "delta": 1e-5, "k_plus": 50, "k_minus": 50}


def _allowed_exceedances(repetitions: int, confidence: float) -> int:
    # Each bound exceeds the true epsilon with probability <= 1 - confidence, so the
    # count is stochastically below Binomial(reps, 1 - confidence); fail at 1e-6.
    return int(stats.binom.isf(1e-6, repetitions, 1 - confidence))


def test_claim_is_the_accountants() -> None:
    result = audit_dpsgd_one_run(noise_multiplier=2.0, rng=seeded(0), **SMALL)
    assert result.claimed_epsilon == dpsgd_epsilon(
        sampling_probability=1.0, noise_multiplier=2.0, steps=4, delta=1e-5, accountant="pld"
    )
    assert result.claimed_epsilon == pytest.approx(gaussian_epsilon(1.0, 1e-5), rel=1e-3)
    r, v = result.one_run.r, result.one_run.v
    assert r == 100 and result.epsilon_lower_bound == one_run_epsilon(1000, r, v, delta=1e-5)
    assert result.accuracy > 0.75  # the run is a real training run (measured: 0.90)


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"noise_multiplier": 2.0}, id="gradient-full-batch"),
        pytest.param({"noise_multiplier": 2.0, "canary_type": "input"}, id="input-full-batch"),
        pytest.param(
            {"noise_multiplier": 1.0, "sampling_rate": 0.2, "steps": 20}, id="gradient-q0.2"
        ),
    ],
)
def test_validity_over_seeds(settings: dict[str, Any]) -> None:
    reps = 12
    kwargs = {**SMALL, **settings}
    results = [audit_dpsgd_one_run(**kwargs, rng=child) for child in seeded(21).spawn(reps)]
    claimed = results[0].claimed_epsilon
    exceed = sum(r.epsilon_lower_bound > claimed for r in results)
    assert exceed <= _allowed_exceedances(reps, 0.95)
    # Recorded: no exceedance; bounds 1.0-2.5 against claims 4.38 (full batch) and
    # 6.62 (q = 0.2, 20 steps).
    assert max(r.epsilon_lower_bound for r in results) > 0.5


def test_non_trivial_with_gradient_canaries_and_small_noise() -> None:
    bounds = [
        audit_dpsgd_one_run(noise_multiplier=2.0, rng=seeded(s), **SMALL).epsilon_lower_bound
        for s in range(3)
    ]
    # Recorded over 10 seeds: mean 1.79, min 1.46 (SNJ23: 1.8 against 4 on CIFAR-10).
    assert all(1.0 < b < gaussian_epsilon(1.0, 1e-5) for b in bounds)


# The planted bug: training adds noise sigma = 2 but the accountant is told sigma = 4,
# so the claim (2.49 at delta = 1e-7) is less than half the truth (5.35). With 10^5
# gradient canaries and 500 + 500 guesses the bound measured 2.86 +- 0.12 over 20 seeds
# (min 2.61, all refuted): ~3 standard deviations above the claim, so each run refutes
# with probability >= 0.99 and fewer than 15 refutations of 20 has probability < 1e-7.
BUG = {
    "canaries": 100_000,
    "noise_multiplier": 4.0,
    "actual_noise_multiplier": 2.0,
    "steps": 4,
    "delta": 1e-7,
    "k_plus": 500,
    "k_minus": 500,
}


def test_planted_bug_is_refuted() -> None:
    results = [audit_dpsgd_one_run(**BUG, rng=child) for child in seeded(5).spawn(20)]
    assert results[0].claimed_epsilon == pytest.approx(gaussian_epsilon(2.0, 1e-7), rel=1e-3)
    assert sum(r.refuted for r in results) >= 15
    # The same audit of the honest run does not refute it.
    honest = audit_dpsgd_one_run(**{**BUG, "noise_multiplier": 2.0}, rng=seeded(5))
    assert not honest.refuted and honest.claimed_epsilon > 5.0


@pytest.mark.slow
def test_validity_many_seeds_large() -> None:
    reps = 100
    bounds = [
        audit_dpsgd_one_run(noise_multiplier=1.25, rng=child, **SMALL).epsilon_lower_bound
        for child in seeded(22).spawn(reps)
    ]
    claimed = gaussian_epsilon(1.25 / 2, 1e-5)
    assert sum(b > claimed for b in bounds) <= _allowed_exceedances(reps, 0.95)


def test_user_data() -> None:
    features = np.array([[1.0, 0.5], [1.0, -0.5], [1.0, 2.0], [1.0, -2.0]])
    labels = np.array([1.0, 0.0, 1.0, 0.0])
    result = audit_dpsgd_one_run(
        noise_multiplier=3.0,
        canaries=50,
        steps=2,
        delta=1e-5,
        k_plus=5,
        k_minus=5,
        data=(features, labels),
        accountant="rdp",
        rng=seeded(3),
    )
    assert result.accountant == "rdp" and result.one_run.m == 50
    assert 0.0 <= result.epsilon_lower_bound < result.claimed_epsilon


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"canaries": 0}, InvalidParameter),
        ({"canary_type": "weights"}, InvalidParameter),
        ({"noise_multiplier": 0.0}, InvalidParameter),
        ({"clip": -1.0}, InvalidParameter),
        ({"sampling_rate": 0.0}, InvalidParameter),
        ({"delta": 0.0}, InvalidParameter),
        ({"k_plus": 8, "k_minus": 3}, InvalidParameter),
        ({"accountant": "moments"}, InvalidParameter),
        ({"actual_noise_multiplier": -2.0}, InvalidParameter),
        ({"data": (np.ones((3, 2)), np.ones(4))}, DataError),
        ({"data": (np.ones((3, 2)), np.array([0.0, 2.0, 1.0]))}, DataError),
        ({"data": np.ones((3, 2))}, InvalidParameter),
    ],
    ids=[
        "canaries",
        "type",
        "sigma",
        "clip",
        "rate",
        "delta",
        "k>m",
        "accountant",
        "actual",
        "rows",
        "labels",
        "data-shape",
    ],
)
def test_bad_input(kwargs: dict[str, Any], error: type[Exception]) -> None:
    base = {
        "canaries": 10,
        "noise_multiplier": 1.0,
        "steps": 1,
        "delta": 1e-5,
        "k_plus": 2,
        "k_minus": 2,
        "rng": seeded(0),
    }
    with pytest.raises(error):
        audit_dpsgd_one_run(**{**base, **kwargs})
