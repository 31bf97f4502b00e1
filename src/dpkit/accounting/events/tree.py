"""Tree aggregation (DP-FTRL): Gaussian noise on the nodes of binary trees of prefix sums.

DP-FTRL (Kairouz et al. 2021) releases noisy prefix sums of per-step gradients through
the tree-aggregation protocol: step ``t``'s clipped gradient enters the leaf ``t`` of a
binary tree, every completed node (a dyadic interval of steps) is released with
independent ``N(0, (noise_multiplier C)^2)`` noise, and each prefix sum is assembled
from at most ``log2`` nodes. The tree may be restarted (a new tree per epoch).

Neighbouring relation: *replace with special* (dp_accounting's ``REPLACE_SPECIAL``):
the datasets have the same size and differ in one record, replaced in one of them by
a special record whose clipped gradient is zero. With clipping norm ``C`` a record
then moves each node that contains it by at most ``C`` (norm). Other relations are not
covered: replacing a record by an arbitrary one moves a node by up to ``2 C``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from dpkit._validation import check_count, check_positive
from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.events._base import Event, register
from dpkit.errors import InvalidParameter

__all__ = ["SingleEpochTreeAggregationEvent", "tree_depth"]


def tree_depth(steps: int) -> int:
    """How many released nodes of one tree over ``steps`` steps can contain one leaf.

    Only completed nodes are released, and the completed dyadic intervals inside
    ``[1, T]`` that contain a given step come from ``floor(log2 T) + 1 =
    ceil(log2(T + 1))`` levels (Kairouz et al. 2021, App. D). 0 for an empty tree.

    >>> [tree_depth(t) for t in (0, 1, 2, 3, 4, 7, 8, 1600)]
    [0, 1, 2, 2, 3, 3, 4, 11]
    """
    return int(steps).bit_length()  # floor(log2 T) + 1 for T >= 1, exactly, in integers


@register
@dataclass(frozen=True, slots=True)
class SingleEpochTreeAggregationEvent(Event):
    """One epoch of DP-FTRL tree aggregation, over one or several (restarted) trees.

    ``step_counts`` holds the number of steps of each tree, and every record is used at
    most once *across all these trees* (one pass over the data). A record then lies in
    at most ``d = ceil(log2(max(step_counts) + 1))`` released nodes, each perturbed with
    independent Gaussian noise of ``noise_multiplier`` times the clipping norm. Under
    the replace-with-special relation (module docstring) the whole release is the
    Gaussian mechanism with squared sensitivity ``d`` (adaptively composed node by
    node: Mironov 2017, Prop. 1 and 7), that is ``(a, a d / (2 noise_multiplier^2))``-RDP
    for every ``a > 1`` and ``d / (2 noise_multiplier^2)``-zCDP (Kairouz, McMahan, Song,
    Thakkar, Thakurta & Xu 2021, "Practical and private (deep) learning without sampling
    or shuffling", ICML, App. D). For a record used once per epoch over several epochs,
    compose one event per epoch (or a ``RepeatedEvent``).

    Parameters
    ----------
    noise_multiplier:
        Noise standard deviation per node over the clipping norm, > 0.
    step_counts:
        Steps per tree: an int >= 0 for a single tree, or a non-empty sequence of them
        (stored as a tuple).
    """

    noise_multiplier: float
    step_counts: tuple[int, ...]

    def __init__(self, noise_multiplier: float, step_counts: int | Sequence[int]) -> None:
        owner = "SingleEpochTreeAggregationEvent"
        sigma = check_positive(noise_multiplier, "noise_multiplier", owner)
        if isinstance(step_counts, Sequence) and not isinstance(step_counts, str):
            if len(step_counts) == 0:
                raise InvalidParameter.for_parameter(
                    "step_counts", owner, "an int >= 0 or a non-empty sequence of them", []
                )
            counts = tuple(check_count(s, "step_counts", owner, minimum=0) for s in step_counts)
        else:
            counts = (check_count(step_counts, "step_counts", owner, minimum=0),)
        object.__setattr__(self, "noise_multiplier", sigma)
        object.__setattr__(self, "step_counts", counts)

    @property
    def depth(self) -> int:
        """Most released nodes one record can lie in: ``ceil(log2(max steps + 1))``."""
        return tree_depth(max(self.step_counts))

    def _zcdp_rho(self) -> float | None:
        # d / (2 sigma^2), exactly, rounded up.
        return fraction_up(Fraction(self.depth) / (2 * Fraction(self.noise_multiplier) ** 2))
