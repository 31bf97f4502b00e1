"""Truncated (bounded) Laplace noise: (epsilon, delta)-DP noise with bounded support.

Noise ``X`` with density proportional to ``exp(-|x| / lam)`` on ``[-A, A]``, and
``lam = s / epsilon`` for a query of sensitivity ``s`` (Geng, Ding, Guo & Kumar 2020).
For two neighbouring answers ``|f(D) - f(D')| <= s`` the density ratio on the overlap of
the two supports is at most ``e^epsilon``; the only excess mass is the strip of width
``s`` outside the overlap, so the exact hockey-stick divergence at ``e^epsilon`` is::

    delta(A) = (e^epsilon - 1) / (2 (e^{A/lam} - 1))          (A > s)

This uses nothing but ``|f(D) - f(D')| <= s``, so the guarantee holds for every
neighbouring relation under which ``s`` is the sensitivity: add/remove one person (a
count has s = 1; a sum of values clamped to [l, u] has s = max(|l|, |u|)) and replace
one person (count: s = 1; clamped sum: s = u - l). The caller picks ``s`` for the
relation they mean. Derivation: ``shared/papers/never-fail.md`` §3.1, checked in
``tests/mechanisms/test_truncated_laplace.py``.

Two calibrations:

* ``"tight"``: ``A = lam ln(1 + (e^epsilon - 1)/(2 delta))``, which makes
  ``delta(A) = delta`` exactly.
* ``"post"``: the shorthand of Steinke's "Algorithms that Never Fail" post,
  ``A = s (1 + ln(1/(2 delta))) / epsilon``. Its true delta is
  ``delta (e^epsilon - 1)/(e - 2 delta)``, which is at most ``delta`` only when
  ``e^epsilon <= e + 1 - 2 delta`` (e.g. every epsilon <= 1) and larger otherwise
  (epsilon = 2, delta = 1e-3: 2.35e-3). dpkit reports the true value.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.rounding import div_up, down, up
from dpkit.accounting.events import Event, TruncatedLaplaceEvent
from dpkit.accounting.guarantees import ApproxDP
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._base import ErrorBound, Mechanism, Release
from dpkit.mechanisms.laplace import OMITTED, _Omitted, resolve_sensitivity
from dpkit.random import Random, RandomLike

__all__ = ["TruncatedLaplace", "truncated_laplace", "truncated_laplace_delta"]

Calibration = Literal["tight", "post"]


def truncated_laplace_delta(*, epsilon: float, bound: float, sensitivity: float = 1.0) -> float:
    """Exact delta of truncated Laplace noise of scale ``s/epsilon`` on ``[-bound, bound]``.

    Returns ``(e^eps - 1) / (2 (e^{bound eps / s} - 1))``, rounded up; raises when
    ``bound <= sensitivity`` (the supports of neighbours then barely overlap and the
    mechanism gives no useful guarantee).
    """
    owner = "truncated_laplace_delta"
    epsilon = check.check_positive(epsilon, "epsilon", owner)
    bound = check.check_positive(bound, "bound", owner)
    sensitivity = check.check_positive(sensitivity, "sensitivity", owner)
    return _delta(epsilon, down(bound * epsilon / sensitivity, 2), sensitivity, bound, owner)


def _delta(
    epsilon: float, bound_over_scale: float, sensitivity: float, bound: float, owner: str
) -> float:
    """``(e^eps - 1) / (2 (e^{A/lam} - 1))`` with the numerator rounded up and the
    denominator rounded down (each float operation is within an ulp or two)."""
    if bound <= sensitivity:
        raise InvalidParameter.for_parameter(
            "bound", owner, f"larger than the sensitivity ({sensitivity!r})", bound
        )
    numerator = up(math.expm1(epsilon), 2)
    denominator = down(2 * math.expm1(bound_over_scale), 2)
    return up(numerator / denominator)


class TruncatedLaplace(Mechanism):
    """Additive Laplace noise truncated to ``[-bound, bound]``; (epsilon, delta)-DP.

    Build with :meth:`calibrate`. The release is the exact ``x + X`` rounded to a
    power-of-two grid, so every release lies within ``bound + granularity/2`` of
    ``x``: this mechanism never fails by more than that.

    Parameters
    ----------
    scale:
        Laplace scale ``lam`` (epsilon = sensitivity / scale).
    bound:
        Truncation ``A`` (> sensitivity).
    sensitivity:
        Sensitivity of the scalar (or L1 of the vector) query.

    Privacy
    -------
    ``(s/lam, delta(A))``-DP with ``delta(A)`` from :func:`truncated_laplace_delta`, for
    every neighbouring relation under which ``s`` is the sensitivity (see the module).
    For a vector query this holds per coordinate; compose coordinates for the whole.
    Event: ``TruncatedLaplaceEvent(epsilon, delta)``.

    Accuracy
    --------
    ``|release - x| <= bound + g/2`` always.

    Examples
    --------
    >>> import dpkit as dp
    >>> m = dp.TruncatedLaplace.calibrate(epsilon=1.0, delta=1e-3)
    >>> round(m.bound, 4), m.guarantee.delta <= 1e-3
    (6.7571, True)
    >>> post = dp.TruncatedLaplace.calibrate(epsilon=2.0, delta=1e-3, calibration="post")
    >>> round(post.guarantee.delta, 6)  # the post's shorthand is not (2, 1e-3)-DP
    0.002352
    """

    def __init__(self, *, scale: float, bound: float, sensitivity: float = 1.0) -> None:
        owner = "TruncatedLaplace"
        self.scale = check.check_positive(scale, "scale", owner)
        self.bound = check.check_positive(bound, "bound", owner)
        self.sensitivity = check.check_positive(sensitivity, "sensitivity", owner)
        if self.scale > noise.MAX_SCALE:
            raise InvalidParameter.for_parameter(
                "scale", owner, f"a float in (0, {noise.MAX_SCALE:g}]", scale
            )
        self.epsilon = div_up(self.sensitivity, self.scale)
        # A/lam rounded down: a smaller exponent only overstates delta.
        self.delta = _delta(
            self.epsilon,
            down(self.bound / self.scale),
            self.sensitivity,
            self.bound,
            "TruncatedLaplace",
        )
        self.granularity = noise.default_granularity(min(self.scale, self.bound))

    @classmethod
    def calibrate(
        cls,
        *,
        epsilon: float,
        delta: float,
        sensitivity: float = 1.0,
        calibration: Calibration = "tight",
    ) -> TruncatedLaplace:
        """Truncated Laplace noise for ``(epsilon, delta)``; see the module for the two rules."""
        owner = "TruncatedLaplace.calibrate"
        epsilon = check.check_epsilon(epsilon, owner)
        delta = check.check_delta(delta, owner, allow_zero=False)
        if delta >= 0.5:
            raise InvalidParameter.for_parameter("delta", owner, "a float in (0, 0.5)", delta)
        sensitivity = check.check_positive(sensitivity, "sensitivity", owner)
        scale = div_up(sensitivity, epsilon)
        if calibration == "tight":
            bound = scale * math.log1p(math.expm1(epsilon) / (2 * delta))
        elif calibration == "post":
            bound = sensitivity * (1 + math.log(1 / (2 * delta))) / epsilon
        else:
            raise InvalidParameter.for_parameter(
                "calibration", owner, "'tight' or 'post'", calibration
            )
        # Round the support up by 8 ulps (more than the error of the few correctly
        # rounded or 1-ulp operations above): a wider support only lowers delta.
        mechanism = cls(scale=scale, bound=up(bound, 8), sensitivity=sensitivity)
        # scale >= s/epsilon exactly, so the true epsilon is at most the request.
        mechanism.epsilon = epsilon
        if calibration == "tight":
            # With the rounded-up scale and support the exact delta(A) is <= delta,
            # so the request itself is a valid statement.
            mechanism.delta = delta
        return mechanism

    @property
    def event(self) -> Event:
        return TruncatedLaplaceEvent(epsilon=self.epsilon, delta=self.delta)

    @property
    def guarantee(self) -> ApproxDP:
        return ApproxDP(self.epsilon, self.delta)

    def _error(self, confidence: float) -> ErrorBound:
        lam, big_a = self.scale, self.bound
        # P(|X| > w) = (e^{-w/lam} - e^{-A/lam}) / (1 - e^{-A/lam}); solve for w.
        tail = 1 - confidence
        r = math.exp(-big_a / lam)
        width = min(big_a, -lam * math.log(tail * (1 - r) + r))
        # E[X^2] = 2 lam^2 (1 - (a + a^2/2) e^-a / (1 - e^-a)), a = A/lam (Geng et al. 2020).
        second_moment = 2 * lam**2 * (1 - (big_a / lam + big_a**2 / (2 * lam**2)) * r / (1 - r))
        return ErrorBound(
            math.sqrt(max(second_moment, 0.0)),
            up(width + self.granularity / 2),
            confidence,
        )

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        return check.check_array(value, "value", "TruncatedLaplace.release")

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> Any:
        return noise.truncated_laplace(
            value, scale=self.scale, bound=self.bound, granularity=self.granularity, rng=rng
        )

    def _repr_fields(self) -> tuple[str, ...]:
        return ("scale", "bound", "sensitivity")


def truncated_laplace(
    value: npt.ArrayLike,
    *,
    epsilon: float,
    delta: float,
    sensitivity: float | _Omitted = OMITTED,
    calibration: Calibration = "tight",
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Release a query with truncated Laplace noise (``(epsilon, delta)``-DP, bounded error).

    ``sensitivity`` is required (omitting it assumes 1 with a
    :class:`DeprecationWarning`, an error in the next release).
    """
    resolved = resolve_sensitivity(sensitivity, "dp.truncated_laplace")
    mechanism = TruncatedLaplace.calibrate(
        epsilon=epsilon, delta=delta, sensitivity=resolved, calibration=calibration
    )
    return mechanism.release(value, rng=rng)
