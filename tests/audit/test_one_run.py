"""One-run auditing (Steinke, Nasr & Jagielski 2023): the paper's numbers and the theorem."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting._math.gaussian import gaussian_epsilon
from dpkit.audit import (
    audit_gaussian_sum_one_run,
    guesses,
    one_run_audit,
    one_run_epsilon,
    p_value,
)
from dpkit.errors import DPError
from dpkit.testing import seeded

# shared/papers/auditing.md, section 1.3 (SNJ23, Appendix D; the last row is the
# paper's section 7 "epsilon >= 2.675").
VECTORS = [
    pytest.param(100, 100, 75, 0.0, 0.7022139, id="m100-r100-v75-d0"),
    pytest.param(100, 100, 75, 1e-4, 0.6994668, id="m100-r100-v75-d1e-4"),
    pytest.param(1000, 100, 75, 1e-4, 0.6729847, id="m1000-r100-v75-d1e-4"),
    pytest.param(100000, 1510, 1439, 1e-5, 2.6758510, id="paper-sec7"),
]


def test_p_value_vector() -> None:
    assert p_value(100, 100, 75, epsilon=math.log(3), delta=0.0) == pytest.approx(
        0.5534708, abs=1e-6
    )


@pytest.mark.parametrize(("m", "r", "v", "delta", "expected"), VECTORS)
def test_epsilon_vectors(m: int, r: int, v: int, delta: float, expected: float) -> None:
    assert one_run_epsilon(m, r, v, delta=delta, confidence=0.95) == pytest.approx(
        expected, abs=1e-6
    )


@pytest.mark.parametrize("r", [5, 16, 50])
def test_closed_form_all_correct(r: int) -> None:
    # delta = 0, v = r: p-value q^r, so the bound is -ln(p^(-1/r) - 1) (to 4 / 2^30).
    expected = -math.log(0.05 ** (-1 / r) - 1)
    assert one_run_epsilon(r, r, r, delta=0.0) == pytest.approx(expected, abs=4 / 2**30)
    assert one_run_epsilon(r, r, r, delta=0.0) <= expected


def test_bound_is_conservative_end_and_monotone() -> None:
    bound = one_run_epsilon(100, 100, 75, delta=0.0)
    assert p_value(100, 100, 75, epsilon=bound, delta=0.0) < 0.05
    assert one_run_epsilon(100, 100, 80, delta=0.0) > bound  # more correct: larger
    assert one_run_epsilon(100, 100, 75, delta=1e-3) < bound  # more delta: smaller
    assert one_run_epsilon(100, 100, 50, delta=0.0) == 0.0  # chance level: nothing


def test_guesses_abstain_in_the_middle() -> None:
    t = guesses([0.1, 5.0, -3.0, 2.0, 0.0], k_plus=2, k_minus=1)
    assert t.tolist() == [0, 1, -1, 1, 0]


def test_one_run_audit_counts() -> None:
    result = one_run_audit(
        [True, True, False, False, True, False],
        [9.0, 8.0, -1.0, 7.0, 0.0, -5.0],
        k_plus=3,
        k_minus=2,
        delta=0.0,
    )
    # Guesses: + for 9, 8, 7; - for -5, -1; abstain on 0.  Correct: 9, 8, -1, -5.
    assert (result.m, result.r, result.v) == (6, 5, 4)
    assert result.epsilon_lower_bound == one_run_epsilon(6, 5, 4, delta=0.0)


def test_white_box_gaussian_m1000() -> None:
    sigma, delta = 1.0, 1e-5
    true_epsilon = gaussian_epsilon(sigma, delta)  # ~4.38
    bounds = [
        audit_gaussian_sum_one_run(
            1000, sigma=sigma, k_plus=50, k_minus=50, delta=delta, rng=seeded(seed)
        ).epsilon_lower_bound
        for seed in range(5)
    ]
    # Recorded: 1.63, 1.59, 1.54, 1.63, 1.59 -- valid and far from trivial, but well
    # below the true 4.38 (SNJ23's bound is loose for m = 1000 and 100 guesses).
    assert all(1.0 < b < true_epsilon for b in bounds)
    interfering = audit_gaussian_sum_one_run(
        200, sigma=sigma, k_plus=20, k_minus=20, delta=delta, dimension=400, rng=seeded(9)
    )
    assert 0.0 <= interfering.epsilon_lower_bound < true_epsilon


@pytest.mark.parametrize(
    "call",
    [
        lambda: one_run_epsilon(10, 11, 5, delta=0.0),
        lambda: one_run_epsilon(10, 5, 6, delta=0.0),
        lambda: one_run_epsilon(10, 5, 3, delta=1.0),
        lambda: one_run_epsilon(10, 5, 3, delta=0.0, confidence=1.0),
        lambda: p_value(10, 5, 3, epsilon=-1.0, delta=0.0),
        lambda: guesses([1.0, 2.0], k_plus=2, k_minus=1),
        lambda: one_run_audit([1, 0], [1.0, 2.0], k_plus=1, k_minus=1, delta=0.0),
        lambda: one_run_audit([True], [1.0, 2.0], k_plus=1, k_minus=0, delta=0.0),
    ],
    ids=["r>m", "v>r", "delta1", "conf1", "eps<0", "k>m", "not-signs", "lengths"],
)
def test_bad_input(call: object) -> None:
    assert callable(call)
    with pytest.raises(DPError):
        call()


def test_gaussian_scores_are_finite() -> None:
    result = audit_gaussian_sum_one_run(
        50, sigma=2.0, k_plus=5, k_minus=5, delta=0.0, rng=seeded(1)
    )
    assert result.r == 10 and np.isfinite(result.epsilon_lower_bound)
