"""The shapes every mechanism shares: :class:`Release`,
:class:`~dpkit.mechanisms.ErrorBound`, :class:`Mechanism`.

A mechanism is an object built from public parameters (never from data), that knows
the privacy :attr:`~Mechanism.event` it runs and the :attr:`~Mechanism.guarantee` it
gives, and releases a value with :meth:`~Mechanism.release`. Public methods validate,
then call the private hooks ``_check_value`` and ``_sample`` (SciPy's template
pattern), so a new mechanism writes only its hooks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from dpkit import _validation as check
from dpkit.accounting.events import Event
from dpkit.accounting.guarantees import ZCDP, ApproxDP, PureDP
from dpkit.random import Random, RandomLike, as_random

__all__ = [
    "Accuracy",
    "DownSensitivityBound",
    "ErrorBound",
    "FailureBound",
    "Guarantee",
    "Mechanism",
    "RankErrorBound",
    "Release",
]

Guarantee = PureDP | ApproxDP | ZCDP
ValueT = TypeVar("ValueT")


@dataclass(frozen=True, slots=True)
class ErrorBound:
    """How far a released value may be from the exact (noiseless) answer.

    For every coordinate, ``|released - exact| <= half_width`` with probability at
    least ``confidence`` over the mechanism's randomness; ``standard_deviation`` is
    that of the added noise. Both are computed from public parameters only.
    """

    standard_deviation: float
    half_width: float
    confidence: float

    def interval(self, value: Any) -> tuple[Any, Any]:
        """The confidence interval ``(value - half_width, value + half_width)`` around a release."""
        return value - self.half_width, value + self.half_width


@dataclass(frozen=True, slots=True)
class RankErrorBound:
    """Accuracy of a quantile-like release, stated in ranks of the data.

    With probability at least ``confidence``, the released value lies between the
    order statistics ``x_(lo - rank_radius)`` and ``x_(hi + rank_radius)`` of the data
    (after snapping to the output grid), where ``[x_(lo), x_(hi)]`` is the exact answer
    (one order statistic, or the gap between the two middle records of a median). In value
    terms the error is at most the local sensitivity ``LS^k(x)`` with
    ``k = rank_radius`` (Asi & Duchi 2020; Thm 4 of the inverse-sensitivity post).
    The radius depends on public parameters only.
    """

    rank_radius: int
    confidence: float


@dataclass(frozen=True, slots=True)
class DownSensitivityBound:
    """Accuracy of a shifted-inverse release: a one-sided, data-dependent guarantee.

    With probability at least ``confidence``,
    ``f(x) >= value >= f(x) - DS_f^k(x)`` with ``k = removals``: the release never
    exceeds the exact answer, and is at least what ``f`` becomes after removing the
    ``removals`` privacy units that lower it most (Fang, Dong & Yi 2022; Thm 4 and 5
    of the down-sensitivity post). ``removals`` depends on public parameters only.
    """

    removals: int
    confidence: float


@dataclass(frozen=True, slots=True)
class FailureBound:
    """Accuracy of a selection from a private candidate (random stopping, thresholding).

    A draw of the candidate *succeeds* for a target score ``tau`` when its score is at
    least ``tau``. If one draw succeeds with probability at least
    ``success_probability``, then with probability at least ``confidence`` the selection
    succeeds too: thresholding returns a candidate (not None), random stopping returns
    a score ``>= tau``. Equivalently, random stopping's score is at least the
    ``(1 - success_probability)``-quantile of one draw's score, with probability
    ``confidence``. Depends on public parameters only; :meth:`failure_probability` is
    the exact failure probability for any ``p`` (Liu & Talwar 2019, Thm 3.1 and 3.3).
    """

    success_probability: float
    confidence: float
    stop_probability: float
    max_draws: int | None

    def failure_probability(self, p: float) -> float:
        """The exact probability that the selection fails when one draw succeeds w.p. ``p``.

        Both algorithms fail exactly when none of the first ``min(K, T)`` draws succeeds,
        ``K ~ Geometric(gamma)`` the stopping time and ``T`` the cap:
        ``gamma (1 - p) / (gamma + p - gamma p)`` uncapped, and
        ``gamma (1 - p) (1 - a^(T-1)) / (1 - a) + (1 - p) a^(T-1)`` with
        ``a = (1 - gamma)(1 - p)`` for a cap ``T``.
        """
        p = check.check_probability(p, "p", "FailureBound.failure_probability")
        return failure_probability(p, self.stop_probability, self.max_draws)


def failure_probability(p: float, gamma: float, max_draws: int | None) -> float:
    """See :meth:`FailureBound.failure_probability` (a sum of positive terms: no cancellation)."""
    if p >= 1.0:
        return 0.0
    miss = 1.0 - p
    a = (1.0 - gamma) * miss
    if max_draws is None:
        return gamma * miss / (gamma + p - gamma * p)
    tail = a ** (max_draws - 1)
    head = gamma * miss * (1.0 - tail) / (1.0 - a) if a < 1.0 else 0.0
    return min(1.0, head + miss * tail)


def success_probability_needed(gamma: float, max_draws: int | None, failure: float) -> float:
    """The smallest ``p`` (rounded up) with ``failure_probability(p) <= failure``.

    Bisection on ``p`` (the failure probability decreases in ``p``); 1.0 if none below 1.
    """
    low, high = 0.0, 1.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        # a relative margin absorbs the float rounding of the failure probability
        if failure_probability(middle, gamma, max_draws) <= failure * (1 - 1e-9):
            high = middle
        else:
            low = middle
    return high


Accuracy = ErrorBound | RankErrorBound | DownSensitivityBound | FailureBound


@dataclass(frozen=True, slots=True)
class Release(Generic[ValueT]):
    """A released value with its accuracy and its privacy cost.

    Attributes
    ----------
    value:
        The private output.
    error:
        Its accuracy: an :class:`~dpkit.mechanisms.ErrorBound` for additive noise, a
        :class:`RankErrorBound` for quantiles, a :class:`DownSensitivityBound` for
        shifted-inverse estimates, a :class:`FailureBound` for selections from a
        private candidate, or None when none applies (selection,
        randomized response).
    event:
        What ran, for an accountant.
    guarantee:
        The privacy guarantee of this release alone.
    mechanism:
        The mechanism's class name.
    secure:
        False when drawn from a seeded (predictable) generator: not a real release.
    """

    value: ValueT
    error: Accuracy | None
    event: Event
    guarantee: Guarantee
    mechanism: str
    secure: bool


class Mechanism(ABC):
    """Base class: validate in ``__init__``, describe with ``event``/``guarantee``, ``release``."""

    @property
    @abstractmethod
    def event(self) -> Event:
        """The privacy event this mechanism runs (for accountants)."""

    @property
    @abstractmethod
    def guarantee(self) -> Guarantee:
        """The privacy guarantee of one release."""

    def error(self, confidence: float = 0.95) -> ErrorBound | None:
        """The accuracy of one release at the given confidence (None if not additive)."""
        confidence = check.check_probability(
            confidence, "confidence", f"{type(self).__name__}.error", open_low=True, open_high=True
        )
        return self._error(confidence)

    def release(
        self, value: Any, *, confidence: float = 0.95, rng: RandomLike | None = None
    ) -> Release[Any]:
        """Release ``value`` privately.

        Parameters
        ----------
        value:
            The exact answer of the query (scalar or array), whose sensitivity the
            mechanism was built with.
        confidence:
            Confidence level of the reported :class:`~dpkit.mechanisms.ErrorBound`.
        rng:
            Random source (see :func:`dpkit.random.as_random`).
        """
        error = self.error(confidence)
        data = self._check_value(value)
        random = as_random(rng)
        output = self._sample(data, random)
        if isinstance(output, np.generic) or (isinstance(output, np.ndarray) and output.ndim == 0):
            output = output.item()  # scalars come back as Python numbers
        return Release(
            value=output,
            error=error,
            event=self._event_for(data),
            guarantee=self.guarantee,
            mechanism=type(self).__name__,
            secure=random.secure,
        )

    def _error(self, confidence: float) -> ErrorBound | None:
        return None

    def _event_for(self, value: Any) -> Event:
        """The event of one release of ``value``; override when it depends on the
        value's (public) shape."""
        return self.event

    @abstractmethod
    def _check_value(self, value: Any) -> Any:
        """Validate and convert the query answer; raise DataError on bad input."""

    @abstractmethod
    def _sample(self, value: Any, rng: Random) -> Any:
        """Draw the private output for a validated value."""

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._repr_fields())
        return f"{type(self).__name__}({fields})"

    def _repr_fields(self) -> tuple[str, ...]:
        return ()

    def __eq__(self, other: object) -> bool:
        # Two mechanisms are equal when they are the same class with the same
        # parameters (their repr fields) and the same stated guarantee.
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Mechanism)
        mine = tuple(getattr(self, name) for name in self._repr_fields())
        theirs = tuple(getattr(other, name) for name in other._repr_fields())
        return mine == theirs and self.guarantee == other.guarantee

    def __hash__(self) -> int:
        return hash((type(self), *(getattr(self, name) for name in self._repr_fields())))
