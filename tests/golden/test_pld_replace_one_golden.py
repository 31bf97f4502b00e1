"""Golden values for the Poisson-sampled Gaussian under replace-one (dp_accounting).

Transcribed (values only) from dp_accounting's ``privacy_loss_distribution_test.py``:
the ``REPLACE_ONE`` cases of ``from_gaussian_mechanism`` at grid width 1, as
(standard deviation, sensitivity, sampling probability) with the connect-the-dots
(pessimistic) and the optimistic PMFs. The pessimistic PMF's delta is an upper bound on
the exact delta at every eps and the optimistic one's a lower bound, so dpkit (fine
grid, pessimistic) must lie between them; dp_accounting asserts its PMFs to 1e-7
(``assertAlmostEqual``'s default places), within which we compare. Live: dpkit's
epsilon within 0.1% of dp_accounting's pessimistic value at the same grid (1e-4), as in
``test_pld_golden.py``: dp_accounting's values (0.4-1 s each, ~85% of that test's time)
are read from ``tests/golden/references/golden/test_pld_replace_one_golden.json``
(:func:`golden_reference`) except one case computed live in the default run, so the
cross-check against the installed dp_accounting still runs; ``pytest --runslow
tests/golden/test_references.py`` recomputes every stored value and requires it bit for
bit.
"""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant
from tests._references import golden_reference

from dpkit.accounting import GaussianEvent, PoissonSampledEvent
from dpkit.accounting.pld import PLDAccountant

# (sd, sensitivity, q): (connect-the-dots PMF {loss: mass}, its infinity mass,
#                        optimistic PMF {loss: mass})
TABLES = {
    (1.0, 1.0, 0.8): (
        {3: 0.152221152, 2: 0.243537311, 1: 0.256578347, 0: 0.183992937, -1: 0.094389899,
         -2: 0.040537836},
        0.028742519,
        {2: 0.27037153, 1: 0.26750658, 0: 0.23519769, -1: 0.14467727, -2: 0.02246166},
    ),
    (5.0, 5.0, 0.6): (
        {2: 0.194074972, 1: 0.332685221, 0: 0.293079816, -1: 0.148653245},
        0.031506747,
        {1: 0.34832823, 0: 0.35647862, -1: 0.20433917},
    ),
    (1.0, 2.0, 0.4): (
        {4: 0.052530086, 3: 0.073288168, 2: 0.111233661, 1: 0.222238357, 0: 0.415356732,
         -1: 0.101421687},
        0.023931308,
        {3: 0.10185336, 2: 0.08727219, 1: 0.13256016, 0: 0.36921424, -1: 0.19791765},
    ),
    (3.0, 6.0, 0.2): (
        {3: 0.029249326, 2: 0.048971483, 1: 0.171170848, 0: 0.666991966, -1: 0.071054043},
        0.012562334,
        {2: 0.05700155, 1: 0.06563991, 0: 0.47280851, -1: 0.25692876},
    ),
}  # fmt: skip
PLACES7 = 5e-8  # per transcribed mass; at most six masses per table


def _delta(pmf: dict[int, float], infinity: float, epsilon: float) -> float:
    return infinity + sum(
        m * -math.expm1(epsilon - loss) for loss, m in pmf.items() if loss > epsilon
    )


@pytest.mark.parametrize("key", list(TABLES), ids=[f"sd{k[0]}-s{k[1]}-q{k[2]}" for k in TABLES])
@pytest.mark.parametrize("epsilon", [0.0, 0.5, 1.0, 2.0])
def test_between_dp_accountings_pessimistic_and_optimistic_pmfs(
    key: tuple[float, float, float], epsilon: float
) -> None:
    sd, sensitivity, q = key
    pessimistic, infinity, optimistic = TABLES[key]
    event = PoissonSampledEvent(GaussianEvent(sd / sensitivity), q)
    ours = PLDAccountant(relation="replace").compose(event).get_delta(epsilon)
    slack = 6 * PLACES7
    assert _delta(optimistic, 0.0, epsilon) - slack <= ours
    assert ours <= _delta(pessimistic, infinity, epsilon) + slack


@golden_reference
def _theirs(z: float, q: float, count: int) -> float:
    """dp_accounting's replace-one epsilon at delta 1e-5 of ``count`` compositions of the
    Gaussian of noise multiplier ``z`` Poisson-sampled at rate ``q``."""
    theirs = pld_privacy_accountant.PLDAccountant(pld_privacy_accountant.NeighborRel.REPLACE_ONE)
    sampled = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
    theirs.compose(dp_accounting.SelfComposedDpEvent(sampled, count))
    return float(theirs.get_epsilon(1e-5))


@pytest.mark.parametrize(
    ("z", "q", "count", "live"),
    [
        (1.0, 0.01, 1, False),
        (1.0, 0.01, 1000, False),
        pytest.param(0.5, 0.4, 1, False, marks=pytest.mark.slow),
        (2.0, 0.1, 100, True),  # dp_accounting run now (the cheapest case, ~0.4 s)
        (1.0, 1.0, 1, False),
    ],
)
def test_within_a_tenth_of_a_percent_of_dp_accounting(
    z: float, q: float, count: int, live: bool
) -> None:
    reference = (_theirs.__wrapped__ if live else _theirs)(z, q, count)  # type: ignore[attr-defined]
    event = PoissonSampledEvent(GaussianEvent(z), q)
    ours = PLDAccountant(relation="replace").compose(event, count=count).get_epsilon(1e-5)
    assert ours == pytest.approx(reference, rel=1e-3)
