"""The discrete privacy loss distribution: masses on a uniform grid, plus infinity.

A privacy loss distribution (PLD) of a pair ``(P, Q)`` is the law of
``L = log(dP/dQ)(o)`` for ``o ~ P``, with the mass of ``P`` where ``Q`` vanishes put at
``+inf``. Its hockey-stick functional is ``delta(eps) = sup_S P(S) - e^eps Q(S)``::

    delta(eps) = w(+inf) + sum_{l > eps} w(l) (1 - e^{eps - l})

:class:`LossPmf` stores a PLD whose finite losses lie on the grid ``{j h : j in Z}`` as a
dense array starting at grid index ``offset``. It also carries an additive allowance for
floating-point error, a constant ``slack`` plus an exponentially decaying term, so that
the statement a ``LossPmf`` makes is

    for every real eps:  delta_true(eps) <= delta_pmf(eps) + slack
                                            + min(tilt_cap, tilt_coef e^{-tilt eps})
                                            + (low_slack if eps < low_until else 0).

The decaying term comes from compositions computed on exponentially tilted masses
(``m_j e^{tilt l_j}``, see :mod:`.power`): their round-off is relative to the tilted
masses, so it is tiny exactly where delta is tiny (large eps) instead of being spread
evenly over the whole grid. The step term is the round-off of the part of the grid
(small losses) that is composed untilted; it does not act above those losses.

Everything in this package preserves that statement: discretisation only moves mass to
larger losses (Meiser & Mohammadi 2018; Koskela, Jalko & Honkela 2020) or splits it by
connect-the-dots (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022), truncation moves
the left tail up and the right tail to ``+inf``, and numerical error is added to
``slack``. Because ``delta`` is linear in the measure and the composition of two PLDs is
their convolution, ``delta_{a*b}(eps) = sum_l b(l) delta_a(eps - l)``: a bound that
holds for *every* real eps (negative ones included) survives convolution with any
probability measure. That is why the statement is made for all real eps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "ErrorProfile",
    "FloatArray",
    "LossPmf",
    "U",
    "identity",
    "mass_lower",
    "mass_upper",
    "truncate",
]

FloatArray = npt.NDArray[np.float64]

#: Unit roundoff of binary64.
U = 2.0**-53


def exp_up(x: float) -> float:
    """``e^x`` rounded up (``exp`` within 8 ulps), ``inf`` where it would overflow."""
    return math.exp(x) * (1.0 + 16.0 * U) if x < 709.0 else math.inf


def mass_upper(masses: FloatArray) -> float:
    """An upper bound on the exact sum of non-negative ``masses``.

    NumPy sums pairwise, with relative error at most ``ceil(log2 n) u`` (Higham 2002,
    Sec. 4.2); we inflate by twice that.
    """
    n = max(2, masses.size)
    return float(np.sum(masses)) * (1.0 + 2.0 * (math.log2(n) + 1.0) * U)


def mass_lower(masses: FloatArray) -> float:
    """A lower bound on the exact sum of non-negative ``masses`` (for deficits)."""
    n = max(2, masses.size)
    return float(np.sum(masses)) * (1.0 - 2.0 * (math.log2(n) + 1.0) * U)


@dataclass(frozen=True, eq=False)
class ErrorProfile:
    """Where a PLD's float error acts, for compositions that can use it (optional).

    ``delta_true(eps) <= delta_pmf(eps) + base + sum_{l_j > eps} located_j`` for every
    real eps (entry ``j`` of ``located`` sits at the loss of ``masses[j]``), and each
    mass is within ``mass_error_j`` of its exact value. A :class:`LossPmf`'s ``slack``
    is never below ``base + sum(located)``, so the profile may always be ignored.
    """

    base: float
    located: FloatArray
    mass_error: FloatArray


@dataclass(frozen=True, eq=False)
class LossPmf:
    """A PLD on the grid ``h Z`` with mass at ``+inf`` and a float-error allowance.

    Attributes
    ----------
    h:
        Grid width (> 0). Finite losses are the multiples ``j h``.
    offset:
        Grid index of ``masses[0]``: ``masses[i]`` sits at loss ``(offset + i) h``.
    masses:
        Non-negative masses (read-only array, at least one entry).
    infinity_mass:
        Mass at ``+inf`` (the part of ``P`` that ``Q`` cannot produce, plus tails).
    slack:
        Additive bound on the floating-point error of the hockey-stick functional.
    tilt, tilt_coef, tilt_cap:
        A further error allowance ``min(tilt_cap, tilt_coef e^{-tilt eps})`` at ``eps``
        (all 0 when absent; ``tilt >= 0``).
    low_slack, low_until:
        A further allowance ``low_slack`` for ``eps < low_until`` only.
    true_log_mgf:
        Optionally, ``lam -> `` an upper bound on ``log sum_j a_j e^{lam l_j}`` over the
        finite part of the *exact* measure ``a`` that the error statement refers to
        (what the masses approximate). Compositions weigh error terms by it.
    profile:
        Optionally, where the ``slack`` acts (see :class:`ErrorProfile`).
    """

    h: float
    offset: int
    masses: FloatArray
    infinity_mass: float
    slack: float = 0.0
    tilt: float = 0.0
    tilt_coef: float = 0.0
    tilt_cap: float = 0.0
    low_slack: float = 0.0
    low_until: float = -math.inf
    profile: ErrorProfile | None = None
    true_log_mgf: Callable[[float], float] | None = None

    def __post_init__(self) -> None:
        masses = np.ascontiguousarray(self.masses, dtype=np.float64)
        if masses.ndim != 1 or masses.size == 0:
            raise ValueError("masses must be a non-empty 1-d array")  # internal misuse
        masses.setflags(write=False)
        object.__setattr__(self, "masses", masses)

    @property
    def losses(self) -> FloatArray:
        """The loss of each entry of :attr:`masses`."""
        return (self.offset + np.arange(self.masses.size, dtype=np.float64)) * self.h

    @property
    def finite_mass(self) -> float:
        """Total finite mass (an upper bound on the exact sum)."""
        return mass_upper(self.masses)

    @property
    def total_mass(self) -> float:
        """Finite plus infinite mass (1 up to pessimistic additions)."""
        return self.finite_mass + self.infinity_mass

    def tilted_error(self, epsilon: float) -> float:
        """``min(tilt_cap, tilt_coef e^{-tilt eps})``, rounded up (``exp`` within 8u)."""
        if self.tilt_cap == 0.0:
            return 0.0
        exponent = -self.tilt * epsilon
        if exponent > 700.0 or math.isinf(self.tilt_coef):
            return self.tilt_cap
        return min(self.tilt_cap, self.tilt_coef * math.exp(exponent) * (1.0 + 16.0 * U))

    def error_at(self, epsilon: float) -> float:
        """The whole float-error allowance at ``epsilon`` (slack, tilted and step terms)."""
        low = self.low_slack if epsilon < self.low_until else 0.0
        return (self.slack + self.tilted_error(epsilon) + low) * (1.0 + 4.0 * U)

    def with_error(self, **terms: float) -> LossPmf:
        """The same masses with other error terms (keyword names as the fields).

        The :attr:`profile` is dropped: it described the old ``slack``.
        """
        fields: dict[str, Any] = dict(terms)
        return replace(self, profile=None, **fields)


def identity(h: float) -> LossPmf:
    """The PLD of a mechanism that reveals nothing: all mass at loss 0."""
    return LossPmf(h, 0, np.ones(1), 0.0, 0.0, true_log_mgf=_zero)


def _zero(lam: float) -> float:
    """The log generating sum of the point mass at 0: exactly 0."""
    return 0.0


def truncate(pmf: LossPmf, tail_mass: float) -> LossPmf:
    """Drop at most ``tail_mass`` from each end of the finite masses, pessimistically.

    The left tail (total at most ``tail_mass``) is added to the first kept bucket: its
    losses only go up. The right tail is added to ``+inf``. Both moves can only raise
    ``delta(eps)`` for every eps, so the result still dominates the input.
    """
    masses = np.maximum(pmf.masses, 0.0)
    n = masses.size
    left_cum = np.cumsum(masses)
    right_cum = np.cumsum(masses[::-1])
    # First kept index: the prefix before it sums to at most tail_mass.
    lo = int(np.searchsorted(left_cum, tail_mass, side="right"))
    hi = n - int(np.searchsorted(right_cum, tail_mass, side="right"))  # exclusive
    if lo >= hi:  # everything is "tail": keep the single heaviest bucket region
        lo = int(np.argmax(masses))
        hi = lo + 1
    left = mass_upper(masses[:lo]) if lo else 0.0
    right = mass_upper(masses[hi:]) if hi < n else 0.0
    kept = masses[lo:hi].copy()
    kept[0] += left
    # The moved masses are upper bounds of the exact tail sums; the sums of the kept
    # entries rounded once more in kept[0] (a relative 4u allowance covers it).
    slack = pmf.slack + 4.0 * U * left
    # The error terms stay valid: both moves only raise delta. The profile's located
    # errors no longer line up with the kept masses, so it is dropped.
    return replace(
        pmf,
        offset=pmf.offset + lo,
        masses=kept,
        infinity_mass=pmf.infinity_mass + right,
        slack=slack,
        profile=None,
    )
