"""Choose before running: the three constructions side by side, and a loss-contract check.

:func:`compare` answers "my mechanism is ``(epsilon, delta)``-DP and fails beyond
``alpha`` with probability ``beta``: what does each never-fail construction cost and
guarantee?" (``dpkit reliability plan`` prints it). :func:`check_loss_sensitivity`
tests the sensitivity contract of a loss on neighbouring pairs you supply: the cheap
detection the contract allows (no finite test proves it).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dpkit import _validation as check
from dpkit.accounting._math.rounding import up
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.errors import InvalidParameter
from dpkit.reliability._base import check_alpha, check_beta
from dpkit.reliability.guarantees import (
    absorb_failure,
    base_parameters,
    repeat_until_success,
    truncation,
)
from dpkit.reliability.pure import DEFAULT_STOP_PROBABILITY, reduce_failure
from dpkit.reliability.repeat import default_max_attempts

__all__ = ["ConstructionCost", "check_loss_sensitivity", "compare"]


@dataclass(frozen=True, slots=True)
class ConstructionCost:
    """One construction at a glance.

    Attributes
    ----------
    construction:
        ``"absorb_failure"``, ``"repeat_until_success"`` or ``"reduce_failure"``.
    guarantee:
        Its privacy guarantee.
    loss_bound:
        Releases have loss at most this ...
    failure_probability:
        ... except with at most this probability (a raised
        :class:`~dpkit.reliability.AttemptsExhausted` counts as a failure).
    expected_attempts:
        Upper bound on the expected number of runs of the base mechanism.
    """

    construction: str
    guarantee: PureDP | ApproxDP
    loss_bound: float
    failure_probability: float
    expected_attempts: float


def compare(
    base_guarantee: PureDP | ApproxDP,
    *,
    failure_probability: float,
    alpha: float,
    loss_guarantee: PureDP | ApproxDP | None = None,
    loss_sensitivity: float = 1.0,
    stop_probability: float = DEFAULT_STOP_PROBABILITY,
) -> list[ConstructionCost]:
    """The three constructions for a base mechanism with guarantee ``base_guarantee``.

    * absorb the failure into delta (:func:`absorb_failure`): loss ``<= alpha`` always;
    * repeat until success (:func:`repeat_until_success`, default cap): loss
      ``<= alpha + 2 tau``, fails (raises at the cap) with probability ``<= beta^T``;
    * pure-DP reduction (:func:`reduce_failure`, only for a pure base), with the margin
      ``t = tau`` so that its loss bound equals the previous row's.

    ``loss_guarantee`` is the loss estimate's ``(epsilon_z, delta_z)`` (default: the base
    guarantee's epsilon, and its delta -- or 1e-6 when the base is pure). The absorb row
    is left out when its delta would reach 1, and the pure variant when the base has a
    delta. Repeat until success is the reference row: when its theorem does not apply
    (``beta >= 1 - delta_bar``, a loss estimate without delta) ``compare`` raises
    :class:`~dpkit.errors.InvalidParameter` with the reason, as ``dpkit reliability
    plan`` reports it.
    """
    owner = "compare"
    epsilon, delta = base_parameters(base_guarantee, "base_guarantee", owner)
    beta = check_beta(failure_probability, owner)
    alpha = check_alpha(alpha, owner)
    if loss_guarantee is None:
        loss_guarantee = ApproxDP(epsilon, delta if delta > 0 else 1e-6)
    epsilon_z, delta_z = base_parameters(loss_guarantee, "loss_guarantee", owner)
    rows: list[ConstructionCost] = []
    with contextlib.suppress(InvalidParameter):  # delta >= 1: the row does not apply
        rows.append(
            ConstructionCost(
                "absorb_failure",
                absorb_failure(base_guarantee, failure_probability=beta),
                alpha,
                0.0,
                1.0,
            )
        )
    attempts = 1.0 / (1.0 - beta)
    uncapped = repeat_until_success(
        base_guarantee, failure_probability=beta, loss_guarantee=loss_guarantee
    )
    cap = default_max_attempts(uncapped, beta)
    guarantee = repeat_until_success(
        base_guarantee, failure_probability=beta, loss_guarantee=loss_guarantee, max_attempts=cap
    )
    tau = truncation(epsilon=epsilon_z, delta=delta_z, sensitivity=loss_sensitivity)
    cap_failure = 0.0 if beta == 0.0 else min(1.0, math.exp(cap * math.log(beta)) * (1 + 1e-9))
    rows.append(
        ConstructionCost(
            "repeat_until_success",
            guarantee,
            up(up(alpha + tau) + tau),  # as RepeatUntilSuccess.loss_bound
            cap_failure,
            attempts,
        )
    )
    if delta == 0.0:
        plan = reduce_failure(
            PureDP(epsilon),
            failure_probability=beta,
            alpha=alpha,
            margin=tau,
            loss_epsilon=epsilon_z,
            loss_sensitivity=loss_sensitivity,
            stop_probability=stop_probability,
        )
        rows.append(
            ConstructionCost(
                "reduce_failure",
                plan.guarantee,
                plan.loss_bound,
                plan.failure_probability,
                # E[min(K, first acceptance)] = 1/(gamma + p - gamma p) (LT19 Alg. 1)
                1.0 / (stop_probability + plan.acceptance_probability * (1 - stop_probability)),
            )
        )
    return rows


def check_loss_sensitivity(
    loss: Callable[[Any, Any], Any],
    outputs: Iterable[Any],
    neighbours: Sequence[tuple[Any, Any]],
    *,
    sensitivity: float = 1.0,
) -> None:
    """Check ``|loss(y, x) - loss(y, x')| <= sensitivity`` for every output and pair given.

    Raises :class:`~dpkit.errors.InvalidParameter` naming the first output and pair (by
    index) that break the contract. Passing proves nothing beyond the pairs tried; use
    it in tests with adversarial neighbours (the extremes of the data's bounds).
    """
    owner = "check_loss_sensitivity"
    sensitivity = check.check_positive(sensitivity, "sensitivity", owner)
    pairs = list(neighbours)
    if not pairs:
        raise InvalidParameter.for_parameter(
            "neighbours", owner, "a non-empty sequence of (x, x_prime) pairs", neighbours
        )
    for i, output in enumerate(outputs):
        for j, (x, x_prime) in enumerate(pairs):
            change = abs(float(loss(output, x)) - float(loss(output, x_prime)))
            if not change <= sensitivity:
                raise InvalidParameter(
                    f"{owner}: the loss of output #{i} changes by more than "
                    f"sensitivity={sensitivity!r} between the datasets of pair #{j}; it does "
                    "not meet the contract of RepeatUntilSuccess / ReducedFailure (declare "
                    "loss_sensitivity=, or rescale the loss)."
                )
