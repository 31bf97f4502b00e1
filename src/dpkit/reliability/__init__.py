"""Algorithms that never fail (Steinke 2025, "Differentially Private Algorithms that Never Fail").

A DP algorithm ``M`` *fails* when its output is far from what was wanted: its loss
``l(M(x), x)`` exceeds a target ``alpha``, with probability at most ``beta`` on every
input. Three wrappers trade privacy for reliability (``docs/reliability.md``):

* :class:`NeverFail` (:func:`never_fail`): return ``M(x)`` if its loss is at most
  ``alpha``, else a non-private fallback. ``(eps, delta + (1 + e^eps) beta)``-DP; the
  loss is at most ``alpha`` always.
* :class:`RepeatUntilSuccess`: repeat ``M`` with a truncated-Laplace loss estimate until
  the estimate is low (Theorems 1-2 of the post): ``(2 eps_bar - ln(1 - d), d)``-DP with
  ``d = delta_bar / (1 - beta)``; the loss is at most ``alpha + 2 tau`` always.
* :class:`ReducedFailure`: the same with a Laplace estimate and thresholding: pure
  ``2 (eps + eps_z)``-DP; failure made rarer, not removed.

Calculators (public values only, nothing runs): :func:`absorb_failure`,
:func:`repeat_until_success`, :func:`reduce_failure`, :func:`truncation`,
:func:`compare`; losses with their failure bounds for dpkit's quantiles:
:func:`rank_loss`, :func:`rank_target`. Failed runs raise :class:`ReleaseFailed` (charge its event).
"""

from dpkit.reliability._base import AttemptsExhausted, MechanismFailed, ReleaseFailed
from dpkit.reliability.absorb import NeverFail, never_fail
from dpkit.reliability.guarantees import absorb_failure, repeat_until_success, truncation
from dpkit.reliability.losses import rank_loss, rank_target
from dpkit.reliability.plan import ConstructionCost, check_loss_sensitivity, compare
from dpkit.reliability.pure import ReducedFailure, ReducedFailurePlan, reduce_failure
from dpkit.reliability.repeat import RepeatUntilSuccess

__all__ = [
    "AttemptsExhausted",
    "ConstructionCost",
    "MechanismFailed",
    "NeverFail",
    "ReducedFailure",
    "ReducedFailurePlan",
    "ReleaseFailed",
    "RepeatUntilSuccess",
    "absorb_failure",
    "check_loss_sensitivity",
    "compare",
    "never_fail",
    "rank_loss",
    "rank_target",
    "reduce_failure",
    "repeat_until_success",
    "truncation",
]
