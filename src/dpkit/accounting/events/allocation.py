"""Events of batch-formation schemes beyond Poisson sampling, for the PLD accountant.

- :class:`TruncatedPoissonSampledGaussianEvent`: Poisson sampling with a fixed maximum
  batch size (what a data loader with static shapes does), then the Gaussian.
- :class:`MixtureOfGaussiansEvent`: the scalar Gaussian mechanism whose shift between
  neighbours is random (Choquette-Choo, Ganesh, Steinke & Thakurta 2024): the building
  block of amplification analyses for correlated noise and fixed-size schemes.
- :class:`RandomAllocationGaussianEvent`: one epoch of random allocation ("balls and
  bins"): every record is used in ``k`` of ``t`` Gaussian steps chosen uniformly at
  random (Feldman & Shenfeld 2025, 2026).

Neighbouring relation: add/remove one record (the mixture of Gaussians is stated for
it only; truncated Poisson sampling also has a replace-one analysis). Noise multipliers are
noise standard deviation over the per-record L2 norm bound (clipping norm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpkit._validation import check_count, check_nonnegative, check_positive, check_probability
from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.events._base import Event, register
from dpkit.errors import InvalidParameter

__all__ = [
    "MixtureOfGaussiansEvent",
    "RandomAllocationGaussianEvent",
    "TruncatedPoissonSampledGaussianEvent",
]


@register
@dataclass(frozen=True, slots=True)
class TruncatedPoissonSampledGaussianEvent(Event):
    """Poisson sampling at rate ``q``, truncated to ``max_batch_size``, then the Gaussian.

    Each of ``dataset_size`` records is kept with probability ``q``; if more than
    ``B = max_batch_size`` are kept, a uniformly random ``B`` of them are used. The
    clipped contributions are summed and ``N(0, (noise_multiplier C)^2 I)`` added.

    Privacy analysis (add/remove, record ``x``; derived for dpkit, following the
    decomposition of dp_accounting's ``TruncatedSubsampledGaussianDpEvent``): let ``M``
    be the number of *other* records kept, whose law ``Bin(N - 1, q)`` is the same on
    both neighbours, so revealing whether ``M >= B`` is post-processing-safe to condition
    on. If ``M < B`` nothing is truncated: the Poisson-subsampled Gaussian at ``q``. If
    ``M >= B`` (probability ``tau = P[Bin(N - 1, q) >= B]``), by exchangeability the
    batch without ``x`` is a uniform ``B``-subset ``T`` of the others, and with ``x`` it is
    ``x`` plus a uniform ``(B - 1)``-subset with probability
    ``r = (B / N) P[Bin(N, q) >= B + 1] / tau``, else a uniform ``B``-subset; coupling
    the two through ``T`` and a uniform ``y`` in ``T`` leaves the pair
    ``(N(c), (1 - r) N(c) + r N(c + g(x) - g(y)))`` with ``|g(x) - g(y)| <= 2 C``: the
    Poisson-subsampled Gaussian at rate ``r`` with noise multiplier halved. The PLD is
    the mixture ``(1 - tau) PLD_1 + tau PLD_2`` (each ordering separately). dp_accounting
    bounds the second branch by its replace-one pair, which is looser.

    Under replace-one (``PLDAccountant(relation="replace")``, ``x`` replaced by ``x'``
    with a shared sampling coin and truncation draw) the same decomposition gives the
    replace-one sampled Gaussian at rate ``q``, and at rate ``r`` a pair whose common
    component sits at ``g(y)``: the contributions ``g(x) - g(y)``, ``g(x') - g(y)`` range
    over a ball of radius ``2 C``, so the replace-one pair with the noise multiplier
    halved (as dp_accounting; its radius-``C`` version would miss ``y = x'``).
    """

    noise_multiplier: float
    sampling_probability: float
    max_batch_size: int
    dataset_size: int

    def __post_init__(self) -> None:
        owner = "TruncatedPoissonSampledGaussianEvent"
        sigma = check_positive(self.noise_multiplier, "noise_multiplier", owner)
        rate = check_probability(
            self.sampling_probability, "sampling_probability", owner, open_low=True
        )
        b = check_count(self.max_batch_size, "max_batch_size", owner)
        n = check_count(self.dataset_size, "dataset_size", owner)
        object.__setattr__(self, "noise_multiplier", sigma)
        object.__setattr__(self, "sampling_probability", rate)
        object.__setattr__(self, "max_batch_size", b)
        object.__setattr__(self, "dataset_size", n)


@register
@dataclass(frozen=True, slots=True)
class MixtureOfGaussiansEvent(Event):
    """A scalar Gaussian whose shift is random: ``N(0, s^2)`` against ``sum_i p_i N(c_i, s^2)``.

    ``s = noise_multiplier`` (in units of the sensitivity), shifts ``c_i = sensitivities``
    (>= 0) with probabilities ``p_i`` (summing to 1). On one neighbour the mechanism
    outputs ``N(0, s^2)``, on the other the mixture; both orderings are analysed. This is
    dp_accounting's ``MixtureOfGaussiansDpEvent`` (Choquette-Choo, Ganesh, Steinke &
    Thakurta 2024, who show it dominates one step of banded matrix mechanisms under
    their "b-min-sep" sampling); with shifts ``(0, 1)`` and probabilities ``(1 - q, q)``
    it is the Poisson-subsampled Gaussian.
    """

    noise_multiplier: float
    sensitivities: tuple[float, ...]
    probabilities: tuple[float, ...]

    def __post_init__(self) -> None:
        owner = "MixtureOfGaussiansEvent"
        sigma = check_positive(self.noise_multiplier, "noise_multiplier", owner)
        shifts = tuple(self.sensitivities) if isinstance(self.sensitivities, list | tuple) else ()
        probs = tuple(self.probabilities) if isinstance(self.probabilities, list | tuple) else ()
        if not shifts or len(shifts) != len(probs):
            raise InvalidParameter.for_parameter(
                "sensitivities",
                owner,
                "a non-empty sequence as long as 'probabilities'",
                self.sensitivities,
            )
        shifts = tuple(check_nonnegative(c, "sensitivities", owner) for c in shifts)
        probs = tuple(check_probability(p, "probabilities", owner, open_low=False) for p in probs)
        total = math.fsum(probs)
        if abs(total - 1.0) > 1e-9:
            raise InvalidParameter.for_parameter(
                "probabilities", owner, "probabilities summing to 1 (within 1e-9)", total
            )
        object.__setattr__(self, "noise_multiplier", sigma)
        object.__setattr__(self, "sensitivities", shifts)
        object.__setattr__(self, "probabilities", probs)


@register
@dataclass(frozen=True, slots=True)
class RandomAllocationGaussianEvent(Event):
    """One epoch of random ``k``-out-of-``t`` allocation of Gaussian steps ("balls and bins").

    ``t = num_steps`` steps run in sequence (each may be chosen from the previous
    outputs, as in DP-SGD); every record is used in exactly ``k = num_allocations``
    of them, chosen uniformly at random and independently of the other records (for
    ``k = 1``: each record goes to one uniformly random batch of the epoch). Each step
    adds ``N(0, (noise_multiplier C)^2 I)`` to the sum of the clipped contributions of
    its batch (per-record L2 norm at most ``C``). Several epochs: compose the event
    (``accountant.compose(event, count=epochs)``), with fresh allocations per epoch.

    Privacy analysis (add/remove): the PLD of Feldman & Shenfeld (2026, arXiv
    2602.17284) for the dominating pair of Feldman & Shenfeld (2025, arXiv 2502.08202),
    with ``k > 1`` reduced to the composition of ``k`` one-out-of-``t/k`` allocations;
    ``dpkit.accounting._math.pld.random_allocation`` states the pair and proves
    both that it covers adaptively chosen steps and the reduction. Supported by
    :class:`~dpkit.accounting.pld.PLDAccountant` with ``relation="add_remove"``.
    """

    noise_multiplier: float
    num_steps: int
    num_allocations: int = 1

    def __post_init__(self) -> None:
        owner = "RandomAllocationGaussianEvent"
        sigma = check_positive(self.noise_multiplier, "noise_multiplier", owner)
        t = check_count(self.num_steps, "num_steps", owner)
        k = check_count(self.num_allocations, "num_allocations", owner)
        if k > t:
            raise InvalidParameter.for_parameter(
                "num_allocations", owner, f"an integer in [1, num_steps = {t}]", k
            )
        object.__setattr__(self, "noise_multiplier", sigma)
        object.__setattr__(self, "num_steps", t)
        object.__setattr__(self, "num_allocations", k)

    def _zcdp_rho(self) -> float | None:
        # No worse than k unsubsampled Gaussian steps: each one-out-of-b block is a
        # mixture of pairs that are each the Gaussian pair on one coordinate (joint
        # convexity), and the block decomposition of the module dominates k > 1.
        return fraction_up(self.num_allocations / (2 * Fraction(self.noise_multiplier) ** 2))
