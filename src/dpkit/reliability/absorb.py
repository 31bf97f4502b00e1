"""Absorb the failure probability into delta: return ``M(x)`` if it succeeded, else a fallback.

Construction (Steinke 2025, "Differentially Private Algorithms that Never Fail", first
construction; ``shared/papers/never-fail.md`` §2)::

    M~(x):  y = M(x);  if l(y, x) <= alpha: return y;  else: return fallback(x)

where ``M`` is ``(epsilon, delta)``-DP with ``P[l(M(x), x) > alpha] <= beta`` on every
input and ``fallback`` is any (non-private) algorithm whose output has loss at most
``alpha`` -- for instance the exact answer. The output then *always* has loss at most
``alpha``.

Privacy: ``(epsilon, delta + (1 + e^epsilon) beta)``-DP. The post states
``(epsilon, delta + beta)``; its proof compares ``M~(x')`` with the set
``{y : l(y, x) <= alpha}``, but ``M~(x')`` tests ``l(y, x')``. The digest's two-point
example (0-DP ``M``, ``beta = 1/2``, ``M~(x) = a`` and ``M~(x') = b`` always) needs
``delta + (1 + e^0) beta``, and ``tests/reliability/test_absorb.py`` checks it exactly
and with an audit. Only sensible when ``beta`` is already below an acceptable delta.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpkit.accounting.events import ApproxEvent, Event
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.mechanisms._base import Release
from dpkit.random import RandomLike, as_random
from dpkit.reliability._base import (
    Loss,
    MechanismFailed,
    as_base,
    check_alpha,
    check_beta,
    check_callable,
    evaluate_loss,
)
from dpkit.reliability.guarantees import absorb_failure

__all__ = ["NeverFail", "never_fail"]


class NeverFail:
    """A mechanism made never-failing by a non-private fallback; failure absorbed into delta.

    Parameters
    ----------
    mechanism:
        The base mechanism ``M``: a dpkit :class:`~dpkit.mechanisms.Mechanism` (released
        on the data as its exact query answer) or a callable ``mechanism(data, rng)``
        that draws all its randomness from ``rng``.
    loss:
        ``loss(output, data) -> float``: how bad ``output`` is for ``data``.
    alpha:
        The target loss, a float >= 0.
    failure_probability:
        ``beta`` in [0, 1): a *proven* bound on ``P[loss(M(x), x) > alpha]`` for every
        input ``x`` (worst case, not an estimate on typical data).
    fallback:
        ``fallback(data) -> output`` with loss at most ``alpha`` (e.g. the exact answer,
        or an argmin of the loss). It is not private; it runs only on failures.
    guarantee:
        The base mechanism's ``PureDP``/``ApproxDP`` guarantee (required for a callable;
        taken from a dpkit mechanism otherwise).

    Privacy
    -------
    ``(epsilon, delta + (1 + e^epsilon) beta)``-DP (:func:`absorb_failure`;
    ``shared/papers/never-fail.md`` §2 -- not the post's ``(epsilon, delta + beta)``).
    Event ``ApproxEvent(epsilon, delta + (1 + e^epsilon) beta)``. Valid only if ``beta``
    is a true worst-case bound for ``alpha``; the loss need not have sensitivity 1.

    Accuracy
    --------
    Every release has ``loss(value, data) <= alpha`` (:attr:`loss_bound`): the fallback's
    output is checked, and a fallback that misses raises :class:`MechanismFailed`.

    Examples
    --------
    >>> import math, dpkit as dp
    >>> from dpkit.testing import seeded
    >>> beta = 1e-9  # Laplace(1/eps) exceeds ln(1/beta)/eps with probability beta
    >>> wrapper = dp.reliability.never_fail(
    ...     dp.Laplace.calibrate(epsilon=1.0),
    ...     loss=lambda y, x: abs(y - x),
    ...     alpha=math.log(1 / beta),
    ...     failure_probability=beta,
    ...     fallback=lambda x: x,
    ... )
    >>> wrapper.guarantee.epsilon, round(wrapper.guarantee.delta, 18)  # (1 + e) beta
    (1.0, 3.718281828e-09)
    >>> abs(wrapper.release(5.0, rng=seeded(0)).value - 5.0) <= wrapper.loss_bound
    True
    """

    def __init__(
        self,
        mechanism: object,
        *,
        loss: Loss,
        alpha: float,
        failure_probability: float,
        fallback: Callable[[Any], Any],
        guarantee: PureDP | ApproxDP | None = None,
    ) -> None:
        owner = "NeverFail"
        self._function, self.base_guarantee = as_base(mechanism, guarantee, owner)
        self.loss = check_callable(loss, "loss", owner, "a callable loss(output, data)")
        self.alpha = check_alpha(alpha, owner)
        self.failure_probability = check_beta(failure_probability, owner)
        self.fallback = check_callable(fallback, "fallback", owner, "a callable fallback(data)")
        self._guarantee = absorb_failure(
            self.base_guarantee, failure_probability=self.failure_probability
        )

    @property
    def guarantee(self) -> ApproxDP:
        """``(epsilon, delta + (1 + e^epsilon) beta)``."""
        return self._guarantee

    @property
    def event(self) -> Event:
        return ApproxEvent(self._guarantee.epsilon, self._guarantee.delta)

    @property
    def loss_bound(self) -> float:
        """Every release has loss at most this (``alpha``), with probability 1."""
        return self.alpha

    def release(self, data: Any, *, rng: RandomLike | None = None) -> Release[Any]:
        """Run ``M`` on ``data``; its output if its loss is ``<= alpha``, else the fallback's.

        Raises :class:`MechanismFailed` (carrying this wrapper's event and guarantee) if
        the mechanism, the loss or the fallback raises, or the fallback misses ``alpha``.
        """
        owner = "NeverFail.release"
        random = as_random(rng)
        try:
            output = self._function(data, random)
            if evaluate_loss(self.loss, output, data, owner) > self.alpha:
                output = self.fallback(data)
                if evaluate_loss(self.loss, output, data, owner) > self.alpha:
                    raise ValueError("the fallback's output has loss above alpha")
        except Exception as err:
            raise MechanismFailed(
                f"{owner}: the mechanism, loss or fallback raised {type(err).__name__}. "
                f"This is the release's output: charge its event {self.event!r}.",
                event=self.event,
                guarantee=self._guarantee,
            ) from err
        return Release(
            value=output,
            error=None,
            event=self.event,
            guarantee=self._guarantee,
            mechanism="NeverFail",
            secure=random.secure,
        )

    def __repr__(self) -> str:
        return (
            f"NeverFail(base_guarantee={self.base_guarantee!r}, alpha={self.alpha!r}, "
            f"failure_probability={self.failure_probability!r})"
        )


def never_fail(
    mechanism: object,
    *,
    loss: Loss,
    alpha: float,
    failure_probability: float,
    fallback: Callable[[Any], Any],
    guarantee: PureDP | ApproxDP | None = None,
) -> NeverFail:
    """Wrap ``mechanism`` so that it never fails: see :class:`NeverFail` (same parameters)."""
    return NeverFail(
        mechanism,
        loss=loss,
        alpha=alpha,
        failure_probability=failure_probability,
        fallback=fallback,
        guarantee=guarantee,
    )
