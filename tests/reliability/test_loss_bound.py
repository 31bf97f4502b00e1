"""The never-fail wrappers never release an output with loss above their bound.

Adversarial base mechanisms put their failures exactly where a margin mistake would
show: losses at ``alpha``, just inside ``alpha + 2 tau``, and just outside it (which
must never be released, whatever the noise), with a thick truncated-Laplace edge
(``delta_z = 0.2``) so that outputs near the bound are accepted often. Inputs include
large, negative and tiny values (the loss is evaluated on them as floats). The default
run has 2 x 10^4 releases per wrapper; ``--runslow`` runs 10^6.
"""

from __future__ import annotations

import math

import pytest

import dpkit as dp
from dpkit.reliability import NeverFail, RepeatUntilSuccess
from dpkit.testing import seeded

DEFAULT_RUNS = 20_000
SLOW_RUNS = 1_000_000
ALPHA = 2.0
INPUTS = (0.0, -3.5, 1e9, 5e-324)


def _repeat_wrapper() -> tuple[RepeatUntilSuccess, list[float]]:
    """Half the outputs at loss alpha, half spread over five levels around the bound."""
    probe = RepeatUntilSuccess(
        lambda x, rng: 0.0,
        loss=lambda y, x: y,
        alpha=ALPHA,
        failure_probability=0.5,
        guarantee=dp.PureDP(1.0),
        loss_guarantee=dp.ApproxDP(1.0, 0.2),
    )
    tau, bound = probe.margin, probe.loss_bound
    levels = [
        ALPHA,
        ALPHA + tau,
        ALPHA + 1.9 * tau,
        math.nextafter(bound, 0.0),  # inside, accepted only at the very edge of the noise
        math.nextafter(bound, math.inf),  # outside: must never be released
        ALPHA + 3 * tau,
    ]

    def base(x: float, rng: dp.Random) -> float:
        slot = rng.integers(10)
        return levels[0] if slot < 5 else levels[slot - 4]

    wrapper = RepeatUntilSuccess(
        base,
        loss=lambda y, x: y,  # the output *is* its loss (sensitivity 0 <= 1)
        alpha=ALPHA,
        failure_probability=0.5,
        guarantee=dp.PureDP(1.0),
        loss_guarantee=dp.ApproxDP(1.0, 0.2),
    )
    assert wrapper.loss_bound == bound
    return wrapper, levels


def _run_repeat(runs: int) -> None:
    wrapper, levels = _repeat_wrapper()
    rng = seeded(7)
    counts = dict.fromkeys(levels, 0)
    for i in range(runs):
        value = wrapper.release(INPUTS[i % len(INPUTS)], rng=rng).value
        counts[value] += 1
    assert counts[levels[4]] == counts[levels[5]] == 0  # zero outputs above the bound
    # not vacuous: outputs between alpha + tau and the bound do come out
    assert counts[levels[1]] > 0 and counts[levels[2]] > 0


def _never_fail_wrapper() -> NeverFail:
    levels = [0.0, ALPHA, math.nextafter(ALPHA, math.inf), 1e300]

    def base(x: float, rng: dp.Random) -> float:
        return x + levels[rng.integers(4)]

    return NeverFail(
        base,
        loss=lambda y, x: abs(y - x),
        alpha=ALPHA,
        failure_probability=0.01,  # (a valid bound is not needed for the loss guarantee)
        fallback=lambda x: x,
        guarantee=dp.PureDP(1.0),
    )


def _run_never_fail(runs: int) -> None:
    wrapper = _never_fail_wrapper()
    rng = seeded(8)
    for i in range(runs):
        x = INPUTS[i % len(INPUTS)]
        assert abs(wrapper.release(x, rng=rng).value - x) <= wrapper.loss_bound


def test_repeat_until_success_never_exceeds_its_bound() -> None:
    _run_repeat(DEFAULT_RUNS)


def test_never_fail_never_exceeds_alpha() -> None:
    _run_never_fail(DEFAULT_RUNS)


@pytest.mark.slow
def test_repeat_until_success_never_exceeds_its_bound_1e6() -> None:
    _run_repeat(SLOW_RUNS)


@pytest.mark.slow
def test_never_fail_never_exceeds_alpha_1e6() -> None:
    _run_never_fail(SLOW_RUNS)
