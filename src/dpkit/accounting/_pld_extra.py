"""PLDs of the selection events, dispatched for :class:`~dpkit.accounting.pld.PLDAccountant`.

Kept apart from ``pld.py`` so that the accountant gains events by two calls:
:func:`supports_extra` in its ``_supports_leaf`` and :func:`extra_leaf_pmfs` in its
``_leaf_pmfs``. Each PLD here dominates its event under either neighbouring relation
(the events' parameters are stated for the relation of their sensitivity).

- :class:`ExponentialMechanismEvent`: the bounded-range envelope
  (:mod:`dpkit.accounting._math.pld.bounded_range`; Durfee & Rogers 2019, Dong, Durfee
  & Rogers 2020), exact for one run.
- :class:`PoissonSampledEvent` of a :class:`GaussianEvent` under ``"replace"``: the
  replace-one pair of :mod:`dpkit.accounting._math.pld.replace_one` (dp_accounting's
  ``REPLACE_ONE``), with the noise multiplier over the per-record norm bound ``C``
  (the clipping norm of DP-SGD, as in dp_accounting and Opacus), not over the
  replace-one sensitivity ``2 C``.
- :class:`TruncatedPoissonSampledGaussianEvent`: the mixture of two
  Poisson-subsampled Gaussians stated in its docstring (add/remove), or of two
  replace-one sampled Gaussians, at rate ``q`` and at rate ``r`` with radius ``2 C``
  (replace).
- :class:`MixtureOfGaussiansEvent` (add/remove, at most 64 components): both
  orderings of ``N(0)`` against the mixture
  (:mod:`dpkit.accounting._math.pld.mixture_gaussian`).
- :class:`RandomAllocationGaussianEvent` (add/remove): one epoch of random
  ``k``-out-of-``t`` allocation of Gaussian steps, by the PLD of
  :mod:`dpkit.accounting._math.pld.random_allocation` (Feldman & Shenfeld 2025,
  2026); ``k > 1`` as the composition of ``k`` one-out-of-``floor(t/k)`` or
  ``ceil(t/k)`` allocations. Refused under ``"replace"`` (no analysis is known to
  dpkit for that relation).
- :class:`DiscreteGaussianEvent` (one coordinate, either relation) and, for
  add/remove, :class:`PoissonSampledEvent` of it or of a :class:`DiscreteLaplaceEvent`:
  the atoms of the (subsampled) integer-noise pairs, with certified masses
  (:mod:`dpkit.accounting._math.pld.discrete_sampled`). More coordinates stay on RDP.
- :class:`TruncatedDiscreteGaussianEvent` (either relation) and, for add/remove,
  :class:`PoissonSampledEvent` of it: the same atoms on the truncated support, the
  atoms outside the other law's support at ``+inf``
  (:mod:`dpkit.accounting._math.pld.truncated_discrete`).
- :class:`PermuteAndFlipEvent`: ``eps``-DP (McKenna & Sheldon 2020), as binary
  randomized response, the PLD dominating every ``eps``-DP mechanism (Kairouz, Oh &
  Viswanath 2015). Permute-and-flip is not known to be bounded range, so nothing
  tighter is claimed.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.bounded_range import bounded_range_pmf
from dpkit.accounting._math.pld.convolve import convolve
from dpkit.accounting._math.pld.discrete_sampled import (
    discrete_gaussian_sampled_pmfs,
    discrete_gaussian_supported,
    discrete_laplace_sampled_pmfs,
)
from dpkit.accounting._math.pld.discretize import TooManyBuckets, from_interval_cdfs
from dpkit.accounting._math.pld.hockey import hockey_stick
from dpkit.accounting._math.pld.mechanisms import (
    GaussianNoise,
    randomized_response_pmf,
    sampled_cdfs,
)
from dpkit.accounting._math.pld.mixture_gaussian import MAX_COMPONENTS, mixture_gaussian_cdfs
from dpkit.accounting._math.pld.pmf import LossPmf, identity
from dpkit.accounting._math.pld.power import self_compose
from dpkit.accounting._math.pld.random_allocation import allocation_law, law_pmfs
from dpkit.accounting._math.pld.replace_one import replace_one_gaussian_cdfs
from dpkit.accounting._math.pld.truncated import branch_probabilities, mix_pmfs
from dpkit.accounting._math.pld.truncated_discrete import (
    truncated_discrete_gaussian_pmfs,
    truncated_discrete_gaussian_supported,
)
from dpkit.accounting.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    PermuteAndFlipEvent,
    PoissonSampledEvent,
    TruncatedDiscreteGaussianEvent,
)
from dpkit.accounting.events.allocation import (
    MixtureOfGaussiansEvent,
    RandomAllocationGaussianEvent,
    TruncatedPoissonSampledGaussianEvent,
)
from dpkit.errors import InvalidParameter


def _replace_one_sampled_gaussian(event: Event, relation: str) -> bool:
    return (
        relation == "replace"
        and isinstance(event, PoissonSampledEvent)
        and isinstance(event.event, GaussianEvent)
    )


__all__ = ["extra_leaf_pmfs", "supports_extra"]

#: The mass the discrete Gaussian's truncation to ``|k| <= K`` may move to ``+inf``,
#: as a fraction of the accountant's ``tail_mass`` (the rest of it is the grid's).
_DISCRETE_TAIL_SHARE = 0.5


def _discrete_noise(event: Event, relation: str, tail_mass: float) -> bool:
    """One-coordinate discrete Gaussian, truncated or not (either relation), or its
    Poisson-subsampled form, or the Poisson-subsampled discrete Laplace (add/remove
    only)."""
    inner, sampled = event, False
    if isinstance(event, PoissonSampledEvent):
        inner, sampled = event.event, True
        if relation != "add_remove":
            return False
    if isinstance(inner, TruncatedDiscreteGaussianEvent):
        tail = tail_mass * _DISCRETE_TAIL_SHARE
        return truncated_discrete_gaussian_supported(
            inner.sigma, inner.sensitivity, inner.bound, tail
        )
    if isinstance(inner, DiscreteGaussianEvent):
        if inner.dimension != 1:
            return False
        tail = tail_mass * _DISCRETE_TAIL_SHARE
        return discrete_gaussian_supported(inner.sigma, int(inner.sensitivity), tail)
    # The plain discrete Laplace has its own PLD in pld.py.
    return sampled and isinstance(inner, DiscreteLaplaceEvent)


def _discrete_pmfs(event: Event, h: float, tail_mass: float) -> tuple[LossPmf, LossPmf | None]:
    q = 1.0
    inner = event
    if isinstance(event, PoissonSampledEvent):
        inner, q = event.event, event.sampling_probability
    if isinstance(inner, TruncatedDiscreteGaussianEvent):
        tail = tail_mass * _DISCRETE_TAIL_SHARE
        return truncated_discrete_gaussian_pmfs(
            inner.sigma, inner.sensitivity, inner.bound, q, h, tail
        )
    if isinstance(inner, DiscreteGaussianEvent):
        tail = tail_mass * _DISCRETE_TAIL_SHARE
        return discrete_gaussian_sampled_pmfs(inner.sigma, int(inner.sensitivity), q, h, tail)
    assert isinstance(inner, DiscreteLaplaceEvent)  # checked by _discrete_noise
    return discrete_laplace_sampled_pmfs(inner.scale, inner.sensitivity, q, h)


def supports_extra(event: Event, relation: str, tail_mass: float = 1e-15) -> bool:
    """Whether :func:`extra_leaf_pmfs` has a PLD for ``event`` under ``relation``."""
    if _replace_one_sampled_gaussian(event, relation):
        return True
    if _discrete_noise(event, relation, tail_mass):
        return True
    if isinstance(event, TruncatedPoissonSampledGaussianEvent):
        return True  # both relations (see _truncated_pmfs)
    if isinstance(event, MixtureOfGaussiansEvent):
        return relation == "add_remove" and len(event.sensitivities) <= MAX_COMPONENTS
    if isinstance(event, RandomAllocationGaussianEvent):
        return relation == "add_remove"
    # The selection analyses hold for the relation the event was calibrated for.
    return isinstance(event, ExponentialMechanismEvent | PermuteAndFlipEvent)


def extra_leaf_pmfs(
    event: Event, h: float, tail_mass: float, relation: str
) -> tuple[LossPmf, LossPmf | None] | None:
    """The event's "remove" PLD and its "add" PLD when different; ``None`` if unknown."""
    if _replace_one_sampled_gaussian(event, relation):
        assert isinstance(event, PoissonSampledEvent)
        assert isinstance(event.event, GaussianEvent)
        cdfs = replace_one_gaussian_cdfs(event.event.noise_multiplier, event.sampling_probability)
        return from_interval_cdfs(cdfs, h, tail_mass), None
    if _discrete_noise(event, relation, tail_mass):
        return _discrete_pmfs(event, h, tail_mass)
    if isinstance(event, TruncatedPoissonSampledGaussianEvent):
        if relation == "replace":
            return _truncated_replace_pmf(event, h, tail_mass), None
        return _truncated_pmfs(event, h, tail_mass)
    if isinstance(event, MixtureOfGaussiansEvent):
        return _mixture_pmfs(event, h, tail_mass)
    if isinstance(event, RandomAllocationGaussianEvent) and relation == "add_remove":
        return _allocation_pmfs(event, h, tail_mass)
    if isinstance(event, ExponentialMechanismEvent):
        return bounded_range_pmf(event.epsilon, h), None
    if isinstance(event, PermuteAndFlipEvent):
        return randomized_response_pmf(event.epsilon, 2, h), None
    return None


