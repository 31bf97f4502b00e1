"""Repeat until success, with a truncated-Laplace estimate of the loss (Steinke 2025, Thm 1-2).

Construction (``shared/papers/never-fail.md`` §4; the idea of Gupta, Ligett, McSherry,
Roth & Talwar 2010, Thm 10.2, as the post presents it)::

    M-bar(x) = (Y, Z):  Y = M(x),  Z = l(Y, x) + TLap      (|TLap| <= tau always)
    M~(x):   repeat (y, z) = M-bar(x) with fresh randomness until z <= alpha + tau; return y

``TLap`` is ``(epsilon_z, delta_z)``-DP truncated Laplace noise for a sensitivity-1 loss
(:class:`dpkit.mechanisms.TruncatedLaplace`, support from the exact formula, digest §3.1
-- the post's shorthand ``(1 + ln(1/(2 delta)))/epsilon`` is not ``delta``-DP for
``e^epsilon > e + 1 - 2 delta``). An accepted ``z`` is at most ``alpha + tau`` and within
``tau`` of the true loss, so **every release has loss at most** ``alpha + 2 tau``.

Privacy (Theorem 1): if ``M-bar`` is ``(eps_bar, delta_bar)``-DP and
``P[Z <= alpha + tau] >= 1 - beta > 0`` on every input (true when ``beta`` bounds
``P[l(M(x), x) > alpha]``), ``M~`` is
``(2 eps_bar - ln(1 - delta_bar/(1 - beta)), delta_bar/(1 - beta))``-DP; with the equal
split ``epsilon_z = epsilon``, ``delta_z = delta`` this is Theorem 2's
``(4 eps - ln(1 - 2 delta/(1 - beta)), 2 delta/(1 - beta))``.

The cap. A wrong ``alpha`` would loop forever, so the number of attempts is capped at
``T`` (:attr:`RepeatUntilSuccess.max_attempts`); at the cap the release raises
:class:`~dpkit.reliability.AttemptsExhausted`, never returns quietly. The capped
algorithm differs from the uncapped one only on ``T`` rejections in a row (probability
``<= beta^T``), so it is ``(eps~, delta~ + (1 + e^eps~) beta^T)``-DP
(:func:`~dpkit.reliability.guarantees.cap_term`); the default ``T`` makes that term at
most 1/1000 of ``delta~``. If ``alpha`` is wrong none of this holds, but the capped run
is still post-processing of ``T`` runs of ``M-bar``:
:attr:`RepeatUntilSuccess.guarantee_if_alpha_is_wrong`.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.rounding import mul_up, sum_up, up
from dpkit.accounting.events import ApproxEvent, Event
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.mechanisms._base import Release
from dpkit.mechanisms.truncated_laplace import TruncatedLaplace
from dpkit.random import RandomLike, as_random
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
from dpkit.reliability.guarantees import base_parameters, cap_term, repeat_until_success

__all__ = ["RepeatUntilSuccess", "default_max_attempts"]

#: The default cap adds at most this fraction of delta~ to delta.
CAP_SHARE = 1e-3


def default_max_attempts(guarantee: ApproxDP, failure_probability: float) -> int:
    """The smallest ``T`` with ``(1 + e^eps~) beta^T <= delta~ / 1000`` (at least 1)."""
    beta = failure_probability
    if beta == 0.0:
        return 1
    target = CAP_SHARE * guarantee.delta
    # log(1 + e^eps) without overflow; an epsilon beyond e^eps's range is refused by
    # cap_term below with InvalidParameter (not an OverflowError).
    eps = guarantee.epsilon
    log_factor = eps + math.log1p(math.exp(-eps))
    attempts = max(1, math.ceil((math.log(target) - log_factor) / math.log(beta)))
    # the float estimate may land one short: step until the rounded-up term fits
    while cap_term(guarantee.epsilon, beta, attempts) > target:
        attempts += 1
    return attempts


class RepeatUntilSuccess:
    """Repeat a mechanism until a truncated-Laplace estimate of its loss is low.

    Parameters
    ----------
    mechanism:
        The base mechanism ``M``: a dpkit :class:`~dpkit.mechanisms.Mechanism` or a
        callable ``mechanism(data, rng)`` (with ``guarantee=``).
    loss:
        ``loss(output, data) -> float``. **Contract**: for every output, the loss
        changes by at most ``loss_sensitivity`` between neighbouring datasets (under
        the relation you claim privacy for). dpkit cannot check this in general;
        :func:`dpkit.reliability.check_loss_sensitivity` tests it on given pairs.
    alpha:
        The target loss (a float >= 0) with ``P[loss(M(x), x) > alpha] <= beta`` for
        every input ``x``.
    failure_probability:
        ``beta``, a proven worst-case bound; ``beta < 1 - delta_bar`` (Theorem 2:
        ``beta < 1 - 2 delta``).
    guarantee:
        The base mechanism's guarantee (required for a callable).
    loss_guarantee:
        ``ApproxDP(epsilon_z, delta_z)`` of the loss estimate (``delta_z > 0``); default
        the base guarantee (Theorem 2's equal split).
    loss_sensitivity:
        The loss's sensitivity (default 1, as in the post); the noise is scaled to it.
    max_attempts:
        Cap ``T`` on the attempts; default ``default_max_attempts``.

    Privacy
    -------
    ``(2 eps_bar - ln(1 - delta_bar/(1 - beta)), delta_bar/(1 - beta) + (1 + e^eps~)
    beta^T)``-DP with ``eps_bar = epsilon + epsilon_z``, ``delta_bar = delta + delta_z``
    (Steinke 2025, Theorems 1 and 2; the cap's term derived in the module docstring).
    Event ``ApproxEvent`` of that guarantee. Neither the number of attempts nor the
    rejected outputs are released.

    Accuracy
    --------
    Every release has ``loss <= alpha + 2 tau`` (:attr:`loss_bound`), with probability 1;
    ``tau`` (``margin``) is the truncated-Laplace support plus one grid step. With a
    valid ``alpha`` the expected number of attempts is at most ``1/(1 - beta)`` and
    :class:`~dpkit.reliability.AttemptsExhausted` is raised with probability at most
    ``beta^T``.

    Examples
    --------
    >>> import math, dpkit as dp
    >>> from dpkit.testing import seeded
    >>> beta = 0.05
    >>> wrapper = dp.reliability.RepeatUntilSuccess(
    ...     dp.Laplace.calibrate(epsilon=0.5),
    ...     loss=lambda y, x: abs(y - x),
    ...     alpha=math.log(1 / beta) / 0.5,
    ...     failure_probability=beta,
    ...     loss_guarantee=dp.ApproxDP(0.5, 1e-6),
    ... )
    >>> round(wrapper.guarantee.epsilon, 6), round(wrapper.loss_bound, 2)
    (2.000001, 56.75)
    >>> abs(wrapper.release(3.0, rng=seeded(1)).value - 3.0) <= wrapper.loss_bound
    True
    """

    def __init__(
        self,
        mechanism: object,
        *,
        loss: Loss,
        alpha: float,
        failure_probability: float,
        guarantee: PureDP | ApproxDP | None = None,
        loss_guarantee: PureDP | ApproxDP | None = None,
        loss_sensitivity: float = 1.0,
        max_attempts: int | None = None,
    ) -> None:
        owner = "RepeatUntilSuccess"
        self._function, self.base_guarantee = as_base(mechanism, guarantee, owner)
        self.loss = check_callable(loss, "loss", owner, "a callable loss(output, data)")
        self.alpha = check_alpha(alpha, owner)
        self.failure_probability = check_beta(failure_probability, owner)
        self.loss_sensitivity = check.check_positive(loss_sensitivity, "loss_sensitivity", owner)
        # Validates the split and Theorem 1's condition before anything else is built.
        uncapped = repeat_until_success(
            self.base_guarantee,
            failure_probability=self.failure_probability,
            loss_guarantee=loss_guarantee,
        )
        split = self.base_guarantee if loss_guarantee is None else loss_guarantee
        epsilon_z, delta_z = base_parameters(split, "loss_guarantee", owner)
        self.loss_noise = TruncatedLaplace.calibrate(
            epsilon=epsilon_z, delta=delta_z, sensitivity=self.loss_sensitivity
        )
        self.loss_guarantee = self.loss_noise.guarantee
        # tau: support plus one grid step (the grid rounding moves z by <= g/2, and the
        # final float rounding by far less), rounded up.
        self.margin = up(self.loss_noise.bound + self.loss_noise.granularity, 2)
        self.threshold = up(self.alpha + self.margin)
        self.max_attempts = (
            default_max_attempts(uncapped, self.failure_probability)
            if max_attempts is None
            else check.check_count(max_attempts, "max_attempts", owner)
        )
        self._guarantee = repeat_until_success(
            self.base_guarantee,
            failure_probability=self.failure_probability,
            loss_guarantee=loss_guarantee,
            max_attempts=self.max_attempts,
        )

    @property
    def guarantee(self) -> ApproxDP:
        """Theorem 1's guarantee plus the cap's term (valid when ``alpha`` is)."""
        return self._guarantee

    @property
    def event(self) -> Event:
        return ApproxEvent(self._guarantee.epsilon, self._guarantee.delta)

    @property
    def loss_bound(self) -> float:
        """``alpha + 2 tau``: every release has at most this loss, with probability 1."""
        return up(self.threshold + self.margin)

    @property
    def guarantee_if_alpha_is_wrong(self) -> ApproxDP | None:
        """``(T eps_bar, T delta_bar)``: basic composition of ``T`` runs of ``M-bar``.

        Holds whatever ``alpha`` and ``beta`` are; None when its delta reaches 1.
        """
        epsilon, delta = base_parameters(self.base_guarantee, "guarantee", "RepeatUntilSuccess")
        epsilon_bar = sum_up((epsilon, self.loss_guarantee.epsilon))
        delta_bar = sum_up((delta, self.loss_guarantee.delta))
        total_delta = mul_up(self.max_attempts, delta_bar)
        if total_delta >= 1.0:
            return None
        return ApproxDP(mul_up(self.max_attempts, epsilon_bar), total_delta)

    def release(self, data: Any, *, rng: RandomLike | None = None) -> Release[Any]:
        """Repeat ``M`` on ``data`` until the noisy loss is ``<= alpha + tau``; release that output.

        Raises
        ------
        AttemptsExhausted
            After ``max_attempts`` rejections (probability ``<= beta^T`` when ``alpha``
            is valid); carries this wrapper's event and guarantee, to be charged.
        MechanismFailed
            If the mechanism or the loss raises, or the loss is not a finite number;
            also an output, with the same event.
        """
        owner = "RepeatUntilSuccess.release"
        random = as_random(rng)
        noise_ = self.loss_noise
        for _ in range(self.max_attempts):
            try:
                output = self._function(data, random)
                exact = evaluate_loss(self.loss, output, data, owner)
            except Exception as err:
                raise MechanismFailed(
                    f"{owner}: the mechanism or the loss raised {type(err).__name__}. This is "
                    f"the release's output: charge its event {self.event!r}.",
                    event=self.event,
                    guarantee=self._guarantee,
                ) from err
            estimate = noise.truncated_laplace(
                exact,
                scale=noise_.scale,
                bound=noise_.bound,
                granularity=noise_.granularity,
                rng=random,
            )
            if estimate <= self.threshold:
                return Release(
                    value=output,
                    error=None,
                    event=self.event,
                    guarantee=self._guarantee,
                    mechanism="RepeatUntilSuccess",
                    secure=random.secure,
                )
        raise AttemptsExhausted(
            f"{owner}: all {self.max_attempts} attempts had a noisy loss above alpha + tau "
            f"(alpha={self.alpha!r}). With a valid alpha this has probability at most "
            f"failure_probability^{self.max_attempts}; alpha or failure_probability is "
            f"probably wrong. This is the release's output: charge its event {self.event!r}.",
            event=self.event,
            guarantee=self._guarantee,
        )

    def __repr__(self) -> str:
        return (
            f"RepeatUntilSuccess(base_guarantee={self.base_guarantee!r}, alpha={self.alpha!r}, "
            f"failure_probability={self.failure_probability!r}, "
            f"max_attempts={self.max_attempts!r})"
        )
