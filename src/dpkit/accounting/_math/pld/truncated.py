"""Truncated Poisson sampling: branch probabilities and the mixture of two PLDs.

See :class:`dpkit.accounting.events.allocation.TruncatedPoissonSampledGaussianEvent`
for the analysis: with probability ``1 - tau`` the step is the Poisson-subsampled
Gaussian at rate ``q``; with probability ``tau`` it is the one at rate ``r`` with half
the noise multiplier. A mixture ``a PLD_1 + b PLD_2`` is the PLD of the pair that also
reveals the branch, whose ``delta`` is ``a delta_1 + b delta_2`` at every eps.
"""

from __future__ import annotations

import numpy as np

from dpkit.accounting._math.pld.pmf import LossPmf, U, mass_upper

__all__ = ["branch_probabilities", "mix_pmfs"]

#: Relative accuracy assumed of SciPy's binomial tail (the regularised incomplete beta
#: function of Boost, accurate to a few ulp in double precision; the tests compare it
#: with mpmath). Branch probabilities are widened by this much in the safe direction.
BINOMIAL_REL = 1e-9


def branch_probabilities(q: float, batch: int, size: int) -> tuple[float, float, float]:
    """The branch weights and the truncated branch's rate, each on the safe side.

    ``tau = P[Bin(N - 1, q) >= B]`` and ``r = (B / N) P[Bin(N, q) >= B + 1] / tau``.
    Returned: ``w_plain >= 1 - tau``, ``w_truncated >= tau`` (so that
    ``w_plain delta_1 + w_truncated delta_2 >= (1 - tau) delta_1 + tau delta_2`` for any
    non-negative deltas) and ``r`` rounded up (delta of the subsampled Gaussian grows
    with the rate, both orderings: it is convex in the rate and 0 at rate 0), at most
    ``q``.
    """
    from scipy import stats  # deferred: SciPy is slow to import

    if batch >= size:  # never truncated
        return 1.0, 0.0, 0.0
    tau = float(stats.binom.sf(batch - 1, size - 1, q))
    if tau <= 0.0:
        # Underflow: tau < 1e-300 (a tail of at least B of N - 1 at rate q). Charge
        # the smallest normal double to the truncated branch.
        return 1.0, 2.0**-1022, q
    above = float(stats.binom.sf(batch, size, q))
    r = batch / size * above / tau
    r_up = min(q, r * (1.0 + 2.0 * BINOMIAL_REL) + 1e-300)
    w_plain = min(1.0, (1.0 - tau) * (1.0 + BINOMIAL_REL) + 4.0 * U)
    w_truncated = min(1.0, tau * (1.0 + BINOMIAL_REL))
    return w_plain, w_truncated, r_up


def _allowance(pmf: LossPmf) -> float:
    """A uniform bound on every float-error allowance ``pmf`` carries.

    ``slack`` holds at every eps; any further (eps-dependent) allowance a ``LossPmf``
    may carry is at most its cap, so adding the caps gives a bound valid at every eps.
    """
    extra = float(getattr(pmf, "tilt_cap", 0.0)) + float(getattr(pmf, "low_slack", 0.0))
    return (pmf.slack + extra) * (1.0 + 4.0 * U)


def mix_pmfs(first: LossPmf, a: float, second: LossPmf, b: float) -> LossPmf:
    """``a first + b second`` on the common grid, with float error added to ``slack``.

    Each mass is rounded twice (two products and a sum, relative error below 3u), so
    ``delta`` moves by at most ``3u`` times the total mass; ``4u`` of an upper bound on
    it is added to ``slack``, with the inputs' allowances (weighted). The infinity mass
    is rounded up.
    """
    if first.h != second.h:
        raise ValueError("mix_pmfs needs PLDs on the same grid")  # internal misuse
    lo = min(first.offset, second.offset)
    hi = max(first.offset + first.masses.size, second.offset + second.masses.size)
    masses = np.zeros(hi - lo)
    masses[first.offset - lo : first.offset - lo + first.masses.size] += a * first.masses
    masses[second.offset - lo : second.offset - lo + second.masses.size] += b * second.masses
    infinity = (a * first.infinity_mass + b * second.infinity_mass) * (1.0 + 4.0 * U)
    slack = (a * _allowance(first) + b * _allowance(second)) * (1.0 + 4.0 * U)
    slack += 4.0 * U * mass_upper(masses) * (1.0 + 4.0 * U)
    return LossPmf(first.h, lo, masses, infinity, slack)
