"""What each never-fail construction costs: the guarantees, as pure functions of public values.

Notation (``shared/papers/never-fail.md``): the base mechanism ``M`` is
``(epsilon, delta)``-DP and fails -- its loss ``l(M(x), x)`` exceeds the target
``alpha`` -- with probability at most ``beta`` on every input ``x``.

* :func:`absorb_failure` -- return ``M(x)`` if its loss is at most ``alpha``, else a
  non-private fallback: ``(epsilon, delta + (1 + e^epsilon) beta)``-DP (digest §2; the
  post's ``delta + beta`` is wrong, see :mod:`dpkit.reliability.absorb`).
* :func:`repeat_until_success` -- repeat ``M`` with a truncated-Laplace estimate of its
  loss until the estimate is low (Steinke 2025, Theorems 1 and 2): with ``M-bar = (M,
  loss estimate)`` ``(eps_bar, delta_bar)``-DP,
  ``(2 eps_bar - ln(1 - delta_bar/(1 - beta)), delta_bar/(1 - beta))``-DP.
* :func:`truncation` -- the loss estimate's margin ``tau`` (exact truncated-Laplace
  support, never the post's shorthand).

Every number is rounded in the conservative direction (larger epsilon, delta and
margins), as ``dpkit.accounting._math.rounding`` does it.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpkit import _validation as check
from dpkit.accounting._math.rounding import fraction_up, mul_up, sum_up, up
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.errors import InvalidParameter

__all__ = [
    "absorb_failure",
    "base_parameters",
    "cap_term",
    "repeat_until_success",
    "truncation",
]

BaseGuarantee = PureDP | ApproxDP


def base_parameters(guarantee: object, name: str, owner: str) -> tuple[float, float]:
    """``(epsilon, delta)`` of a ``PureDP`` or ``ApproxDP`` guarantee (else InvalidParameter)."""
    if isinstance(guarantee, PureDP):
        return guarantee.epsilon, 0.0
    if isinstance(guarantee, ApproxDP):
        return guarantee.epsilon, guarantee.delta
    raise InvalidParameter.for_parameter(
        name,
        owner,
        "a dp.PureDP or dp.ApproxDP guarantee (convert zCDP/RDP with .to_approx(delta) first)",
        guarantee,
    )


def _exp_up(epsilon: float, owner: str) -> Fraction:
    """``e^epsilon`` as a Fraction, rounded up (math.exp is within 1 ulp; step 2 more)."""
    if epsilon == 0.0:
        return Fraction(1)
    try:
        return Fraction(up(math.exp(epsilon), 2))
    except OverflowError:
        raise InvalidParameter.for_parameter(
            "epsilon", owner, "small enough for e^epsilon to be finite (< 709)", epsilon
        ) from None


def _check_beta(value: object, owner: str) -> float:
    return check.check_probability(value, "failure_probability", owner, open_high=True)


def absorb_failure(base_guarantee: BaseGuarantee, *, failure_probability: float) -> ApproxDP:
    """The guarantee of "return ``M(x)`` if it succeeded, else a non-private fallback".

    Parameters
    ----------
    base_guarantee:
        ``PureDP(epsilon)`` or ``ApproxDP(epsilon, delta)`` of the base mechanism ``M``.
    failure_probability:
        ``beta`` in [0, 1): a proven bound on ``P[l(M(x), x) > alpha]`` for *every* input.

    Returns
    -------
    ApproxDP
        ``(epsilon, delta + (1 + e^epsilon) beta)``, delta rounded up.

    Raises
    ------
    InvalidParameter
        When that delta is 1 or more (the construction then guarantees nothing).

    Notes
    -----
    Derived in ``shared/papers/never-fail.md`` §2: with ``S* = {y in S : l(y, x) <= alpha}``,
    ``P[M~(x) in S] <= P[M(x) in S*] + beta <= e^eps P[M(x') in S*] + delta + beta`` and
    ``P[M(x') in S*] <= P[M~(x') in S] + beta`` (the fallback test at ``x'`` uses
    ``l(y, x')``, not ``l(y, x)``). The post's ``(epsilon, delta + beta)`` skips the second
    ``beta``; a two-point example needs exactly ``delta + (1 + e^0) beta``.

    Examples
    --------
    >>> import dpkit as dp
    >>> g = dp.reliability.absorb_failure(dp.PureDP(1.0), failure_probability=1e-9)
    >>> g.epsilon, round(g.delta, 18)  # (1 + e) beta, not the post's beta
    (1.0, 3.718281828e-09)
    """
    owner = "absorb_failure"
    epsilon, delta = base_parameters(base_guarantee, "base_guarantee", owner)
    beta = _check_beta(failure_probability, owner)
    total = fraction_up(Fraction(delta) + (1 + _exp_up(epsilon, owner)) * Fraction(beta))
    if total >= 1.0:
        raise InvalidParameter(
            f"{owner}: delta + (1 + e^epsilon) beta = {total!r} >= 1 guarantees nothing "
            f"(epsilon={epsilon!r}, delta={delta!r}, failure_probability={beta!r}); this "
            "construction needs beta well below the delta you can accept."
        )
    return ApproxDP(epsilon, total)


def truncation(*, epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The margin ``tau`` of the loss estimate: ``|Z - l(y, x)| <= tau`` with probability 1.

    ``Z`` is the exact loss plus ``(epsilon, delta)``-DP truncated Laplace noise of
    sensitivity ``sensitivity`` (:class:`dpkit.mechanisms.TruncatedLaplace`, support
    ``A = (s/epsilon) ln(1 + (e^epsilon - 1)/(2 delta))``, digest §3.1), released on a
    grid of step ``g``; ``tau = A + g`` rounded up covers the rounding to the grid
    (at most ``g/2``) and the final float rounding.

    Examples
    --------
    >>> import dpkit as dp
    >>> round(dp.reliability.truncation(epsilon=1.0, delta=1e-6), 4)
    13.6637
    """
    from dpkit.mechanisms.truncated_laplace import TruncatedLaplace

    noise = TruncatedLaplace.calibrate(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    return up(noise.bound + noise.granularity, 2)


def cap_term(epsilon: float, failure_probability: float, max_attempts: int) -> float:
    """``(1 + e^epsilon) beta^T`` rounded up: the delta a cap of ``T`` attempts adds.

    The capped run differs from the uncapped one only when ``T`` attempts in a row are
    rejected (probability at most ``beta^T`` on every input), whatever it does then, so
    the same argument as :func:`absorb_failure` adds ``(1 + e^eps) beta^T`` to delta.
    """
    if failure_probability == 0.0:
        return 0.0
    # T ln(beta) < 0, each float step within an ulp: stepped up, the power only grows.
    log_power = up(max_attempts * math.log(failure_probability), 4)
    # Below e^-700 (~1e-304) the term is negligible against any delta; e^-700 is then
    # used as the (larger) bound, which keeps the float arithmetic out of subnormals.
    power = up(math.exp(max(log_power, -700.0)), 2)
    return fraction_up((1 + _exp_up(epsilon, "cap_term")) * Fraction(power))


def repeat_until_success(
    base_guarantee: BaseGuarantee,
    *,
    failure_probability: float,
    loss_guarantee: BaseGuarantee | None = None,
    max_attempts: int | None = None,
) -> ApproxDP:
    """The guarantee of repeat-until-success with a truncated-Laplace loss estimate.

    Parameters
    ----------
    base_guarantee:
        ``(epsilon, delta)`` of the base mechanism ``M`` (``PureDP`` or ``ApproxDP``).
    failure_probability:
        ``beta``: a proven bound on ``P[l(M(x), x) > alpha]`` for every input.
    loss_guarantee:
        ``ApproxDP(epsilon_z, delta_z)`` of the truncated-Laplace loss estimate
        (``delta_z > 0``). Default: the base guarantee itself (Theorem 2's equal split;
        then the base must have ``delta > 0``).
    max_attempts:
        Optional cap ``T`` on the number of attempts (see Notes).

    Returns
    -------
    ApproxDP
        ``(2 eps_bar - ln(1 - delta_bar/(1 - beta)), delta_bar/(1 - beta))`` with
        ``eps_bar = epsilon + epsilon_z`` and ``delta_bar = delta + delta_z`` (Steinke 2025,
        Theorem 1; with the equal split this is Theorem 2's
        ``(4 eps - ln(1 - 2 delta/(1 - beta)), 2 delta/(1 - beta))``); with a cap, delta
        plus ``(1 + e^eps~) beta^T`` (``cap_term``). Rounded up.

    Raises
    ------
    InvalidParameter
        For ``beta >= 1 - delta_bar`` (Theorem 2's condition ``beta < 1 - 2 delta``), a
        loss estimate with ``delta_z = 0`` (truncated Laplace needs ``delta > 0``; see
        :class:`dpkit.reliability.ReducedFailure` for pure DP), or a final delta >= 1.

    Notes
    -----
    Theorem 1 needs ``P[Z <= alpha + tau] >= 1 - beta`` on every input, which holds
    when ``beta`` is a valid failure bound for ``alpha`` (``|Z - l| <= tau``). A cap of
    ``T`` attempts changes the algorithm only when ``T`` estimates in a row are high
    (probability ``<= beta^T``), hence the extra ``(1 + e^eps~) beta^T``. Whatever
    ``alpha``, a capped run is also post-processing of ``T`` runs of ``M-bar``, so
    ``(T eps_bar, T delta_bar)``-DP by basic composition -- the guarantee that survives a
    wrong ``alpha``.

    Examples
    --------
    >>> import dpkit as dp
    >>> g = dp.reliability.repeat_until_success(dp.ApproxDP(0.5, 1e-7), failure_probability=0.1)
    >>> round(g.epsilon, 9), round(g.delta, 15)
    (2.000000222, 2.22222222e-07)
    """
    owner = "repeat_until_success"
    epsilon, delta = base_parameters(base_guarantee, "base_guarantee", owner)
    beta = _check_beta(failure_probability, owner)
    if loss_guarantee is None:
        epsilon_z, delta_z = epsilon, delta
    else:
        epsilon_z, delta_z = base_parameters(loss_guarantee, "loss_guarantee", owner)
    if delta_z == 0.0:
        raise InvalidParameter(
            f"{owner}: the truncated-Laplace loss estimate needs delta > 0 "
            f"(got {'loss_guarantee' if loss_guarantee is not None else 'base_guarantee'} "
            "with delta = 0). Pass loss_guarantee=dp.ApproxDP(epsilon_z, delta_z) with "
            "delta_z > 0, or use dp.reliability.ReducedFailure for a pure-DP result."
        )
    if epsilon_z == 0.0:
        raise InvalidParameter.for_parameter(
            "loss_guarantee", owner, "an epsilon > 0 for the loss estimate", loss_guarantee
        )
    cap = None if max_attempts is None else check.check_count(max_attempts, "max_attempts", owner)
    return _theorem_1(sum_up((epsilon, epsilon_z)), sum_up((delta, delta_z)), beta, cap, owner)


def _theorem_1(
    epsilon_bar: float, delta_bar: float, beta: float, cap: int | None, owner: str
) -> ApproxDP:
    """Steinke 2025, Theorem 1 (rounded up), plus the cap's term."""
    if not beta < 1.0 - delta_bar:
        raise InvalidParameter(
            f"{owner}: Theorem 1 needs failure_probability < 1 - delta_bar = "
            f"{1.0 - delta_bar!r} (delta_bar = {delta_bar!r}, the delta of the mechanism with "
            f"its loss estimate); got {beta!r}."
        )
    delta_tilde = fraction_up(Fraction(delta_bar) / (1 - Fraction(beta)))
    # -ln(1 - d) grows with d, so the rounded-up d gives an upper bound; log1p is within
    # an ulp, stepped up 2 more.
    penalty = up(-math.log1p(-delta_tilde), 2) if delta_tilde > 0 else 0.0
    epsilon_tilde = sum_up((mul_up(2, epsilon_bar), penalty))
    if cap is not None:
        delta_tilde = sum_up((delta_tilde, cap_term(epsilon_tilde, beta, cap)))
    if delta_tilde >= 1.0:
        raise InvalidParameter(
            f"{owner}: the resulting delta {delta_tilde!r} >= 1 guarantees nothing; "
            "raise max_attempts or lower failure_probability."
        )
    return ApproxDP(epsilon_tilde, delta_tilde)
