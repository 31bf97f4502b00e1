"""The certified lower bound on a composed event's privacy profile (events -> profiles).

The engine behind :mod:`dpkit.accounting.pld_bounds` (the public page, with the
interval) and :meth:`dpkit.accounting.pld.PLDAccountant.get_epsilon_interval`; kept
apart from both so that the accountant can use it without an import cycle. The proof
is in :mod:`dpkit.accounting._math.pld.lower`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from dpkit import _validation as check
from dpkit.accounting._math.pld.discretize import TooManyBuckets
from dpkit.accounting._math.pld.lower import (
    LowerProfile,
    epsilon_lower,
    lower_masses,
    lower_product,
)
from dpkit.accounting._math.pld.mechanisms import GaussianNoise, sampled_cdfs
from dpkit.accounting._math.pld.pmf import LossPmf
from dpkit.accounting.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    NoOpEvent,
    PoissonSampledEvent,
    RepeatedEvent,
)
from dpkit.errors import InvalidParameter, UnsupportedEvent

__all__ = [
    "LOWER_DISCRETIZATION",
    "EpsilonInterval",
    "delta_lower_bound",
    "epsilon_lower_bound",
    "supports_lower_bound",
]

#: Default grid width of the lower bound: finer than the upper bound's 1e-4, because
#: its rounding term grows like ``sqrt(count) h`` (see :mod:`.._math.pld.lower`).
LOWER_DISCRETIZATION = 3e-5


@dataclass(frozen=True)
class EpsilonInterval:
    """Certified bounds on the smallest epsilon at ``delta``: ``lower <= eps* <= upper``.

    ``eps*`` is the best epsilon any analysis of the composed events can prove at
    ``delta``; ``upper`` is a guarantee (the mechanism is (``upper``, ``delta``)-DP) and
    ``lower`` shows that no accountant can certify less.
    """

    lower: float
    upper: float
    delta: float

    @property
    def width(self) -> float:
        """``upper - lower``."""
        return self.upper - self.lower

    def __str__(self) -> str:
        return f"eps in [{self.lower:.6g}, {self.upper:.6g}] at delta={self.delta:g}"


def _leaves(event: Event, count: int, out: dict[Event, int]) -> None:
    if isinstance(event, ComposedEvent):
        for inner in event.events:
            _leaves(inner, count, out)
    elif isinstance(event, RepeatedEvent):
        _leaves(event.event, count * event.count, out)
    elif not isinstance(event, NoOpEvent):
        out[event] = out.get(event, 0) + count


def _gaussian_rate(event: Event) -> tuple[float, float] | None:
    """``(noise_multiplier, q)`` of a supported leaf, else None."""
    if isinstance(event, GaussianEvent):
        return event.noise_multiplier, 1.0
    if isinstance(event, PoissonSampledEvent) and isinstance(event.event, GaussianEvent):
        return event.event.noise_multiplier, event.sampling_probability
    return None


def supports_lower_bound(event: Event) -> bool:
    """Whether :func:`epsilon_lower_bound` handles ``event``.

    Every leaf must be a :class:`GaussianEvent` or a :class:`PoissonSampledEvent` of
    one (any mix, each composed any number of times).
    """
    leaves: dict[Event, int] = {}
    _leaves(event, 1, leaves)
    return all(_gaussian_rate(leaf) is not None for leaf in leaves)


def _profiles(
    event: Event, discretization: float, tail_mass: float, owner: str
) -> tuple[LowerProfile, ...]:
    if not isinstance(event, Event):
        raise InvalidParameter.for_parameter("event", owner, "an Event", event)
    h = check.check_positive(discretization, "discretization", owner)
    if h > 1.0:
        raise InvalidParameter.for_parameter("discretization", owner, "a float in (0, 1]", h)
    tau = check.check_positive(tail_mass, "tail_mass", owner)
    if tau > 1e-6:
        raise InvalidParameter.for_parameter("tail_mass", owner, "a float in (0, 1e-6]", tau)
    leaves: dict[Event, int] = {}
    _leaves(event, 1, leaves)
    for leaf in leaves:
        if _gaussian_rate(leaf) is None:
            raise UnsupportedEvent(
                f"{owner}: the certified lower bound covers GaussianEvent and "
                f"PoissonSampledEvent(GaussianEvent) only; cannot analyse {leaf!r}."
            )
    if not leaves:
        return ()
    # Merge leaves with the same (noise multiplier, rate): their counts add.
    counts: dict[tuple[float, float], int] = {}
    for leaf, count in leaves.items():
        rate = _gaussian_rate(leaf)
        assert rate is not None  # checked above
        counts[rate] = counts.get(rate, 0) + count
    try:
        return _composed_profiles(tuple(sorted(counts.items())), h, tau)
    except TooManyBuckets:
        raise InvalidParameter(
            f"{owner} cannot represent {event!r} on a grid of width {h!r}: the privacy loss "
            "range needs too many grid points. Use a larger discretization."
        ) from None


@lru_cache(maxsize=2)
def _composed_profiles(
    counts: tuple[tuple[tuple[float, float], int], ...], h: float, tau: float
) -> tuple[LowerProfile, ...]:
    """The profiles of ``count`` copies of each ``(noise multiplier, rate)`` leaf.

    A pure function of public parameters, remembered for the last two compositions: an
    interval, or epsilon at several deltas, asks for the same profiles again (each is
    ~20-30 MB at the default grid, hence only two). Their arrays are made read-only,
    since the remembered objects are shared between calls.
    """
    # Gaussian leaves (q = 1) are symmetric: one PLD serves both orderings.
    symmetric = all(q == 1.0 for (_sigma, q), _count in counts)
    directions = ("remove",) if symmetric else ("remove", "add")
    cache: dict[tuple[float, float, str], tuple[LossPmf, float]] = {}

    def masses(sigma: float, q: float, direction: str) -> tuple[LossPmf, float]:
        key = (sigma, q, "remove" if q == 1.0 else direction)
        if key not in cache:
            cache[key] = lower_masses(sampled_cdfs(GaussianNoise(sigma), q, key[2]), h, tau)
        return cache[key]

    profiles = []
    for direction in directions:
        factors = []
        for (sigma, q), count in counts:
            pmf, bias = masses(sigma, q, direction)
            factors.append((pmf, bias, count))
        profiles.append(lower_product(factors, tau))
    for profile in profiles:
        for part in profile.parts:
            for value in vars(part).values():
                if isinstance(value, np.ndarray):
                    value.setflags(write=False)
    return tuple(profiles)


def epsilon_lower_bound(
    event: Event,
    delta: float,
    *,
    discretization: float = LOWER_DISCRETIZATION,
    tail_mass: float = 1e-15,
) -> float:
    """A certified lower bound on the smallest epsilon of ``event`` at ``delta``.

    ``event`` is made of :class:`GaussianEvent` and :class:`PoissonSampledEvent` of a
    Gaussian, in any mix and number (``RepeatedEvent``, ``ComposedEvent``); neighbours
    are add/remove and both orderings count. The result is rounded down
    and at least 0: no analysis of ``event`` can prove (eps, ``delta``)-DP for an eps
    below it. ``discretization`` is the grid width (smaller: tighter and slower).

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent, RepeatedEvent, gaussian_epsilon
    >>> lower = epsilon_lower_bound(RepeatedEvent(GaussianEvent(10.0), 100), 1e-5)
    >>> exact = gaussian_epsilon(1.0, 1e-5)  # 100 steps of sigma 10 = one of sigma 1
    >>> exact * 0.999 <= lower <= exact
    True
    """
    owner = "epsilon_lower_bound"
    delta = check.check_delta(delta, owner, allow_zero=False)
    profiles = _profiles(event, discretization, tail_mass, owner)
    return epsilon_lower(profiles, delta) if profiles else 0.0


def delta_lower_bound(
    event: Event,
    epsilon: float,
    *,
    discretization: float = LOWER_DISCRETIZATION,
    tail_mass: float = 1e-15,
) -> float:
    """A certified lower bound on the smallest delta of ``event`` at ``epsilon`` (>= 0)."""
    owner = "delta_lower_bound"
    epsilon = check.check_nonnegative(epsilon, "epsilon", owner, allow_inf=True)
    if math.isinf(epsilon):
        return 0.0
    profiles = _profiles(event, discretization, tail_mass, owner)
    return max((p.delta(epsilon) for p in profiles), default=0.0)
