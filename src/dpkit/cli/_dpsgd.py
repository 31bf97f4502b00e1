"""DP-SGD helpers of ``dpkit account``: the replace-one relation and attack bounds.

Library calls only (they raise :class:`~dpkit.errors.DPError`; the command turns that
into a message and exit code 2). Accountants are imported lazily, so ``dpkit --help``
stays fast.
"""

from __future__ import annotations

from typing import Any, Literal

from dpkit.errors import InvalidParameter

__all__ = ["attack_bounds", "replace_epsilon", "replace_sigma"]


def _replace_step(rate: float, sigma: float) -> Any:
    from dpkit.accounting import GaussianEvent, PoissonSampledEvent

    return PoissonSampledEvent(GaussianEvent(sigma), rate)


def replace_epsilon(rate: float, sigma: float, steps: int, delta: float) -> float:
    """Epsilon under replace-one: the PLD accountant's replace-one sampled Gaussian."""
    from dpkit import _validation as check
    from dpkit.accounting.pld import PLDAccountant

    owner = "dpkit account dpsgd"
    count = check.check_count(steps, "steps", owner)
    delta = check.check_delta(delta, owner, allow_zero=False)
    step = _replace_step(rate, check.check_positive(sigma, "noise_multiplier", owner))
    return PLDAccountant(relation="replace").compose(step, count=count).get_epsilon(delta)


def replace_sigma(rate: float, steps: int, epsilon: float, delta: float) -> float:
    """The smallest noise multiplier meeting (epsilon, delta) under replace-one."""
    from dpkit.accounting import RepeatedEvent
    from dpkit.accounting.calibrate import calibrate, dpsgd_noise_multiplier
    from dpkit.accounting.pld import PLDAccountant

    # Replacing one example moves the sum by at most twice what adding one does, so
    # twice the add/remove multiplier suffices; the answer lies between its quarter
    # and that (calibrate only returns a point it has checked).
    add_remove = dpsgd_noise_multiplier(
        sampling_probability=rate, steps=steps, target_epsilon=epsilon, delta=delta
    )

    def make_event(sigma: float) -> Any:
        step = _replace_step(rate, sigma)
        return step if steps == 1 else RepeatedEvent(step, steps)

    return calibrate(
        lambda: PLDAccountant(relation="replace"),
        make_event,
        target_epsilon=epsilon,
        target_delta=delta,
        bracket=(add_remove / 4, add_remove * 2.02),
    )


def attack_bounds(
    name: str, relation: str, rate: float, sigma: float, steps: int, fprs: list[float]
) -> list[float]:
    """The largest TPR at each FPR, from the same accountant's whole privacy profile."""
    from dpkit.accounting import GaussianEvent, PoissonSampledEvent
    from dpkit.accounting.pld import PLDAccountant
    from dpkit.accounting.rdp import RDPAccountant
    from dpkit.accounting.tradeoff import max_true_positive_rate

    if not fprs:
        return []
    step = PoissonSampledEvent(GaussianEvent(sigma), rate)
    for value in fprs:
        if not 0.0 <= value <= 1.0:  # also refuses NaN
            raise InvalidParameter(f"--fpr must be a false-positive rate in [0, 1]; got {value!r}.")
    pld_relation: Literal["add_remove", "replace"] = (
        "replace" if relation == "replace" else "add_remove"
    )
    accountant = RDPAccountant() if name == "rdp" else PLDAccountant(relation=pld_relation)
    composed = accountant.compose(step, count=steps)
    return [float(v) for v in max_true_positive_rate(composed, fprs)]
