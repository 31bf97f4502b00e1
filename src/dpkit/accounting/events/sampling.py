"""Subsampling events: a mechanism run on a random subset of the records.

Amplification by subsampling depends on the neighbouring relation, so each event
states its own (Balle, Barthe & Gaboardi 2018): Poisson sampling is analysed for
add/remove-one neighbours, sampling without replacement for replace-one neighbours.
The inner event's guarantee must hold for that same relation.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpkit._validation import check_count, check_probability
from dpkit.accounting._math.rounding import up
from dpkit.accounting.events._base import Event, register
from dpkit.accounting.subsampling import amplified_epsilon
from dpkit.errors import InvalidParameter

__all__ = ["PoissonSampledEvent", "SampledWithoutReplacementEvent"]


def _amplified(epsilon: float, rate: float) -> float:
    # One implementation of ln(1 + q (e^eps - 1)) (rounded up; log-space past e^eps's
    # float range): dpkit.accounting.subsampling.
    return amplified_epsilon(epsilon, sampling_probability=rate)


@register
@dataclass(frozen=True, slots=True)
class PoissonSampledEvent(Event):
    """``event`` ran on a Poisson sample: each record kept independently with probability ``p``.

    Neighbouring relation: add/remove one record. If ``event`` is ``eps``-DP then the
    whole is ``ln(1 + p (e^eps - 1))``-DP, exactly tight (Balle, Barthe & Gaboardi 2018,
    Thm 8; the "Privacy Amplification by Subsampling" post, Thm 1). Accountants with
    finer analyses (RDP, PLD) treat the sampled Gaussian and Laplace exactly.
    """

    event: Event
    sampling_probability: float

    def __post_init__(self) -> None:
        owner = "PoissonSampledEvent"
        if not isinstance(self.event, Event):
            raise InvalidParameter.for_parameter("event", owner, "an Event", self.event)
        rate = check_probability(
            self.sampling_probability, "sampling_probability", owner, open_low=True
        )
        object.__setattr__(self, "sampling_probability", rate)

    def _pure_epsilon(self) -> float | None:
        epsilon = self.event._pure_epsilon()
        return None if epsilon is None else _amplified(epsilon, self.sampling_probability)


@register
@dataclass(frozen=True, slots=True)
class SampledWithoutReplacementEvent(Event):
    """``event`` ran on ``sample_size`` records drawn without replacement from ``population_size``.

    Neighbouring relation: replace one record. If ``event`` is ``eps``-DP then the whole
    is ``ln(1 + (m/n)(e^eps - 1))``-DP (Balle, Barthe & Gaboardi 2018, Thm 9).
    """

    event: Event
    sample_size: int
    population_size: int

    def __post_init__(self) -> None:
        owner = "SampledWithoutReplacementEvent"
        if not isinstance(self.event, Event):
            raise InvalidParameter.for_parameter("event", owner, "an Event", self.event)
        m = check_count(self.sample_size, "sample_size", owner)
        n = check_count(self.population_size, "population_size", owner)
        if m > n:
            raise InvalidParameter.for_parameter(
                "sample_size", owner, f"at most population_size ({n})", m
            )
        object.__setattr__(self, "sample_size", m)
        object.__setattr__(self, "population_size", n)

    def _pure_epsilon(self) -> float | None:
        epsilon = self.event._pure_epsilon()
        if epsilon is None:
            return None
        # m / n rounded up, but never above 1 (m == n rounds to exactly 1).
        return _amplified(epsilon, min(1.0, up(self.sample_size / self.population_size, 1)))
