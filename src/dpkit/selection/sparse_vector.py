"""The sparse vector technique: AboveThreshold, offline and online.

AboveThreshold answers a stream of queries ``a_1, a_2, ...`` (each of sensitivity
``D``) with "below" until the first one whose noisy value reaches a noisy threshold,
answers "above" for it, and halts. Its cost is that of one query, however many
"below" answers come first: with threshold noise ``Lap(2D / epsilon)`` and query noise
``Lap(4D / epsilon)`` the whole run is ``epsilon``-DP (Dwork & Roth 2014, Alg. 1 and
Thm 3.23; Lyu, Su & Li 2017, Alg. 1 with ``eps1 = eps2 = eps / 2`` and cutoff 1).
When the queries are monotonic (between any two neighbours, all answers move in the
same direction, as counts do), query noise ``Lap(2D / epsilon)`` suffices (Lyu, Su &
Li 2017, Sec. 4, the monotonic case of their Theorem 2).

With ``max_positives = c`` the run goes on after an "above" answer and halts at the
``c``-th one (Dwork & Roth 2014, Alg. 2 "Sparse" answers the same question by ``c``
restarts, each with a fresh threshold, at ``c`` times the cost). dpkit runs the
variant proven by Lyu, Su & Li 2017 (Alg. 1, Thm 2): ``eps1 = eps2 = epsilon / 2``,
threshold noise ``Lap(D / eps1)`` drawn ONCE and never refreshed, query noise
``Lap(2 c D / eps2)`` (``Lap(c D / eps2)`` if monotonic); the whole run is
``epsilon``-DP. ``c = 1`` is AboveThreshold above, with the same draws and results.

Each comparison ``a_i + nu_i >= T + rho`` is decided on the real numbers (exact
Laplace noise from lazily refined uniforms, ``dpkit/selection/_above.py``), so no
floating-point rounding or grid tie enters the answers.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.events import Event, PureEvent, SparseVectorEvent
from dpkit.accounting.guarantees import PureDP
from dpkit.errors import BudgetExceeded, InvalidParameter
from dpkit.mechanisms._base import Mechanism, Release
from dpkit.random import Random, RandomLike, as_random
from dpkit.selection._above import NoisyThreshold
from dpkit.selection._base import check_monotonic

__all__ = ["SparseVector", "SparseVectorStream", "sparse_vector"]

#: Bound on ``|threshold|`` and on the noise scales; query answers are clipped to it.
#: Keeps every float in the comparisons far from overflow (see ``_above.py``).
LIMIT = 2.0**1000


class SparseVector(Mechanism):
    """AboveThreshold: the first query (or first ``c``) whose noisy answer reaches a threshold.

    Parameters
    ----------
    epsilon:
        Privacy parameter of the whole run, a float in (0, inf).
    threshold:
        The public threshold ``T`` (a finite float, ``|T| <= 2^1000``).
    sensitivity:
        The largest change of any one query answer between neighbouring datasets.
    monotonic:
        True when, between any two neighbouring datasets, either no answer decreases
        or no answer increases; halves the query noise.
    max_positives:
        ``c``, the number of "above" answers after which the run halts (an int >= 1;
        default 1, AboveThreshold). The query noise grows ``c``-fold.

    Exact distribution
    ------------------
    With ``rho ~ Lap(b1)`` drawn once and i.i.d. ``nu_i ~ Lap(b2)``, where ``b1`` =
    ``threshold_scale`` = ``2 sensitivity / epsilon`` and ``b2`` =
    ``query_scale`` = ``4 c sensitivity / epsilon`` (``2 c sensitivity / epsilon``
    if monotonic), both rounded up to floats, query ``i`` is "above" when
    ``a_i + nu_i >= T + rho`` -- compared exactly, on real numbers. With ``c = 1``
    :meth:`release` returns the smallest such ``i``, or ``None`` if there is none;
    with ``c > 1`` it returns the tuple of the first ``c`` such indices (fewer, maybe
    none, if the answers run out). Answers beyond ``+-2^1000`` are clipped first (a
    contraction, so their sensitivity does not grow).

    Privacy
    -------
    ``epsilon``-DP for the whole run, including every "below" answer (Dwork & Roth
    2014, Thm 3.23 for ``c = 1``; Lyu, Su & Li 2017, Alg. 1 and Thm 2 with ``eps1 =
    eps2 = epsilon / 2``, threshold scale ``D / eps1``, query scale ``2 c D / eps2``,
    or ``c D / eps2`` for monotonic queries; the rounded-up scales only add privacy).
    The bound is attained in the limit (``tests/selection/test_sparse_vector_positives.py``
    computes the exact output law). Queries may be chosen adaptively in the online
    form, :meth:`stream`. Event: ``SparseVectorEvent(epsilon)`` for ``c = 1``,
    ``PureEvent(epsilon)`` for ``c > 1``.

    Accuracy
    --------
    With probability at least ``confidence``, over a run of ``k`` queries every query
    answered "below" has ``a_i < T + alpha`` and every query answered "above" has
    ``a_i > T - alpha``, for ``alpha = b1 ln(2 / beta) + b2 ln(2 k / beta)`` and
    ``beta = 1 - confidence`` (:meth:`accuracy`; Dwork & Roth 2014, Thm 3.24, with the
    two noise scales kept apart; the same union bound holds for any ``c``).

    References
    ----------
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, Sec. 3.6.
    Lyu, Su & Li, "Understanding the sparse vector technique for differential
    privacy", PVLDB 10(6), 2017.

    Examples
    --------
    >>> from dpkit.testing import seeded  # a seeded generator, for a reproducible example
    >>> from dpkit.selection import SparseVector
    >>> mechanism = SparseVector(epsilon=1.0, threshold=100.0)
    >>> mechanism.threshold_scale, mechanism.query_scale
    (2.0, 4.0)
    >>> mechanism.release([3.0, 12.0, 250.0, 7.0], rng=seeded(0)).value
    2
    """

    def __init__(
        self,
        *,
        epsilon: float,
        threshold: float,
        sensitivity: float = 1.0,
        monotonic: bool = False,
        max_positives: int = 1,
    ) -> None:
        owner = "SparseVector"
        self.epsilon = check.check_epsilon(epsilon, owner)
        self.threshold = check.check_finite_float(threshold, "threshold", owner)
        if abs(self.threshold) > LIMIT:
            raise InvalidParameter.for_parameter(
                "threshold", owner, "a float with |threshold| <= 2^1000", threshold
            )
        self.sensitivity = check.check_positive(sensitivity, "sensitivity", owner)
        self.monotonic = check_monotonic(monotonic, owner)
        self.max_positives = check.check_count(max_positives, "max_positives", owner)
        # Scales rounded up: more noise never costs privacy (Lyu, Su & Li 2017, Thm 2
        # holds for any b1 >= D / eps1 and b2 >= 2 c D / eps2, or c D / eps2 if
        # monotonic; here eps1 = eps2 = epsilon / 2).
        ratio = Fraction(self.sensitivity) / Fraction(self.epsilon)
        self.threshold_scale = fraction_up(2 * ratio)
        self.query_scale = fraction_up((2 if self.monotonic else 4) * self.max_positives * ratio)
        if self.query_scale > LIMIT:
            raise InvalidParameter(
                f"{owner}: sensitivity={self.sensitivity!r} and epsilon={self.epsilon!r} give "
                "noise scales above 2^1000; the answers would be pure noise."
            )

    @property
    def event(self) -> Event:
        # SparseVectorEvent describes the cutoff-1 run; a run with c > 1 positives is
        # charged as what it is proven to be, an epsilon-DP black box.
        if self.max_positives == 1:
            return SparseVectorEvent(self.epsilon)
        return PureEvent(self.epsilon)

    @property
    def guarantee(self) -> PureDP:
        return PureDP(self.epsilon)

    def accuracy(self, n_queries: int, *, confidence: float = 0.95) -> float:
        """``alpha`` such that, with probability ``confidence``, no answer is off by ``alpha``.

        Over a run of ``n_queries`` queries: every "below" answer has ``a_i < T +
        alpha`` and the "above" answer has ``a_i > T - alpha``. Splits the failure
        probability ``beta`` evenly between the threshold noise (``P(|rho| >= alpha1)
        = e^{-alpha1 / b1}``) and a union bound over the query noises.
        """
        owner = "SparseVector.accuracy"
        k = check.check_count(n_queries, "n_queries", owner)
        confidence = check.check_probability(
            confidence, "confidence", owner, open_low=True, open_high=True
        )
        beta = 1.0 - confidence
        alpha = self.threshold_scale * math.log(2.0 / beta) + self.query_scale * (
            math.log(2.0 * k / beta)
        )
        return float(np.nextafter(alpha * (1.0 + 1e-12), np.inf))

    def stream(self, *, rng: RandomLike | None = None) -> SparseVectorStream:
        """Start an online run: answer queries one by one with :meth:`SparseVectorStream.query`."""
        return SparseVectorStream(self, as_random(rng))

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        answers = check.check_array(value, "answers", "SparseVector.release", ndim=1)
        clipped: npt.NDArray[np.float64] = np.clip(answers, -LIMIT, LIMIT)
        return clipped

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> int | tuple[int, ...] | None:
        state = NoisyThreshold(self.threshold, self.threshold_scale, self.query_scale, rng)
        if self.max_positives == 1:
            return state.first_above(value)
        return tuple(state.positives(value, self.max_positives))

    def _repr_fields(self) -> tuple[str, ...]:
        if self.max_positives == 1:
            return ("epsilon", "threshold", "sensitivity", "monotonic")
        return ("epsilon", "threshold", "sensitivity", "monotonic", "max_positives")


class SparseVectorStream:
    """An online AboveThreshold run, from :meth:`SparseVector.stream`.

    Call :meth:`query` with each answer, chosen adaptively if need be; it returns
    False ("below") or True ("above"), and the run halts after ``max_positives``
    "above" answers (the first, by default): a further query raises
    :class:`~dpkit.errors.BudgetExceeded` (start a new run, which costs another
    ``epsilon``). The whole run is ``epsilon``-DP: charge :attr:`event` once.
    """

    def __init__(self, mechanism: SparseVector, rng: Random) -> None:
        self._mechanism = mechanism
        self._state = NoisyThreshold(
            mechanism.threshold, mechanism.threshold_scale, mechanism.query_scale, rng
        )
        self._answered = 0
        self._indices: list[int] = []
        self.secure = rng.secure

    @property
    def event(self) -> Event:
        """The privacy event of the whole run."""
        return self._mechanism.event

    @property
    def guarantee(self) -> PureDP:
        """The guarantee of the whole run."""
        return self._mechanism.guarantee

    @property
    def halted(self) -> bool:
        """Whether ``max_positives`` queries were answered "above" (no more are allowed)."""
        return len(self._indices) >= self._mechanism.max_positives

    @property
    def answered(self) -> int:
        """How many queries this run has answered."""
        return self._answered

    @property
    def index(self) -> int | None:
        """Position (from 0) of the query whose "above" answer halted the run, or None."""
        return self._indices[-1] if self.halted else None

    @property
    def indices(self) -> tuple[int, ...]:
        """Positions (from 0) of the queries answered "above" so far."""
        return tuple(self._indices)

    def query(self, answer: float) -> bool:
        """Compare one query answer with the noisy threshold: True means "above".

        The run halts after its ``max_positives``-th "above" answer.
        """
        if self.halted:
            raise BudgetExceeded(
                f"This sparse-vector run has halted after its {self._mechanism.max_positives} "
                "'above' answer(s); its epsilon covers no more queries. Start a new run "
                "with SparseVector.stream().",
                requested=self.event,
            )
        value = check.check_array(answer, "answer", "SparseVectorStream.query", ndim=0)
        answers = np.clip(value.reshape(1), -LIMIT, LIMIT)
        above = self._state.first_above(answers) is not None
        if above:
            self._indices.append(self._answered)
        self._answered += 1
        return above

    def __repr__(self) -> str:
        return (
            f"SparseVectorStream({self._mechanism!r}, answered={self._answered}, "
            f"halted={self.halted})"
        )


def sparse_vector(
    answers: npt.ArrayLike,
    *,
    epsilon: float,
    threshold: float,
    sensitivity: float = 1.0,
    monotonic: bool = False,
    max_positives: int = 1,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Find the first query (or first ``max_positives``) above a threshold (sparse vector).

    Shorthand for ``SparseVector(...).release(answers, rng=rng)``.

    Parameters
    ----------
    answers:
        The queries' exact answers, in the order they are asked (1-D, finite).
    epsilon, threshold, sensitivity, monotonic, max_positives:
        As for :class:`SparseVector`.
    rng:
        Random source (see :func:`dpkit.random.as_random`); None for the secure default.

    Returns
    -------
    Release
        ``value`` is the index of the first query reported above the threshold, or
        None; with ``max_positives = c > 1``, the tuple of the first ``c`` such
        indices (maybe fewer). ``error`` is None.

    Privacy
    -------
    ``epsilon``-DP for the whole run (Dwork & Roth 2014, Thm 3.23; Lyu, Su & Li 2017,
    Alg. 1 and Thm 2). Event: ``SparseVectorEvent`` (``PureEvent`` if ``c > 1``).

    Accuracy
    --------
    See :meth:`SparseVector.accuracy` (Dwork & Roth 2014, Thm 3.24).
    """
    mechanism = SparseVector(
        epsilon=epsilon,
        threshold=threshold,
        sensitivity=sensitivity,
        monotonic=monotonic,
        max_positives=max_positives,
    )
    return mechanism.release(answers, rng=rng)
