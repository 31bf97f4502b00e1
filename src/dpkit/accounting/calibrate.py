"""Calibration: the mechanism parameter that meets a target (epsilon, delta), never more.

:func:`calibrate` is generic (any accountant, any one-parameter family of events), as
dp_accounting's ``calibrate_dp_mechanism``: bracketing and bisection on the parameter,
keeping at every step a point whose epsilon was *computed* to be within the target,
and returning that point. :func:`dpsgd_epsilon` and :func:`dpsgd_noise_multiplier`
are the two questions an ML engineer asks about DP-SGD (Abadi et al. 2016) with
Poisson-sampled batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from dpkit._validation import (
    check_count,
    check_delta,
    check_finite_float,
    check_nonnegative,
    check_positive,
    check_probability,
)
from dpkit.accounting.accountant import Accountant
from dpkit.accounting.events import Event, GaussianEvent, PoissonSampledEvent, RepeatedEvent
from dpkit.errors import InvalidParameter

if TYPE_CHECKING:
    from dpkit.accounting.pld_bounds import EpsilonInterval

__all__ = ["calibrate", "dpsgd_epsilon", "dpsgd_epsilon_bounds", "dpsgd_noise_multiplier"]

_ACCOUNTANTS = ("rdp", "pld")


def calibrate(
    make_accountant: Callable[[], Accountant],
    make_event: Callable[[float], Event],
    *,
    target_epsilon: float,
    target_delta: float,
    bracket: tuple[float, float] = (1e-3, 1e3),
    decreasing: bool = True,
    tolerance: float = 1e-6,
) -> float:
    """The parameter in ``bracket`` at which epsilon meets ``target_epsilon``, on the safe side.

    Let ``eps(p)`` be ``make_accountant().compose(make_event(p)).get_epsilon(target_delta)``.
    With ``decreasing=True`` (the parameter is a noise level, so ``eps`` falls as it grows)
    this returns a ``p`` with ``eps(p) <= target_epsilon`` that is within a relative
    ``tolerance`` of the smallest such ``p`` in the bracket; with ``decreasing=False``
    (a sampling rate, a number of steps) a ``p`` near the largest such one.

    Privacy guarantee: the mechanism ``make_event(p)`` at the returned ``p`` is
    (``target_epsilon``, ``target_delta``)-DP according to the accountant, because the
    returned point is always one where the accountant's epsilon was computed and found
    within the target (re-checked on a fresh accountant before returning); the search
    never overshoots, whatever the rounding or a small non-monotonicity of ``eps``.

    Parameters
    ----------
    make_accountant:
        Builds a fresh, empty accountant.
    make_event:
        The event of the mechanism run with parameter ``p`` (composed as needed, e.g. a
        ``RepeatedEvent`` for many steps).
    target_epsilon:
        >= 0; 0 only with ``target_delta > 0`` (then the target is a total variation
        distance: ``delta`` at ``epsilon = 0`` is ``TV(M(x), M(x'))``).
    target_delta:
        In [0, 1).
    bracket:
        ``(low, high)`` with ``low < high``, finite; the search stays inside. Geometric
        bisection when ``low > 0``, arithmetic otherwise.
    decreasing:
        Whether ``eps(p)`` is non-increasing in ``p``.
    tolerance:
        Relative width of the final interval, in (0, 1).

    Returns
    -------
    float
        The calibrated parameter. If every point of the bracket meets the target, a
        value within ``tolerance`` of its least private end (``low`` when decreasing,
        ``high`` otherwise).

    Raises
    ------
    InvalidParameter
        If even the safe end of the bracket (``high`` when decreasing) misses the target.

    Examples
    --------
    The Gaussian noise multiplier for (1, 1e-5)-DP under RDP accounting:

    >>> from dpkit.accounting import GaussianEvent
    >>> from dpkit.accounting.rdp import RDPAccountant
    >>> sigma = calibrate(RDPAccountant, GaussianEvent, target_epsilon=1.0, target_delta=1e-5)
    >>> round(sigma, 3)
    4.045
    >>> RDPAccountant().compose(GaussianEvent(sigma)).get_epsilon(1e-5) <= 1.0
    True
    """
    owner = "calibrate"
    target = check_nonnegative(target_epsilon, "target_epsilon", owner)
    delta = check_delta(target_delta, owner, name="target_delta")
    if target == 0.0 and delta == 0.0:
        raise InvalidParameter(
            f"{owner}: target_epsilon = 0 with target_delta = 0 asks for a mechanism whose "
            "output does not depend on its input; give a positive epsilon or delta."
        )
    low, high = _check_bracket(bracket, owner)
    tolerance = check_positive(tolerance, "tolerance", owner)
    if tolerance >= 1.0:
        raise InvalidParameter.for_parameter("tolerance", owner, "a float in (0, 1)", tolerance)

    def meets(p: float) -> tuple[bool, float]:
        epsilon = make_accountant().compose(make_event(p)).get_epsilon(delta)
        return epsilon <= target, epsilon

    safe, unsafe = (high, low) if decreasing else (low, high)
    # Bisect first and evaluate the ends of the bracket only if the search reaches them:
    # they are often extremes (almost no noise, huge noise) that accountants handle
    # slowly or not at all. Until the safe end is checked, it is only assumed safe.
    geometric = low > 0.0
    for _ in range(400):
        if abs(safe - unsafe) <= tolerance * max(abs(safe), abs(unsafe)):
            break
        mid = math.sqrt(safe * unsafe) if geometric else 0.5 * (safe + unsafe)
        if mid in (safe, unsafe):  # adjacent floats
            break
        if meets(mid)[0]:
            safe = mid
        else:
            unsafe = mid
    # Final check on a fresh accountant, at the value returned: this is what makes the
    # answer safe (at the safe end it is the reachability check). If an accountant is
    # not deterministic and the check fails, move towards the safe end.
    end = high if decreasing else low
    for _ in range(64):
        ok, epsilon = meets(safe)
        if ok:
            return safe
        if safe == end:
            break
        safe = 0.5 * (safe + end) if abs(end - safe) > tolerance * abs(end) else end
    side = "upper" if decreasing else "lower"
    raise InvalidParameter(
        f"{owner}: target_epsilon={target!r} at target_delta={delta!r} is unreachable in "
        f"the bracket {bracket!r}: even at the {side} end, parameter {end!r}, the "
        f"accountant gives epsilon = {epsilon:.6g}. Widen the bracket (for a noise "
        "level, raise its upper end), or relax the target."
    )


def _check_bracket(bracket: object, owner: str) -> tuple[float, float]:
    expected = "a pair (low, high) of finite floats with low < high"
    if not isinstance(bracket, tuple | list) or len(bracket) != 2:
        raise InvalidParameter.for_parameter("bracket", owner, expected, bracket)
    low = check_finite_float(bracket[0], "bracket", owner)
    high = check_finite_float(bracket[1], "bracket", owner)
    if not low < high:
        raise InvalidParameter.for_parameter("bracket", owner, expected, bracket)
    return low, high


def _make_accountant(name: object, owner: str) -> Callable[[], Accountant]:
    if name == "rdp":
        from dpkit.accounting.rdp import RDPAccountant

        return RDPAccountant
    if name == "pld":
        # Imported here so that this module works (with "rdp") without the PLD module.
        from dpkit.accounting.pld import PLDAccountant

        return PLDAccountant
    raise InvalidParameter.for_parameter("accountant", owner, f"one of {_ACCOUNTANTS}", name)


def dpsgd_epsilon(
    *,
    sampling_probability: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    accountant: str = "rdp",
    sampler: str = "poisson",
) -> float:
    """Epsilon of DP-SGD at ``delta``: ``steps`` Poisson-subsampled Gaussian steps.

    Each step clips per-example gradients to L2 norm C, sums the gradients of a Poisson
    batch (each example kept with probability ``sampling_probability``) and adds
    ``N(0, (noise_multiplier C)^2)`` noise (Abadi et al. 2016). Neighbouring relation:
    add/remove one example. The bound is that of the chosen accountant: ``"rdp"``
    (Mironov, Talwar & Zhang 2019 with the conversion of Canonne, Kamath & Steinke 2020)
    or ``"pld"`` (privacy loss distributions, usually tighter).

    Parameters
    ----------
    sampling_probability:
        In (0, 1].
    noise_multiplier:
        > 0, noise standard deviation over the clipping norm.
    steps:
        Number of steps, an int >= 1.
    delta:
        In (0, 1).
    accountant:
        ``"rdp"`` or ``"pld"``.
    sampler:
        How batches are formed. ``"poisson"`` (default): each example independently
        with probability ``sampling_probability``. ``"allocation"`` ("balls and bins",
        random allocation): each epoch of ``t = 1 / sampling_probability`` steps (an
        integer) puts every example in exactly one uniformly random batch, independently
        of the others; ``steps`` covers ``ceil(steps / t)`` epochs (a partial last epoch
        is counted as a whole one, which is safe). Analysed by the PLD of
        :class:`~dpkit.accounting.RandomAllocationGaussianEvent` (Feldman &
        Shenfeld 2025, 2026); needs ``accountant="pld"``.

    Examples
    --------
    >>> round(dpsgd_epsilon(sampling_probability=0.01, noise_multiplier=1.0, steps=1000,
    ...                     delta=1e-5), 3)
    2.101
    >>> allocation = dpsgd_epsilon(sampling_probability=0.01, noise_multiplier=1.0,
    ...                            steps=1000, delta=1e-5, accountant="pld",
    ...                            sampler="allocation")
    >>> allocation <= dpsgd_epsilon(sampling_probability=0.01, noise_multiplier=1.0,
    ...                             steps=1000, delta=1e-5, accountant="pld")
    True
    """
    owner = "dpsgd_epsilon"
    event = _dpsgd_step(sampling_probability, noise_multiplier, owner)
    count = check_count(steps, "steps", owner)
    delta = check_delta(delta, owner, allow_zero=False)
    make = _make_accountant(accountant, owner)
    if sampler == "allocation":
        epoch, epochs = _allocation_epochs(event, count, accountant, owner)
        return make().compose(epoch, count=epochs).get_epsilon(delta)
    if sampler != "poisson":
        raise InvalidParameter.for_parameter("sampler", owner, "'poisson' or 'allocation'", sampler)
    return make().compose(event, count=count).get_epsilon(delta)


def _allocation_epochs(
    step: Event, steps: int, accountant: object, owner: str
) -> tuple[Event, int]:
    """One balls-and-bins epoch of ``1/q`` steps, and how many epochs cover ``steps``."""
    from dpkit.accounting.events import RandomAllocationGaussianEvent

    assert isinstance(step, PoissonSampledEvent)  # built by _dpsgd_step
    q = step.sampling_probability
    per_epoch = round(1.0 / q)
    if abs(per_epoch * q - 1.0) > 1e-9:
        raise InvalidParameter.for_parameter(
            "sampling_probability",
            owner,
            "1/t for an integer number t of batches per epoch (sampler='allocation')",
            q,
        )
    if accountant != "pld":
        raise InvalidParameter.for_parameter(
            "accountant",
            owner,
            "'pld' (with sampler='allocation'; RDP only bounds an epoch by one Gaussian step)",
            accountant,
        )
    assert isinstance(step.event, GaussianEvent)
    epoch = RandomAllocationGaussianEvent(step.event.noise_multiplier, per_epoch)
    return epoch, -(-steps // per_epoch)


def dpsgd_epsilon_bounds(
    *,
    sampling_probability: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
) -> EpsilonInterval:
    """Certified ``[lower, upper]`` around the best epsilon of DP-SGD at ``delta``.

    The same mechanism as :func:`dpsgd_epsilon` (add/remove neighbours). ``upper`` is
    the PLD accountant's epsilon (``dpsgd_epsilon(..., accountant="pld")``), a
    guarantee; ``lower`` is a certified lower bound on the epsilon *any* accountant
    can prove for this configuration (``dpkit.accounting.pld_bounds``), as
    prv_accountant's ``eps_lower``.

    Examples
    --------
    >>> bounds = dpsgd_epsilon_bounds(sampling_probability=0.01, noise_multiplier=1.0,
    ...                               steps=1000, delta=1e-5)
    >>> print(bounds)
    eps in [1.82..., 1.82824] at delta=1e-05
    >>> bounds.lower > 0.99 * bounds.upper
    True
    """
    from dpkit.accounting.pld_bounds import epsilon_interval  # the PLD module is optional

    owner = "dpsgd_epsilon_bounds"
    event = _dpsgd_step(sampling_probability, noise_multiplier, owner)
    count = check_count(steps, "steps", owner)
    delta = check_delta(delta, owner, allow_zero=False)
    return epsilon_interval(event if count == 1 else RepeatedEvent(event, count), delta)


def dpsgd_noise_multiplier(
    *,
    sampling_probability: float,
    steps: int,
    target_epsilon: float,
    delta: float,
    accountant: str = "rdp",
) -> float:
    """The smallest noise multiplier (to a relative 1e-6) for which DP-SGD meets a target.

    Calibrates :func:`dpsgd_epsilon` with :func:`calibrate` over noise multipliers in
    ``[1e-3, 1e3]``. Privacy guarantee: DP-SGD with the returned multiplier,
    ``sampling_probability`` and ``steps`` is (``target_epsilon``, ``delta``)-DP by the
    chosen accountant (the returned value never overshoots the target). Raises
    :class:`~dpkit.errors.InvalidParameter` if even a multiplier of 1000 does not suffice.

    Examples
    --------
    >>> sigma = dpsgd_noise_multiplier(sampling_probability=0.01, steps=1000,
    ...                                target_epsilon=2.0, delta=1e-5)
    >>> round(sigma, 3)
    1.022
    """
    owner = "dpsgd_noise_multiplier"
    rate = check_probability(sampling_probability, "sampling_probability", owner, open_low=True)
    count = check_count(steps, "steps", owner)
    target = check_positive(target_epsilon, "target_epsilon", owner)
    delta = check_delta(delta, owner, allow_zero=False)
    make = _make_accountant(accountant, owner)

    def make_event(sigma: float) -> Event:
        step = PoissonSampledEvent(GaussianEvent(sigma), rate)
        return step if count == 1 else RepeatedEvent(step, count)

    if accountant != "pld":
        return calibrate(make, make_event, target_epsilon=target, target_delta=delta)
    # The PLD answer lies below the (looser, fast) RDP one; searching near it keeps the
    # PLD away from tiny multipliers, whose loss range needs huge grids. The result is
    # safe whatever the bracket: calibrate only returns a checked point.
    rdp_sigma = dpsgd_noise_multiplier(
        sampling_probability=rate, steps=count, target_epsilon=target, delta=delta
    )
    try:
        return calibrate(
            make,
            make_event,
            target_epsilon=target,
            target_delta=delta,
            bracket=(rdp_sigma / 4, rdp_sigma * 1.01),
        )
    except InvalidParameter:
        return rdp_sigma  # already checked under RDP: a valid, slightly larger answer


def _dpsgd_step(sampling_probability: float, noise_multiplier: float, owner: str) -> Event:
    rate = check_probability(sampling_probability, "sampling_probability", owner, open_low=True)
    sigma = check_positive(noise_multiplier, "noise_multiplier", owner)
    return PoissonSampledEvent(GaussianEvent(sigma), rate)
