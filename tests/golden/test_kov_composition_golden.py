"""advanced_composition against diffprivlib and against the exact composition (issue 20).

``advanced_composition`` implements Kairouz, Oh & Viswanath 2015, Thm 3.4, the bound
diffprivlib's ``BudgetAccountant.total`` uses. Golden value transcribed from
diffprivlib's tests (``tests/test_BudgetAccountant.py::test_correct_composition``:
700 spends of 2^-9 with slack 2^-25 give 0.27832280615743646366..., to 14 places);
more values live from diffprivlib when it is installed. Never optimistic: at the
returned epsilon the exact delta of the k-fold composition (KOV Thm 3.3, summed in
log space) is at most delta'.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from dpkit.accounting import advanced_composition


def test_diffprivlib_golden_value() -> None:
    got = advanced_composition(2.0**-9, 0.0, 700, 2.0**-25)
    assert got.epsilon == pytest.approx(0.27832280615743646, abs=1e-14)
    assert got.epsilon >= 0.27832280615743646
    assert got.delta == 2.0**-25


CASES = [(0.01, 10_000, 1e-6), (0.1, 100, 1e-5), (0.5, 30, 1e-3), (1.0, 5, 1e-6), (0.05, 1, 0.1)]


@pytest.mark.parametrize(("epsilon", "count", "slack"), CASES)
def test_matches_diffprivlib_live(epsilon: float, count: int, slack: float) -> None:
    accountant_module = pytest.importorskip("diffprivlib.accountant")
    accountant = accountant_module.BudgetAccountant(slack=slack)
    for _ in range(count):
        accountant.spend(epsilon, 0.0)
    theirs, their_delta = accountant.total()
    got = advanced_composition(epsilon, 0.0, count, slack)
    assert got.epsilon == pytest.approx(theirs, rel=1e-12)
    assert got.epsilon >= theirs * (1 - 1e-15)
    assert got.delta == pytest.approx(their_delta, rel=1e-12)


def _exact_delta(epsilon: float, count: int, total: float) -> float:
    """delta(total) of k-fold epsilon-randomized response: the exact k-fold region."""
    ell = np.arange(count + 1, dtype=np.float64)
    log_p = -np.logaddexp(0.0, -epsilon)  # log(e^eps / (1 + e^eps))
    log_q = -np.logaddexp(0.0, epsilon)  # log(1 / (1 + e^eps))
    log_comb = special.gammaln(count + 1.0) - special.gammaln(ell + 1.0)
    log_comb -= special.gammaln(count - ell + 1.0)
    loss = (count - 2.0 * ell) * epsilon
    keep = loss > total
    if not keep.any():
        return 0.0
    logs = log_comb[keep] + (count - ell[keep]) * log_p + ell[keep] * log_q
    logs += np.log(-np.expm1(total - loss[keep]))
    return float(np.exp(special.logsumexp(logs)))


@pytest.mark.parametrize("epsilon", [0.005, 0.05, 0.3, 1.0])
@pytest.mark.parametrize("count", [1, 10, 300, 5000])
@pytest.mark.parametrize("slack", [1e-9, 1e-5, 1e-2, 0.5])
def test_never_optimistic_against_exact_composition(
    epsilon: float, count: int, slack: float
) -> None:
    got = advanced_composition(epsilon, 0.0, count, slack)
    assert _exact_delta(epsilon, count, got.epsilon) <= slack * (1 + 1e-9)


def test_tighter_than_dwork_rothblum_vadhan() -> None:
    # The 10%: DRV is ~10% above KOV for many small steps.
    eps, k, slack = 0.01, 10_000, 1e-6
    drv = math.sqrt(2 * k * math.log(1 / slack)) * eps + k * eps * math.expm1(eps)
    got = advanced_composition(eps, 0.0, k, slack).epsilon
    assert got < 0.93 * drv
