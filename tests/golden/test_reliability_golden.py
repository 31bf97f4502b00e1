"""Golden values for the never-fail calculators (Steinke 2025; ``shared/papers/never-fail.md``).

The table was computed independently with mpmath at 50 significant digits from the
theorems' formulas, the float inputs read exactly (``mp.mpf(1e-6)`` is the double
nearest 1e-6):

* Theorem 2: ``eps~ = 4 eps - ln(1 - 2 delta/(1 - beta))``, ``delta~ = 2 delta/(1 - beta)``;
* absorbing the failure (digest §2, the proven bound): ``delta + (1 + e^eps) beta``;
* the truncated-Laplace support (digest §3.1): ``A = (1/eps) ln(1 + (e^eps - 1)/(2 delta))``.

dpkit must agree to 1e-12 relative and never be below the exact value (its rounding is
conservative). A live mpmath check repeats this on a grid, including Theorem 1 with an
unequal split and the cap's term.
"""

from __future__ import annotations

import itertools

import mpmath as mp
import pytest

import dpkit as dp
from dpkit.reliability import absorb_failure, repeat_until_success, truncation

REL = 1e-12

# (epsilon, delta, beta) -> (eps~, delta~), Theorem 2 (mpmath, 17 digits)
THEOREM_2 = [
    ((1.0, 1e-6, 0.05), (4.000002105265374, 2.1052631578947368e-6)),
    ((0.5, 1e-7, 0.1), (2.0000002222222469, 2.2222222222222221e-7)),
    ((0.1, 1e-9, 0.5), (0.40000000400000003, 4.0000000000000002e-9)),
    ((2.0, 1e-3, 0.9), (8.0202027073175195, 0.020000000000000005)),
    ((1.0, 1e-5, 0.0), (4.0000200002000027, 2.0000000000000002e-5)),
    ((3.0, 1e-2, 0.97), (13.098612288668108, 0.66666666666666609)),
]

# (epsilon, delta, beta) -> delta + (1 + e^eps) beta
ABSORB = [
    ((1.0, 0.0, 1e-9), 3.7182818284590455e-9),
    ((0.5, 1e-6, 1e-8), 1.0264872127070012e-6),
    ((0.0, 0.0, 0.25), 0.5),
    ((2.0, 1e-7, 1e-10), 1.0083890560989306e-7),
    ((5.0, 0.0, 1e-6), 0.0001494131591025766),
]

# (epsilon, delta) -> A for sensitivity 1
SUPPORT = [
    ((1.0, 1e-6), 13.663689395969983),
    ((0.5, 1e-6), 25.379228661641106),
    ((2.0, 1e-3), 4.0347538134267548),
    ((0.1, 1e-9), 177.77950214359038),
]


def _guarantee(epsilon: float, delta: float) -> dp.PureDP | dp.ApproxDP:
    return dp.PureDP(epsilon) if delta == 0.0 else dp.ApproxDP(epsilon, delta)


def _close_above(got: float, exact: float) -> None:
    assert got >= exact * (1 - 1e-16), (got, exact)
    assert got == pytest.approx(exact, rel=REL, abs=1e-300)


@pytest.mark.parametrize(("args", "expected"), THEOREM_2, ids=[str(a) for a, _ in THEOREM_2])
def test_theorem_2_table(args: tuple[float, float, float], expected: tuple[float, float]) -> None:
    epsilon, delta, beta = args
    got = repeat_until_success(dp.ApproxDP(epsilon, delta), failure_probability=beta)
    _close_above(got.epsilon, expected[0])
    _close_above(got.delta, expected[1])


@pytest.mark.parametrize(("args", "expected"), ABSORB, ids=[str(a) for a, _ in ABSORB])
def test_absorb_table(args: tuple[float, float, float], expected: float) -> None:
    epsilon, delta, beta = args
    got = absorb_failure(_guarantee(epsilon, delta), failure_probability=beta)
    assert got.epsilon == epsilon
    _close_above(got.delta, expected)


@pytest.mark.parametrize(("args", "expected"), SUPPORT, ids=[str(a) for a, _ in SUPPORT])
def test_truncation_table(args: tuple[float, float], expected: float) -> None:
    epsilon, delta = args
    noise = dp.TruncatedLaplace.calibrate(epsilon=epsilon, delta=delta)
    _close_above(noise.bound, expected)
    tau = truncation(epsilon=epsilon, delta=delta)
    # tau = A + one grid step (the release is rounded to the grid), rounded up
    assert expected + noise.granularity <= tau <= (expected + noise.granularity) * (1 + REL)


def _theorem_1_exact(
    epsilon: float, delta: float, eps_z: float, delta_z: float, beta: float, cap: int | None
) -> tuple[mp.mpf, mp.mpf]:
    with mp.workdps(50):  # local precision: mpmath's global setting is shared
        eps_bar = mp.mpf(epsilon) + mp.mpf(eps_z)
        delta_bar = mp.mpf(delta) + mp.mpf(delta_z)
        b = mp.mpf(beta)
        delta_tilde = delta_bar / (1 - b)
        eps_tilde = 2 * eps_bar - mp.log(1 - delta_tilde)
        if cap is not None:
            delta_tilde += (1 + mp.e**eps_tilde) * b**cap
        return +eps_tilde, +delta_tilde


GRID = list(
    itertools.product(
        [0.1, 1.0, 2.5],  # epsilon
        [0.0, 1e-8, 1e-4],  # delta
        [(0.3, 1e-6), (1.0, 1e-3)],  # loss estimate (eps_z, delta_z)
        [0.0, 1e-3, 0.5],  # beta
        [None, 3, 40],  # cap
    )
)


@pytest.mark.parametrize(("epsilon", "delta", "split", "beta", "cap"), GRID)
def test_theorem_1_live(
    epsilon: float, delta: float, split: tuple[float, float], beta: float, cap: int | None
) -> None:
    eps_z, delta_z = split
    eps_exact, delta_exact = _theorem_1_exact(epsilon, delta, eps_z, delta_z, beta, cap)

    def run() -> dp.ApproxDP:
        return repeat_until_success(
            _guarantee(epsilon, delta),
            failure_probability=beta,
            loss_guarantee=dp.ApproxDP(eps_z, delta_z),
            max_attempts=cap,
        )

    if delta_exact >= 1:  # a cap too small for beta: refused, nothing to state
        with pytest.raises(dp.InvalidParameter, match="guarantees nothing"):
            run()
        return
    got = run()
    _close_above(got.epsilon, float(eps_exact))
    _close_above(got.delta, float(delta_exact))