def _sampled_gaussian_pmfs(
    z: float, q: float, h: float, tail_mass: float
) -> tuple[LossPmf, LossPmf]:
    noise = GaussianNoise(z)
    remove = from_interval_cdfs(sampled_cdfs(noise, q, "remove"), h, tail_mass)
    if q == 1.0:  # one PLD for both orderings
        return remove, remove
    return remove, from_interval_cdfs(sampled_cdfs(noise, q, "add"), h, tail_mass)


def _truncated_pmfs(
    event: TruncatedPoissonSampledGaussianEvent, h: float, tail_mass: float
) -> tuple[LossPmf, LossPmf]:
    z, q = event.noise_multiplier, event.sampling_probability
    w_plain, w_truncated, rate = branch_probabilities(q, event.max_batch_size, event.dataset_size)
    plain = _sampled_gaussian_pmfs(z, q, h, tail_mass)
    if w_truncated == 0.0:
        return plain
    # |g(x) - g(y)| <= 2 C: the Gaussian with half the noise multiplier, at rate r.
    truncated = _sampled_gaussian_pmfs(z / 2.0, rate, h, tail_mass)
    remove = mix_pmfs(plain[0], w_plain, truncated[0], w_truncated)
    add = mix_pmfs(plain[1], w_plain, truncated[1], w_truncated)
    return remove, add


