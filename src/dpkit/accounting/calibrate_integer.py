"""Calibration of an integer-valued parameter (a number of steps, an integer scale).

dp_accounting's ``calibrate_dp_mechanism(..., discrete=True)`` searches integer
parameters; :func:`calibrate_integer` is dpkit's counterpart. It also accepts a target
epsilon of 0 (where ``delta`` is then a bound on the total variation distance of the
neighbouring output laws, which every accountant's ``get_delta(0)`` states).
"""

from __future__ import annotations

from collections.abc import Callable

from dpkit._validation import check_delta, check_nonnegative
from dpkit.accounting.accountant import Accountant
from dpkit.accounting.events import Event
from dpkit.errors import InvalidParameter

__all__ = ["calibrate_integer"]


def _check_bracket(bracket: object, owner: str) -> tuple[int, int]:
    expected = "a pair of ints (low, high) with low <= high"
    if not isinstance(bracket, tuple) or len(bracket) != 2:
        raise InvalidParameter.for_parameter("bracket", owner, expected, bracket)
    low, high = bracket
    for end in (low, high):
        if isinstance(end, bool) or not isinstance(end, int):
            raise InvalidParameter.for_parameter("bracket", owner, expected, bracket)
    if low > high:
        raise InvalidParameter.for_parameter("bracket", owner, expected, bracket)
    return low, high


def calibrate_integer(
    make_accountant: Callable[[], Accountant],
    make_event: Callable[[int], Event],
    *,
    target_epsilon: float,
    target_delta: float,
    bracket: tuple[int, int],
    decreasing: bool = True,
) -> int:
    """The best integer parameter in ``bracket`` whose mechanism meets the target.

    Let ``delta(n) = make_accountant().compose(make_event(n)).get_delta(target_epsilon)``.
    With ``decreasing=True`` (a noise level: privacy improves as ``n`` grows) this returns
    the smallest ``n`` in ``bracket`` with ``delta(n) <= target_delta``; with
    ``decreasing=False`` (a number of steps, a group size) the largest such ``n``. The
    search is a bisection over the integers that assumes ``delta(n)`` monotone, and the
    returned ``n`` is always one at which the accountant's delta was computed on a fresh
    accountant and found within the target.

    Privacy guarantee: ``make_event(n)`` at the returned ``n`` is
    (``target_epsilon``, ``target_delta``)-DP according to the accountant.
    ``target_epsilon = 0`` is allowed: (0, delta)-DP says the total variation distance
    between the output laws on neighbouring inputs is at most delta.

    Parameters
    ----------
    make_accountant:
        Builds a fresh, empty accountant.
    make_event:
        The event of the mechanism run with integer parameter ``n``.
    target_epsilon:
        A finite float >= 0.
    target_delta:
        In [0, 1).
    bracket:
        ``(low, high)``, ints, ``low <= high``; the search stays inside.
    decreasing:
        Whether ``delta(n)`` is non-increasing in ``n``.

    Raises
    ------
    InvalidParameter
        If no point of the bracket meets the target (the safe end is checked).

    Examples
    --------
    The largest number of Gaussian steps (noise multiplier 10) within (1, 1e-5)-DP:

    >>> from dpkit.accounting import GaussianEvent, RepeatedEvent
    >>> from dpkit.accounting.pld import PLDAccountant
    >>> calibrate_integer(
    ...     PLDAccountant, lambda n: RepeatedEvent(GaussianEvent(10.0), n),
    ...     target_epsilon=1.0, target_delta=1e-5, bracket=(1, 1000), decreasing=False)
    7
    """
    owner = "calibrate_integer"
    if not callable(make_accountant):
        raise InvalidParameter.for_parameter(
            "make_accountant", owner, "a callable returning an Accountant", make_accountant
        )
    if not callable(make_event):
        raise InvalidParameter.for_parameter(
            "make_event", owner, "a callable int -> Event", make_event
        )
    epsilon = check_nonnegative(target_epsilon, "target_epsilon", owner)
    delta = check_delta(target_delta, owner, name="target_delta")
    low, high = _check_bracket(bracket, owner)

    def meets(n: int) -> tuple[bool, float]:
        value = make_accountant().compose(make_event(n)).get_delta(epsilon)
        return value <= delta, value

    safe, unsafe = (high, low) if decreasing else (low, high)
    ok, value = meets(safe)
    if not ok:
        side = "upper" if decreasing else "lower"
        raise InvalidParameter(
            f"{owner}: target_epsilon={epsilon!r} at target_delta={delta!r} is unreachable "
            f"in the bracket {bracket!r}: even at its {side} end, {safe}, the accountant "
            f"gives delta = {value:.6g}. Widen the bracket or relax the target."
        )
    if meets(unsafe)[0]:
        return unsafe
    # Invariant: safe meets the target, unsafe does not.
    while abs(safe - unsafe) > 1:
        mid = (safe + unsafe) // 2
        if meets(mid)[0]:
            safe = mid
        else:
            unsafe = mid
    return safe
