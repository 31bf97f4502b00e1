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
- :class:`PermuteAndFlipEvent`: ``eps``-DP (McKenna & Sheldon 2020, Thm 1), as binary
  randomized response, the PLD dominating every ``eps``-DP mechanism (Kairouz, Oh &
  Viswanath 2015). Permute-and-flip is not known to be bounded range, so nothing
  tighter is claimed.
"""

from __future__ import annotations

from dpkit.accounting._math.pld.bounded_range import bounded_range_pmf
from dpkit.accounting._math.pld.discretize import from_interval_cdfs
from dpkit.accounting._math.pld.mechanisms import randomized_response_pmf
from dpkit.accounting._math.pld.pmf import LossPmf
from dpkit.accounting._math.pld.replace_one import replace_one_gaussian_cdfs
from dpkit.accounting.events import (
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    PermuteAndFlipEvent,
    PoissonSampledEvent,
)


def _replace_one_sampled_gaussian(event: Event, relation: str) -> bool:
    return (
        relation == "replace"
        and isinstance(event, PoissonSampledEvent)
        and isinstance(event.event, GaussianEvent)
    )


__all__ = ["extra_leaf_pmfs", "supports_extra"]


def supports_extra(event: Event, relation: str) -> bool:
    """Whether :func:`extra_leaf_pmfs` has a PLD for ``event`` under ``relation``."""
    if _replace_one_sampled_gaussian(event, relation):
        return True
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
    if isinstance(event, ExponentialMechanismEvent):
        return bounded_range_pmf(event.epsilon, h), None
    if isinstance(event, PermuteAndFlipEvent):
        return randomized_response_pmf(event.epsilon, 2, h), None
    return None
