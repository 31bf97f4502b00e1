"""The only door between a synthesis run and the data: noisy marginals and selections.

:class:`PrivateMarginals` holds the bounded, coded table (integer codes and counts,
:mod:`dpkit.analytics.engines._cells`) and a zCDP budget ``rho``. The private
algorithms (:mod:`dpkit.synth._mst`, :mod:`dpkit.synth._aim`) read the data only
through its two mechanisms, each charged exactly, in rationals, against the budget:

* :meth:`PrivateMarginals.measure` -- a marginal plus discrete Gaussian noise per cell.
  With every person keeping at most ``k`` rows, one person moves a marginal by at most
  ``k`` in L2 norm, so noise of scale ``sigma`` is ``k^2 / (2 sigma^2)``-zCDP
  (Canonne, Kamath & Steinke 2020, Thm 14);
* :meth:`PrivateMarginals.select` -- the exponential mechanism over candidate scores
  computed from exact marginals, ``epsilon^2 / 8``-zCDP (bounded range; Cesar &
  Rogers 2021) when the scores' sensitivity is what the caller states (``k`` times the
  largest weight for AIM's and MST's L1 errors: one person changes an L1 error by at most
  the L1 change of the marginal, ``k``).

The run's guarantee is the adaptive composition of those steps, ``rho``-zCDP in total
(Bun & Steinke 2016, Lemma 2.3 -- every step's cost is fixed before it runs, so the
budget check below is a filter over a fixed total). A step that would pass the budget
raises :class:`~dpkit.errors.InternalError`: the algorithms plan their steps to fit, so
it is a bug, and the Session fails closed on it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit.accounting._math.rounding import fraction_down, fraction_up
from dpkit.errors import InternalError, WeakGuaranteeWarning
from dpkit.mechanisms.gaussian import DiscreteGaussian
from dpkit.random import Random
from dpkit.selection.exponential import ExponentialMechanism
from dpkit.synth._domain import Domain, Measurement

__all__ = ["PrivateMarginals", "gaussian_cost", "selection_cost"]

#: Cells of exact marginals kept between rounds (2^25 float64: 256 MiB at most).
CACHE_CELLS = 2**25


def gaussian_cost(sigma: float, sensitivity: int) -> Fraction:
    """Exact zCDP cost ``k^2 / (2 sigma^2)`` of discrete Gaussian noise."""
    return Fraction(sensitivity) ** 2 / (2 * Fraction(sigma) ** 2)


def selection_cost(epsilon: float) -> Fraction:
    """zCDP cost of the exponential mechanism, ``epsilon^2 / 8`` rounded up to a float
    (exactly :attr:`ExponentialMechanism.rho`)."""
    return Fraction(fraction_up(Fraction(epsilon) ** 2 / 8))


def sigma_for(rho: Fraction, sensitivity: int) -> float:
    """The smallest float sigma whose exact cost is at most ``rho`` (round up)."""
    if rho <= 0:
        raise InternalError("a measurement got no budget; this is a bug.")
    sigma = fraction_up(Fraction(sensitivity) / Fraction(math.sqrt(2 * float(rho))))
    while gaussian_cost(sigma, sensitivity) > rho:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def epsilon_for(rho: Fraction) -> float:
    """The largest float epsilon whose exponential mechanism costs at most ``rho``."""
    epsilon = fraction_down(Fraction(math.sqrt(8 * float(rho))))
    while epsilon > 0 and selection_cost(epsilon) > rho:
        epsilon = math.nextafter(epsilon, 0.0)
    return epsilon


class PrivateMarginals:
    """Exact marginals of the coded table, released only with noise (module docstring)."""

    def __init__(
        self,
        codes: npt.NDArray[np.int64],
        counts: npt.NDArray[np.int64],
        domain: Domain,
        *,
        sensitivity: int,
        rho: Fraction,
        rng: Random,
    ) -> None:
        self._codes = codes
        self._counts = counts.astype(np.float64)
        self.domain = domain
        self.sensitivity = int(sensitivity)
        self.budget = rho
        self.spent = Fraction(0)
        self._rng = rng
        self._exact: dict[tuple[str, ...], npt.NDArray[np.float64]] = {}
        self._cached_cells = 0
        self.steps: list[tuple[str, tuple[str, ...], float, Fraction]] = []

    @property
    def remaining(self) -> Fraction:
        return self.budget - self.spent

    def _pay(self, cost: Fraction) -> None:
        if self.spent + cost > self.budget:
            raise InternalError("a synthesis step would exceed its budget; this is a bug.")
        self.spent += cost

    def _true(self, columns: tuple[str, ...]) -> npt.NDArray[np.float64]:
        """Exact counts over ``columns`` (never returned to a caller unprotected)."""
        cached = self._exact.get(columns)
        if cached is not None:
            return cached
        shape = self.domain.shape(columns)
        index = [self.domain.index(c) for c in columns]
        flat: npt.NDArray[np.float64] = np.zeros(math.prod(shape))
        if self._codes.shape[0]:
            cells = np.ravel_multi_index(tuple(self._codes[:, i] for i in index), shape)
            flat = np.bincount(cells, weights=self._counts, minlength=math.prod(shape)).astype(
                np.float64
            )
        out = flat.reshape(shape)
        # A bounded cache (public sizes only): AIM asks for the same candidates each round.
        if self._cached_cells + out.size <= CACHE_CELLS:
            self._exact[columns] = out
            self._cached_cells += out.size
        return out

    def recode(self, kept: dict[str, npt.NDArray[np.int64]], domain: Domain) -> None:
        """Merge codes (a map of each row's own codes, chosen from noisy releases only:
        post-processing, and every person still keeps at most ``k`` rows)."""
        for j, name in enumerate(self.domain.names):
            table = np.full(self.domain.sizes[j], len(kept[name]), dtype=np.int64)
            table[kept[name]] = np.arange(len(kept[name]), dtype=np.int64)
            self._codes[:, j] = table[self._codes[:, j]]
        self.domain = domain
        self._exact.clear()
        self._cached_cells = 0

    def measure(self, columns: Sequence[str], rho: Fraction) -> Measurement:
        """The marginal over ``columns`` with discrete Gaussian noise costing <= ``rho``."""
        key = tuple(columns)
        sigma = sigma_for(rho, self.sensitivity)
        mechanism = DiscreteGaussian(sigma=sigma, sensitivity=float(self.sensitivity))
        self._pay(gaussian_cost(sigma, self.sensitivity))
        exact = self._true(key)
        noisy = mechanism.release(exact.astype(np.int64).ravel(), rng=self._rng).value
        self.steps.append(("measure", key, sigma, gaussian_cost(sigma, self.sensitivity)))
        return Measurement(key, np.asarray(noisy, dtype=np.float64).reshape(exact.shape), sigma)

    def measure_with_sigma(self, columns: Sequence[str], sigma: float) -> Measurement:
        """As :meth:`measure`, at a given noise scale (its exact cost is charged)."""
        return self.measure(columns, gaussian_cost(sigma, self.sensitivity))

    def select(
        self,
        candidates: Sequence[tuple[str, ...]],
        score: Callable[[tuple[str, ...], npt.NDArray[np.float64]], float],
        *,
        epsilon: float,
        score_sensitivity: float,
    ) -> int:
        """Index of a candidate chosen by the exponential mechanism on
        ``score(candidate, exact marginal)``; ``score_sensitivity`` bounds how much one
        person changes a score (the caller's proof obligation, see each algorithm)."""
        scores = np.array([score(c, self._true(c)) for c in candidates], dtype=np.float64)
        with warnings.catch_warnings():
            # The run's budget was the analyst's choice, checked when it was given; a
            # late round's large epsilon is part of it, not a weak guarantee.
            warnings.simplefilter("ignore", WeakGuaranteeWarning)
            mechanism = ExponentialMechanism(epsilon=epsilon, sensitivity=score_sensitivity)
        self._pay(selection_cost(epsilon))
        chosen = int(mechanism.release(scores, rng=self._rng).value)
        self.steps.append(("select", candidates[chosen], epsilon, selection_cost(epsilon)))
        return chosen