def _truncated_replace_pmf(
    event: TruncatedPoissonSampledGaussianEvent, h: float, tail_mass: float
) -> LossPmf:
    # Replace-one (x by x'): with no truncation, the replace-one sampled Gaussian at q.
    # With truncation, the batch is x (or x') plus a uniform (B - 1)-subset with
    # probability r, else a uniform B-subset U + {y}: the common component sits at g(y),
    # not at 0, so g(x) - g(y) and g(x') - g(y) range over a ball of radius 2 C. That is
    # the replace-one pair with radius 2 C (noise multiplier halved), as dp_accounting
    # does; with the same radius C it would be optimistic (it misses y = x').
    z, q = event.noise_multiplier, event.sampling_probability
    w_plain, w_truncated, rate = branch_probabilities(q, event.max_batch_size, event.dataset_size)
    plain = from_interval_cdfs(replace_one_gaussian_cdfs(z, q), h, tail_mass)
    if w_truncated == 0.0:
        return plain
    truncated = from_interval_cdfs(replace_one_gaussian_cdfs(z / 2.0, rate), h, tail_mass)
    return mix_pmfs(plain, w_plain, truncated, w_truncated)


def _mixture_pmfs(
    event: MixtureOfGaussiansEvent, h: float, tail_mass: float
) -> tuple[LossPmf, LossPmf]:
    shifts, probs = event.sensitivities, event.probabilities
    if not any(c > 0.0 and p > 0.0 for c, p in zip(shifts, probs, strict=True)):
        return identity(h), identity(h)  # the two outputs have the same law
    z = event.noise_multiplier
    remove = from_interval_cdfs(mixture_gaussian_cdfs(z, shifts, probs, "remove"), h, tail_mass)
    add = from_interval_cdfs(mixture_gaussian_cdfs(z, shifts, probs, "add"), h, tail_mass)
    return remove, add


