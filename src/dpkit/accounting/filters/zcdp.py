"""zCDP filter and odometer: sums of rho.

:class:`ZCDPFilter` accepts step ``t`` only if ``sum rho_t <= rho_g``, which gives
``rho_g``-zCDP under fully adaptive composition. This is the Renyi filter of Feldman &
Zrnic 2021 ("Individual privacy accounting via a Renyi filter", NeurIPS) applied at
every order at once, since ``rho``-zCDP is ``(a, a rho)``-RDP for all ``a > 1``.
Pure-DP steps are charged ``eps tanh(eps/2)`` (Steinke 2024, Thm 5).
:meth:`ZCDPFilter.from_approx` sets ``rho_g`` from an (eps, delta) target with the
conversion of Canonne, Kamath & Steinke 2020 (Cor. 13), applied once to the budget.

:class:`ZCDPOdometer` is a ledger of charges, not a guarantee at a data-dependent
stopping time (see :mod:`dpkit.accounting.filters._base`).
"""

from __future__ import annotations

import numbers
from fractions import Fraction

from dpkit import _validation as check
from dpkit.accounting._math import conversions
from dpkit.accounting.events import Event, zcdp_rho
from dpkit.accounting.filters._base import (
    Cost,
    PrivacyFilter,
    PrivacyOdometer,
    _check_budget,
    _Kind,
    _mismatch,
    _number,
    _rounded,
    _unsupported,
)
from dpkit.accounting.guarantees import ZCDP, ApproxDP, PureDP

__all__ = ["ZCDPFilter", "ZCDPOdometer"]


class _ZCDPKind(_Kind[ZCDP]):
    name = "zCDP"
    _expected = "a ZCDP, a PureDP, an Event with a zCDP cost or a rho"

    def cost(self, spend: object, owner: str) -> Cost:
        if isinstance(spend, ZCDP):
            return (Fraction(spend.rho),)
        if isinstance(spend, PureDP) or (isinstance(spend, ApproxDP) and spend.delta == 0.0):
            # Steinke 2024, Thm 5: eps-DP implies eps tanh(eps/2)-zCDP (rounded up).
            return (Fraction(conversions.pure_to_zcdp_rho(spend.epsilon)),)
        if isinstance(spend, Event):
            rho = zcdp_rho(spend)
            if rho is None:
                raise _unsupported(spend, owner, "zCDP")
            return (Fraction(rho),)
        if isinstance(spend, numbers.Real) and not isinstance(spend, bool):
            return (_number(spend, owner),)
        raise _mismatch(spend, owner, self._expected)

    def to_guarantee(self, values: Cost, *, round_up: bool) -> ZCDP:
        return ZCDP(_rounded(values[0], round_up))

    def zero(self) -> Cost:
        return (Fraction(0),)


class ZCDPFilter(PrivacyFilter[ZCDP]):
    """Filter for zCDP: accepts step ``t`` only if ``sum_{s<=t} rho_s <= rho_g``.

    Parameters
    ----------
    budget:
        :class:`ZCDP` (``rho_g``).

    Privacy
    -------
    The interaction is ``rho_g``-zCDP under fully adaptive composition (Feldman & Zrnic
    2021, Renyi filter, at every order; Whitehouse et al. 2022). Pure-DP steps are
    charged ``eps tanh(eps/2)`` (Steinke 2024, Thm 5). Convert the *budget* once at the
    end: ``budget.to_approx(delta)`` (Canonne, Kamath & Steinke 2020, Cor. 13).

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent, ZCDP
    >>> from dpkit.accounting.filters import ZCDPFilter
    >>> budget = ZCDPFilter(ZCDP(0.5))
    >>> budget.spend(GaussianEvent(noise_multiplier=2.0))
    ZCDP(rho=0.125)
    >>> budget.remaining
    ZCDP(rho=0.375)
    """

    def __init__(self, budget: ZCDP) -> None:
        super().__init__(_ZCDPKind(), _check_budget(budget, ZCDP, "ZCDPFilter"))

    @classmethod
    def from_approx(cls, *, epsilon: float, delta: float) -> ZCDPFilter:
        """The zCDP filter whose budget implies (``epsilon``, ``delta``)-DP.

        ``rho_g`` is the largest rho (to ~1e-15 relative, found by bisection) whose
        conversion ``ZCDP(rho).to_approx(delta)`` is at most ``epsilon``, so the
        interaction is (``epsilon``, ``delta``)-DP whatever is spent.

        Examples
        --------
        >>> from dpkit.accounting.filters import ZCDPFilter
        >>> budget = ZCDPFilter.from_approx(epsilon=1.0, delta=1e-6)
        >>> budget.budget.to_approx(1e-6).epsilon <= 1.0
        True
        """
        owner = "ZCDPFilter.from_approx"
        epsilon = check.check_positive(epsilon, "epsilon", owner)
        delta = check.check_delta(delta, owner, allow_zero=False)
        low, high = 0.0, epsilon  # zcdp_epsilon(eps, delta) > eps: high is infeasible
        for _ in range(200):
            mid = 0.5 * (low + high)
            if mid in (low, high):
                break
            if conversions.zcdp_epsilon(mid, delta) <= epsilon:
                low = mid
            else:
                high = mid
        return cls(ZCDP(low))


class ZCDPOdometer(PrivacyOdometer[ZCDP]):
    """Running total of zCDP charges (a ledger; see the module docstring).

    The total is a guarantee only when compared against a budget fixed in advance,
    which is what :class:`ZCDPFilter` does.
    """

    def __init__(self) -> None:
        super().__init__(_ZCDPKind())
