"""Renyi DP of the Laplace mechanism (Mironov 2017, Prop. 6).

Laplace noise of scale ``b`` added to a query of L1 sensitivity ``D`` is ``eps``-DP with
``eps = D / b``, and its Renyi divergence of order ``a > 1`` is at most (with equality
for a one-dimensional query)::

    eps_Lap(a) = (1/(a-1)) log( a/(2a-1) e^{(a-1) eps} + (a-1)/(2a-1) e^{-a eps} )
               = eps + log(1 + (a-1)(e^{(1-2a) eps} - 1)/(2a-1)) / (a-1)

and at ``a = 1`` (the KL divergence) ``eps + e^{-eps} - 1``. For a d-dimensional query
the divergence is the sum over coordinates of ``eps_Lap`` at ``|shift_j| / b``; since
``eps_Lap`` is convex in ``eps`` with value 0 at 0 it is superadditive, so the sum is at
most ``eps_Lap`` at ``D / b``: the bound above holds with the L1 sensitivity.

Source: I. Mironov, "Renyi differential privacy", CSF 2017 (arXiv 1702.07476), Prop. 6.
"""

from __future__ import annotations

import math

from dpkit._validation import check_nonnegative, check_positive
from dpkit.errors import InvalidParameter

__all__ = ["laplace_rdp"]


def laplace_rdp(epsilon: float, order: float) -> float:
    """RDP epsilon of order ``order`` >= 1 of the ``epsilon``-DP Laplace mechanism.

    Parameters
    ----------
    epsilon:
        The pure-DP parameter ``sensitivity / scale`` of the Laplace mechanism, >= 0.
    order:
        The Renyi order, a finite float >= 1 (1 gives the KL divergence).

    Returns
    -------
    float
        ``eps_Lap(order)`` (Mironov 2017, Prop. 6), never above ``epsilon``, rounded up.

    Notes
    -----
    ``log1p`` keeps full relative precision for the small argument that appears as
    ``order -> 1``, and ``order - 1`` is computed exactly there, so no series is needed.
    The final ``eps + (negative term)`` can cancel when both are much larger than the
    result; its absolute error is a few ulps of ``eps``, which the conservative rounding
    (``8 * ulp(eps)``) covers.
    """
    owner = "laplace_rdp"
    epsilon = check_nonnegative(epsilon, "epsilon", owner)
    order = check_positive(order, "order", owner)
    if order < 1.0:
        raise InvalidParameter.for_parameter("order", owner, "a float in [1, inf)", order)
    if epsilon == 0.0:
        return 0.0
    if order == 1.0:
        value = epsilon + math.expm1(-epsilon)
    else:
        t = order - 1.0
        x = t * math.expm1(-(2.0 * order - 1.0) * epsilon) / (2.0 * order - 1.0)
        value = epsilon + math.log1p(x) / t
    return min(epsilon, max(0.0, value + 8.0 * math.ulp(epsilon)))
