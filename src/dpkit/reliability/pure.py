"""Reduce -- not remove -- the failure probability without delta: a Laplace loss estimate.

The end of Steinke's post: with ``delta = 0`` the loss estimate cannot be truncated, so
a plain Laplace estimate ``Z = l(Y, x) + Lap(s/epsilon_z)`` can report a low loss for
a bad output, and failure is only made rarer. dpkit runs it with the private-selection
machinery: :func:`dpkit.selection.thresholding` (Liu & Talwar 2019, Alg. 1) with the
candidate "run ``M``, score ``-Z``" and the target ``-(alpha + t)``. It releases the
first output whose noisy loss is at most ``alpha + t``, or stops after a
``gamma``-coin (``stop_probability``), so it always ends -- and raises
:class:`~dpkit.reliability.AttemptsExhausted` then, never returns quietly.

Privacy: the candidate is ``eps_bar = epsilon + epsilon_z``-DP; thresholding makes it
``2 eps_bar``-DP (LT19 Thm 3.1; equally Theorem 1 of the post with ``delta_bar = 0``),
or ``2 eps_bar + 2 e^(-T gamma)`` with a cap ``T`` (see
:func:`dpkit.selection.thresholding_event`).

Failure (derived here). Let ``r = e^(-(t - g) epsilon_z / s) / 2`` (``g`` the grid
step of the estimate, ``s`` the loss sensitivity): a Laplace draw exceeds ``t - g`` on
one side with probability ``r``, and the grid moves ``Z`` by at most ``g/2``. One draw is
accepted with probability at least ``p = (1 - beta)(1 - r)``. An accepted output with
loss above ``alpha + 2t`` needs the noise below ``-(t - g)``, so
``P[accepted and bad] <= beta r``; the release's law is that of an accepted draw, so::

    P[no release or loss > alpha + 2t] <= gamma (1 - p)/(gamma + p - gamma p) + beta r / p

(the first term is LT19 Thm 3.1's exact chance of stopping first; its capped form is
:meth:`dpkit.mechanisms.FailureBound.failure_probability`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.rounding import sum_up, up
from dpkit.accounting.events import Event, PureEvent, pure_epsilon
from dpkit.accounting.guarantees import PureDP
from dpkit.errors import CandidateFailed, InternalError, InvalidParameter
from dpkit.mechanisms._base import Release, failure_probability
from dpkit.mechanisms.laplace import Laplace
from dpkit.random import Random, RandomLike, as_random
from dpkit.reliability._base import (
    AttemptsExhausted,
    Loss,
    MechanismFailed,
    as_base,
    check_alpha,
    check_beta,
    check_callable,
    evaluate_loss,
)
from dpkit.reliability.guarantees import base_parameters
from dpkit.selection import Candidate, thresholding, thresholding_event

__all__ = ["ReducedFailure", "ReducedFailurePlan", "reduce_failure"]

#: Default gamma: the run stops on its own with probability 1e-6 per rejected draw.
DEFAULT_STOP_PROBABILITY = 1e-6


@dataclass(frozen=True, slots=True)
class ReducedFailurePlan:
    """What :class:`ReducedFailure` guarantees, from public values only.

    ``guarantee`` is pure DP; with probability at least ``1 - failure_probability`` a
    release happens and has loss at most ``loss_bound = alpha + 2t``. One draw is
    accepted with probability at least ``acceptance_probability`` (``p``).
    """

    guarantee: PureDP
    loss_bound: float
    failure_probability: float
    acceptance_probability: float
    event: Event


def _laplace(epsilon: float, sensitivity: float) -> Laplace:
    return Laplace.calibrate(epsilon=epsilon, sensitivity=sensitivity)


def _plan(
    epsilon: float,
    beta: float,
    alpha: float,
    margin: float,
    estimate: Laplace,
    gamma: float,
    cap: int | None,
) -> ReducedFailurePlan:
    event = thresholding_event(
        PureEvent(sum_up((epsilon, estimate.epsilon))), stop_probability=gamma, max_draws=cap
    )
    total = pure_epsilon(event)
    if total is None:  # thresholding a pure candidate is pure (LT19 Thm 3.1)
        raise InternalError(f"reduce_failure: {event!r} has no pure-DP epsilon.")
    slack = margin - estimate.granularity
    # r rounded up (exp of a value stepped up), p rounded down: the bound only grows.
    r = up(0.5 * math.exp(up(-slack / estimate.scale, 2)), 2) if slack > 0 else 1.0
    p = ((1.0 - beta) * (1.0 - r)) * (1 - 1e-15)
    if not p > 0.0:
        failure = 1.0
    else:
        failure = min(1.0, up(failure_probability(p, gamma, cap) + beta * r / p, 4))
    return ReducedFailurePlan(
        guarantee=PureDP(total),
        loss_bound=up(alpha + 2 * margin),
        failure_probability=failure,
        acceptance_probability=max(p, 0.0),
        event=event,
    )


def reduce_failure(
    base_guarantee: PureDP,
    *,
    failure_probability: float,
    alpha: float,
    margin: float,
    loss_epsilon: float,
    loss_sensitivity: float = 1.0,
    stop_probability: float = DEFAULT_STOP_PROBABILITY,
    max_attempts: int | None = None,
) -> ReducedFailurePlan:
    """The guarantee and remaining failure of :class:`ReducedFailure`, before running it.

    Parameters as for :class:`ReducedFailure`, with the base mechanism's ``PureDP``
    guarantee. See the module docstring for the bound.

    Examples
    --------
    >>> import dpkit as dp
    >>> plan = dp.reliability.reduce_failure(
    ...     dp.PureDP(0.5), failure_probability=0.05, alpha=6.0, margin=20.0, loss_epsilon=0.5
    ... )
    >>> plan.guarantee, round(plan.loss_bound, 9), plan.failure_probability < 3e-6
    (PureDP(epsilon=2.0), 46.0, True)
    """
    owner = "reduce_failure"
    epsilon, delta = base_parameters(base_guarantee, "base_guarantee", owner)
    if delta > 0.0:
        raise InvalidParameter.for_parameter(
            "base_guarantee",
            owner,
            "a pure-DP guarantee (for (epsilon, delta) bases use RepeatUntilSuccess)",
            base_guarantee,
        )
    return _checked_plan(
        epsilon,
        failure_probability,
        alpha,
        margin,
        loss_epsilon,
        loss_sensitivity,
        stop_probability,
        max_attempts,
        owner,
    )


def _checked_plan(
    epsilon: float,
    beta: object,
    alpha: object,
    margin: object,
    loss_epsilon: object,
    sensitivity: object,
    gamma: object,
    cap: object,
    owner: str,
) -> ReducedFailurePlan:
    estimate = _laplace(
        check.check_epsilon(loss_epsilon, owner, name="loss_epsilon"),
        check.check_positive(sensitivity, "loss_sensitivity", owner),
    )
    return _plan(
        epsilon,
        check_beta(beta, owner),
        check_alpha(alpha, owner),
        check.check_positive(margin, "margin", owner),
        estimate,
        check.check_probability(gamma, "stop_probability", owner, open_low=True),
        None if cap is None else check.check_count(cap, "max_attempts", owner),
    )


class ReducedFailure:
    """Repeat a pure-DP mechanism until a Laplace estimate of its loss is low (pure DP).

    Parameters
    ----------
    mechanism:
        A pure-DP dpkit mechanism, or a callable ``mechanism(data, rng)`` with
        ``guarantee=dp.PureDP(...)``.
    loss, alpha, failure_probability:
        As for :class:`~dpkit.reliability.RepeatUntilSuccess` (the loss's sensitivity
        is ``loss_sensitivity``, by contract).
    margin:
        ``t > 0``: accept when the noisy loss is at most ``alpha + t``; releases have
        loss at most ``alpha + 2t`` except with the probability stated below.
    loss_epsilon:
        ``epsilon_z`` of the Laplace loss estimate.
    stop_probability:
        ``gamma`` of thresholding: after each rejected draw the run stops with this
        probability (default 1e-6).
    max_attempts:
        Optional cap ``T`` (changes the guarantee as :func:`dpkit.selection.thresholding`
        states).

    Privacy
    -------
    ``2 (epsilon + epsilon_z)``-DP (LT19 Thm 3.1), or the capped form of
    :func:`dpkit.selection.thresholding_event`.

    Accuracy
    --------
    With probability at least ``1 -`` :attr:`remaining_failure_probability` a release
    happens and has loss ``<= alpha + 2t``; otherwise
    :class:`~dpkit.reliability.AttemptsExhausted` is raised or the loss is larger
    (bound in the module docstring). Failure is reduced, not removed.
    """

    def __init__(
        self,
        mechanism: object,
        *,
        loss: Loss,
        alpha: float,
        failure_probability: float,
        margin: float,
        loss_epsilon: float,
        loss_sensitivity: float = 1.0,
        stop_probability: float = DEFAULT_STOP_PROBABILITY,
        max_attempts: int | None = None,
        guarantee: PureDP | None = None,
    ) -> None:
        owner = "ReducedFailure"
        self._function, base = as_base(mechanism, guarantee, owner)
        if not isinstance(base, PureDP):
            raise InvalidParameter.for_parameter(
                "guarantee", owner, "a pure-DP (dp.PureDP) base mechanism", base
            )
        self.base_guarantee = base
        self.loss = check_callable(loss, "loss", owner, "a callable loss(output, data)")
        self.plan = _checked_plan(
            base.epsilon,
            failure_probability,
            alpha,
            margin,
            loss_epsilon,
            loss_sensitivity,
            stop_probability,
            max_attempts,
            owner,
        )
        self.alpha = float(alpha)
        self.margin = float(margin)
        self.stop_probability = float(stop_probability)
        self.max_attempts = max_attempts
        self.loss_noise = _laplace(float(loss_epsilon), float(loss_sensitivity))

    @property
    def guarantee(self) -> PureDP:
        return self.plan.guarantee

    @property
    def event(self) -> Event:
        return self.plan.event

    @property
    def loss_bound(self) -> float:
        """``alpha + 2t``."""
        return self.plan.loss_bound

    @property
    def remaining_failure_probability(self) -> float:
        """Bound on P[no release, or a release with loss above :attr:`loss_bound`]."""
        return self.plan.failure_probability

    def release(self, data: Any, *, rng: RandomLike | None = None) -> Release[Any]:
        """Run thresholding on "``M``, scored by minus its noisy loss"; release the output.

        Raises :class:`AttemptsExhausted` when the run stops without an accepted draw and
        :class:`MechanismFailed` when the mechanism or the loss raises (both carry this
        wrapper's event and guarantee).
        """
        owner = "ReducedFailure.release"
        random = as_random(rng)
        estimate = self.loss_noise

        def draw(rng: Random) -> tuple[float, Any]:
            output = self._function(data, rng)
            exact = evaluate_loss(self.loss, output, data, owner)
            noisy = noise.laplace(
                exact, scale=estimate.scale, granularity=estimate.granularity, rng=rng
            )
            return -float(noisy), output

        candidate = Candidate(
            draw, PureEvent(sum_up((self.base_guarantee.epsilon, estimate.epsilon)))
        )
        try:
            selected = thresholding(
                candidate,
                threshold=-(self.alpha + self.margin),
                stop_probability=self.stop_probability,
                max_draws=self.max_attempts,
                rng=random,
            )
        except CandidateFailed as err:
            raise MechanismFailed(
                f"{owner}: the mechanism or the loss raised. This is the release's output: "
                f"charge its event {self.event!r}.",
                event=self.event,
                guarantee=self.guarantee,
            ) from err.__cause__
        if selected.value is None:
            raise AttemptsExhausted(
                f"{owner}: the run stopped before a noisy loss reached alpha + margin. This "
                f"is the release's output: charge its event {self.event!r}.",
                event=self.event,
                guarantee=self.guarantee,
            )
        return Release(
            value=selected.value.output,
            error=None,
            event=self.event,
            guarantee=self.guarantee,
            mechanism="ReducedFailure",
            secure=random.secure,
        )
