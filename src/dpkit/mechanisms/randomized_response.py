"""Randomized response, binary and k-ary (Warner 1965; Kairouz, Oh & Viswanath 2016).

Each record's category is reported truthfully with probability
``e^epsilon / (e^epsilon + k - 1)`` and otherwise replaced by one of the other
``k - 1`` categories uniformly at random. Any two inputs produce any output with
probabilities in ratio at most ``e^epsilon``: the release is ``epsilon``-DP per record
(local DP; replace-one-record neighbours), and for a table of records, each person
being one record, ``epsilon``-DP under replacement.

Exactness: the flip is an exact Bernoulli(exp(-gamma)) with
``gamma = ln(1 + e^epsilon / (k - 1))`` rounded *down* to a float, so the flip
probability is never below the ideal one (a slightly more private mechanism, never a
less private one); the replacement category is an exact uniform integer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting._math.rounding import down
from dpkit.accounting.events import Event, RandomizedResponseEvent
from dpkit.accounting.guarantees import PureDP
from dpkit.errors import DataError, InvalidParameter
from dpkit.mechanisms._base import Mechanism, Release
from dpkit.noise import _exact
from dpkit.random import Random, RandomLike

__all__ = ["RandomizedResponse", "randomized_response"]


def uniform_integers(high: int, size: int, rng: Random) -> npt.NDArray[np.int64]:
    """``size`` exact uniform integers in ``[0, high)``: 64-bit words, rejecting the
    incomplete last block so every residue is equally likely."""
    limit = (2**64 // high) * high
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        words = rng.uint64(size - filled)
        if limit < 2**64:
            words = words[words < np.uint64(limit)]
        take = words.size
        out[filled : filled + take] = (words % np.uint64(high)).astype(np.int64)
        filled += take
    return out


class RandomizedResponse(Mechanism):
    """k-ary randomized response over a public list of categories.

    Parameters
    ----------
    epsilon:
        Privacy parameter, in (0, inf).
    categories:
        The public, complete list of possible values (default ``[False, True]``).

    Privacy
    -------
    ``epsilon``-DP per record (replace neighbours). Event:
    ``RandomizedResponseEvent(epsilon, categories=k)``.

    Accuracy
    --------
    :meth:`estimate_counts` inverts the response matrix: it is unbiased, with
    variance ``n q (1 - q) / (p - q)^2``-ish per category (``p`` the truth
    probability, ``q`` each lie's probability).

    Examples
    --------
    >>> import warnings, dpkit as dp
    >>> warnings.simplefilter("ignore", dp.InsecureRandomWarning)
    >>> rr = dp.RandomizedResponse(epsilon=1.0)
    >>> round(rr.truth_probability, 4)
    0.7311
    >>> rr.release([True, False, True], rng=5).value.dtype
    dtype('bool')
    """

    def __init__(self, *, epsilon: float, categories: Sequence[Any] | None = None) -> None:
        owner = "RandomizedResponse"
        self.epsilon = check.check_epsilon(epsilon, owner)
        values = [False, True] if categories is None else list(categories)
        if len(values) < 2 or len(set(values)) != len(values):
            raise InvalidParameter.for_parameter(
                "categories", owner, "a list of at least 2 distinct values", categories
            )
        self.categories = values
        k = len(values)
        # Flip probability (k-1)/(e^eps + k - 1) = exp(-gamma); gamma rounded down
        # (two floats below the computed value, which is within 1 ulp) flips more often.
        self._gamma = max(0.0, down(math.log1p(math.exp(self.epsilon) / (k - 1)), 2))

    @property
    def truth_probability(self) -> float:
        """Probability of reporting the true category, ``1 - exp(-gamma)``."""
        return -math.expm1(-self._gamma)

    @property
    def event(self) -> Event:
        return RandomizedResponseEvent(epsilon=self.epsilon, categories=len(self.categories))

    @property
    def guarantee(self) -> PureDP:
        return PureDP(self.epsilon)

    def _check_value(self, value: Any) -> npt.NDArray[np.int64]:
        array = np.asarray(value, dtype=object).reshape(-1)
        if array.size == 0:
            raise DataError("RandomizedResponse.release: 'value' is empty.")
        index = {category: i for i, category in enumerate(self.categories)}
        try:
            return np.fromiter((index[v] for v in array), dtype=np.int64, count=array.size)
        except (KeyError, TypeError) as err:
            raise DataError(
                "RandomizedResponse.release: 'value' holds entries outside the declared "
                f"categories ({len(self.categories)} categories)."
            ) from err

    def _sample(self, value: npt.NDArray[np.int64], rng: Random) -> Any:
        k = len(self.categories)
        flip = _exact.bernoulli_exp(np.full(value.size, self._gamma), rng)
        # A lie is uniform over the k - 1 other categories: shift by 1..k-1 modulo k.
        shift = uniform_integers(k - 1, value.size, rng) + 1
        reported = np.where(flip, (value + shift) % k, value)
        return np.asarray(self.categories, dtype=object)[reported].astype(
            np.asarray(self.categories).dtype
        )

    def estimate_counts(self, released: npt.ArrayLike) -> dict[Any, float]:
        """Unbiased estimates of the true count of each category from a release.

        With ``p`` the truth probability and ``q = (1 - p)/(k - 1)``:
        ``E[observed_j] = q n + (p - q) true_j``, so
        ``true_j = (observed_j - q n) / (p - q)``. Post-processing: no privacy cost.
        """
        observed = self._check_value(released)
        k, n = len(self.categories), observed.size
        p = self.truth_probability
        q = (1 - p) / (k - 1)
        counts = np.bincount(observed, minlength=k)
        return {c: float((counts[i] - q * n) / (p - q)) for i, c in enumerate(self.categories)}

    def _repr_fields(self) -> tuple[str, ...]:
        return ("epsilon", "categories")


def randomized_response(
    values: npt.ArrayLike,
    *,
    epsilon: float,
    categories: Sequence[Any] | None = None,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Release each value by randomized response (``epsilon``-DP per record)."""
    return RandomizedResponse(epsilon=epsilon, categories=categories).release(values, rng=rng)