#: Below this noise multiplier the random-allocation PLD is refused (one epoch already
#: costs epsilon > 20 there, and the grid of one lognormal exceeds MAX_GRID near 0.2).
_ALLOCATION_MIN_SIGMA = 0.15
#: A law whose total mass exceeds 1 by more than this is not used: its float-error
#: allowances (kept as upper bounds) compound by doubling, ~1e-8 per step at sigma 0.8
#: (1 + 1e-5 at t = 1000, 1.0076 at t = 10^6, 2.1 at 10^8) and grow like 1/sigma for
#: huge sigma. Valid but inflating delta by that factor; 1% is the most we accept.
_ALLOCATION_MAX_EXCESS = 1e-2


def _allocation_pmfs(
    event: RandomAllocationGaussianEvent, h: float, tail_mass: float
) -> tuple[LossPmf, LossPmf]:
    # k-out-of-t: k - r allocations 1-out-of-b and r of 1-out-of-(b + 1), t = k b + r
    # (Claim 2 of the module). Internal tails far below the accountant's.
    sigma, k = event.noise_multiplier, event.num_allocations
    if sigma < _ALLOCATION_MIN_SIGMA:
        raise InvalidParameter(
            f"PLDAccountant cannot analyse {event!r}: its noise multiplier is too small "
            "for the random-allocation PLD (the privacy loss spans too many grid "
            "points). Use a noise multiplier of at least 0.2."
        )
    b, r = divmod(event.num_steps, k)
    pieces = [(b, k - r), (b + 1, r)]
    remove: LossPmf | None = None
    add: LossPmf | None = None
    for steps, count in pieces:
        if count == 0:
            continue
        one_remove, one_add = _one_allocation_pmfs(sigma, steps, h, tail_mass, event)
        if count > 1:
            one_remove = self_compose(one_remove, count, tail_mass)
            one_add = self_compose(one_add, count, tail_mass)
        remove = one_remove if remove is None else convolve(remove, one_remove, tail_mass)
        add = one_add if add is None else convolve(add, one_add, tail_mass)
    assert remove is not None and add is not None
    return remove, add


def _one_allocation_pmfs(
    sigma: float, steps: int, h: float, tail_mass: float, event: Event
) -> tuple[LossPmf, LossPmf]:
    """One 1-out-of-``steps`` allocation: its PLD pair, or one Gaussian step's.

    Both are proven dominating pairs (the allocation pair is a mixture of pairs that
    are each one Gaussian step, so by joint convexity one Gaussian step dominates it),
    so either may be composed. The Gaussian is used where the allocation law is not
    usable (non-finite, or a total mass inflated by its float-error allowances: huge
    ``steps`` or ``sigma``) and where it is smaller at eps = 0 (very large ``sigma``,
    where the allocation law is narrower than its geometric grid).
    """
    gaussian = from_interval_cdfs(sampled_cdfs(GaussianNoise(sigma), 1.0, "remove"), h, tail_mass)
    if steps == 1:
        return gaussian, gaussian
    try:
        with np.errstate(all="ignore"):
            law = allocation_law(sigma, steps, tail_mass * 1e-3)
    except TooManyBuckets:
        raise InvalidParameter(
            f"PLDAccountant cannot analyse {event!r}: its noise multiplier is too small "
            "for the random-allocation PLD (the privacy loss spans too many grid "
            "points). Use a noise multiplier of at least 0.2."
        ) from None
    total = float(np.sum(law.masses)) + law.zero
    usable = (
        bool(np.all(np.isfinite(law.masses)))
        and math.isfinite(law.zero)
        and math.isfinite(law.excess)
        and total <= 1.0 + _ALLOCATION_MAX_EXCESS
    )
    if not usable:
        return gaussian, gaussian
    remove, add = law_pmfs(law, steps, h)
    baseline = hockey_stick(gaussian, 0.0)
    if max(hockey_stick(remove, 0.0), hockey_stick(add, 0.0)) > baseline:
        return gaussian, gaussian
    return remove, add
