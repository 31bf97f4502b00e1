"""Privacy filters and odometers: budgets that hold under fully adaptive composition.

A **filter** has a budget fixed before an interaction whose mechanisms and privacy
parameters are chosen adaptively, and refuses any step that would exceed it; an
**odometer** reports the running total (Rogers, Roth, Ullman & Vadhan 2016). One module
per family, each citing the theorem its filter relies on:

- :mod:`~dpkit.accounting.filters.pure`: :class:`PureDPFilter`,
  :class:`PureDPOdometer` (basic composition, RRUV16).
- :mod:`~dpkit.accounting.filters.approx`: :class:`ApproxDPFilter`,
  :class:`ApproxDPOdometer` (basic composition, RRUV16) and
  :class:`AdvancedCompositionFilter` (dpkit's corollary of Whitehouse, Ramdas, Rogers
  & Wu, ICML 2023, Thm 1).
- :mod:`~dpkit.accounting.filters.zcdp`: :class:`ZCDPFilter`, :class:`ZCDPOdometer`
  (the Renyi filter of Feldman & Zrnic 2021 at every order).
- :mod:`~dpkit.accounting.filters.approx_zcdp`: :class:`ApproxZCDP`,
  :class:`ApproxZCDPFilter` (WRRW23, Thm 1).
- :mod:`~dpkit.accounting.filters.pure_approx_zcdp`: :class:`PureApproxZCDPFilter`
  (an ApproxDP budget with pure epsilons at face value next to approximate zCDP, at
  one fixed conversion order; proven in that module) and its per-part
  :class:`PureApproxZCDPBox`.
- :mod:`~dpkit.accounting.filters.rdp`: :class:`RDPFilter`, :class:`RDPOdometer`
  (Feldman & Zrnic 2021 at fixed orders).
- :mod:`~dpkit.accounting.filters._base`: what they share (:class:`PrivacyFilter`,
  :class:`PrivacyOdometer`, the exact ledger) and why refusals and odometers are sound.

:func:`privacy_filter` picks the filter for a budget of any kind.

Not implemented, on purpose
---------------------------
- **Mixing definitions in one filter by "reordering"** (compose all zCDP steps, convert,
  then add (eps, delta) steps), or accepting a step when *either* of two rules holds.
  Tight for sequential composition, but whether it is valid for fully adaptive filters
  is an open problem ("Open problem(s): how generic can composition results be?",
  differentialprivacy.org 2023). The one mix dpkit ships,
  :class:`PureApproxZCDPFilter`, adds pure epsilons to a zCDP conversion at a single
  order fixed in advance, which its module proves; a conversion at the best order for
  each final state (an odometer) is not valid, and a test shows it failing.
- **PLD-based filters**: PLD composition is proven for (adaptive) sequential
  composition only; use PLD accountants when parameters are fixed in advance.
- **(eps, delta) statements from zCDP/RDP odometers**: their reading is a ledger, not a
  guarantee at a data-dependent stopping time (see ``_base``); fix a budget in advance
  and use a filter.
"""

from __future__ import annotations

from dpkit.accounting.filters._base import PrivacyFilter, PrivacyOdometer
from dpkit.accounting.filters.approx import (
    AdvancedCompositionFilter,
    ApproxDPFilter,
    ApproxDPOdometer,
)
from dpkit.accounting.filters.approx_zcdp import ApproxZCDP, ApproxZCDPFilter
from dpkit.accounting.filters.pure import PureDPFilter, PureDPOdometer
from dpkit.accounting.filters.pure_approx_zcdp import (
    PureApproxZCDP,
    PureApproxZCDPBox,
    PureApproxZCDPFilter,
)
from dpkit.accounting.filters.rdp import RDPFilter, RDPOdometer
from dpkit.accounting.filters.zcdp import ZCDPFilter, ZCDPOdometer
from dpkit.accounting.guarantees import RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.errors import InvalidParameter

__all__ = [
    "AdvancedCompositionFilter",
    "ApproxDPFilter",
    "ApproxDPOdometer",
    "ApproxZCDP",
    "ApproxZCDPFilter",
    "PrivacyFilter",
    "PrivacyOdometer",
    "PureApproxZCDP",
    "PureApproxZCDPBox",
    "PureApproxZCDPFilter",
    "PureDPFilter",
    "PureDPOdometer",
    "RDPFilter",
    "RDPOdometer",
    "ZCDPFilter",
    "ZCDPOdometer",
    "privacy_filter",
]


def privacy_filter(
    budget: Guarantee,
) -> (
    PrivacyFilter[PureDP]
    | PrivacyFilter[ApproxDP]
    | PrivacyFilter[ZCDP]
    | PrivacyFilter[ApproxZCDP]
    | PrivacyFilter[RDP]
):
    """The filter for a budget of any kind: :class:`PureDP` -> :class:`PureDPFilter`, etc.

    An :class:`ApproxDP` budget gets the basic-composition :class:`ApproxDPFilter`; for
    many small steps build an :class:`AdvancedCompositionFilter` instead.

    Examples
    --------
    >>> from dpkit.accounting import ZCDP
    >>> from dpkit.accounting.filters import privacy_filter
    >>> privacy_filter(ZCDP(0.5))
    ZCDPFilter(budget=ZCDP(rho=0.5), spent=ZCDP(rho=0.0))
    """
    if isinstance(budget, PureDP):
        return PureDPFilter(budget)
    if isinstance(budget, ApproxDP):
        return ApproxDPFilter(budget)
    if isinstance(budget, ZCDP):
        return ZCDPFilter(budget)
    if isinstance(budget, ApproxZCDP):
        return ApproxZCDPFilter(budget)
    if isinstance(budget, RDP):
        return RDPFilter(budget)
    raise InvalidParameter.for_parameter(
        "budget",
        "privacy_filter",
        "a PureDP, ApproxDP, ZCDP, ApproxZCDP or RDP guarantee",
        budget,
    )
