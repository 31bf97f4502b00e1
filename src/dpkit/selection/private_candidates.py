"""Private selection from private candidates (Liu & Talwar 2019, Algorithms 1 and 2).

A *candidate* is a randomized algorithm ``Q`` that, run on the data, returns an output
and a real score -- say, a model trained with DP-SGD and its noisy validation accuracy.
If ``Q`` is epsilon-DP, running it many times and keeping the best costs far less than
composition:

* :func:`random_stopping` (LT19 Alg. 2): draw, then stop with probability ``gamma``;
  release the best draw seen. ``3 epsilon``-DP whatever the number of draws (LT19
  Thm 3.2; Papernot & Steinke 2022, Cor. 3 with eta = 1). Event:
  ``RepeatAndSelectEvent(event, mean=1/gamma, shape=1.0)``. Other laws of the number
  of draws K (``repetitions=``, PS22): the truncated negative binomial with shape
  ``eta`` (``(2 + eta) epsilon``-DP), the logarithmic law (``eta = 0``, ``2 epsilon``)
  and Poisson (RDP only), each given by its mean ``E[K]``.
* :func:`thresholding` (LT19 Alg. 1): draw until a score reaches a known target
  ``tau`` (release that draw) or a ``gamma``-coin stops the run (release None).
  ``2 epsilon``-DP (LT19 Thm 3.1).

Only the selected draw is released: the number of draws, the other draws and their
scores stay private. Candidates are :class:`Candidate` objects -- a dpkit mechanism
with its input (:meth:`Candidate.from_mechanism`), or any callable declared with its own
event -- or bare callables with ``event=`` passed to the selection.

Failures. A candidate that raises, or returns a score that is not a finite real
number, stops the selection with :class:`~dpkit.errors.CandidateFailed`. That
exception *is* the selection's output (it is what a run that treats a failing draw as
the best possible score would release), so it carries the event and guarantee of the
whole selection, to be charged like a release; the number of draws is not reported.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, NamedTuple, TypeVar, overload

from dpkit import _validation as check
from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.events import (
    ApproxEvent,
    Event,
    PureEvent,
    RepeatAndSelectEvent,
    RepeatedEvent,
    ZCDPEvent,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.accounting.guarantees import RDP, ZCDP, ApproxDP, PureDP
from dpkit.errors import CandidateFailed, InvalidParameter, UnsupportedEvent
from dpkit.mechanisms._base import (
    FailureBound,
    Guarantee,
    Mechanism,
    Release,
    success_probability_needed,
)
from dpkit.noise.rational import bernoulli
from dpkit.random import Random, RandomLike, as_random
from dpkit.selection._repetitions import LAWS, MIN_SHAPE, Repetitions

__all__ = [
    "Candidate",
    "Selected",
    "SelectionRelease",
    "Statement",
    "random_stopping",
    "random_stopping_event",
    "thresholding",
    "thresholding_event",
]


class Selected(NamedTuple):
    """The released draw of a selection: its ``score`` and its ``output``."""

    score: float
    output: Any


class Statement(NamedTuple):
    """A valid privacy statement about a release: an ``event`` and its ``guarantee``."""

    event: Event
    guarantee: Guarantee


ValueT = TypeVar("ValueT")


@dataclass(frozen=True, slots=True)
class SelectionRelease(Release[ValueT]):
    """A :class:`~dpkit.mechanisms.Release` of a selection, with its other valid statements.

    ``event`` and ``guarantee`` are the statement chosen for the release (see
    :func:`random_stopping_event`). ``alternatives`` holds the other statements that
    are also valid for the same release and not implied by the chosen one -- e.g. for
    a capped run, the pure composition ``RepeatedEvent(event, T)`` next to the
    ``(3 epsilon, delta)`` statement. Charge *one* of them (any one: each is a valid
    bound on its own); an accountant composing that event gets a valid bound.
    """

    alternatives: tuple[Statement, ...] = ()


class _Drawn(NamedTuple):
    """A validated draw of a part of a mixture (internal)."""

    score: float
    output: Any
    secure: bool


def _mixture_event(events: tuple[Event, ...], owner: str) -> Event:
    if all(event == events[0] for event in events):
        return events[0]
    epsilons = [pure_epsilon(event) for event in events]
    if all(epsilon is not None for epsilon in epsilons):
        return PureEvent(max(e for e in epsilons if e is not None))
    rhos = [zcdp_rho(event) for event in events]
    if all(rho is not None for rho in rhos):
        return ZCDPEvent(max(r for r in rhos if r is not None))
    raise UnsupportedEvent(
        f"{owner}: the candidates' events {events!r} have no common pure-DP or zCDP "
        "guarantee; declare a common event with Candidate(function, event)."
    )


class _BadDraw(Exception):
    """A draw failed validation (internal; turned into CandidateFailed)."""


@dataclass(frozen=True, eq=False)
class Candidate:
    """A private candidate: a randomized algorithm returning ``(score, output)``.

    Parameters
    ----------
    function:
        Called as ``function(rng)`` with a :class:`dpkit.random.Random` (use it for
        every random choice: each call must use fresh randomness). It returns
        ``(score, output)``; or, when ``score`` is given, the output alone. A returned
        :class:`~dpkit.mechanisms.Release` is unwrapped to its value (its event must be
        the declared one).
    event:
        What one call runs on the private data, *including* its score and any failure
        it may raise: the whole call must satisfy this event's guarantee.
    score:
        Optional post-processing ``score(output) -> float`` (no privacy cost).

    Notes
    -----
    Scores must be finite real numbers; ties are broken by draw order, which has the
    law of a uniform, data-independent tie-break (the draws are i.i.d.).
    """

    function: Callable[[Random], Any]
    event: Event
    score: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        owner = "Candidate"
        if not callable(self.function):
            raise InvalidParameter.for_parameter("function", owner, "a callable", self.function)
        if not isinstance(self.event, Event):
            raise InvalidParameter.for_parameter("event", owner, "an Event", self.event)
        if self.score is not None and not callable(self.score):
            raise InvalidParameter.for_parameter("score", owner, "a callable or None", self.score)

    @classmethod
    def from_mechanism(
        cls, mechanism: Mechanism, value: Any, *, score: Callable[[Any], Any] | None = None
    ) -> Candidate:
        """``mechanism.release(value)`` as a candidate; its event is the mechanism's.

        Without ``score`` the released value itself is the score (a real scalar, e.g.
        a noisy accuracy); otherwise ``score(released value)``.
        """
        owner = "Candidate.from_mechanism"
        if not isinstance(mechanism, Mechanism):
            raise InvalidParameter.for_parameter("mechanism", owner, "a dpkit Mechanism", mechanism)
        event = mechanism._event_for(mechanism._check_value(value))

        def function(rng: Random) -> Any:
            return mechanism.release(value, rng=rng)

        return cls(function, event, score)

    @classmethod
    def uniform(cls, candidates: Sequence[Candidate]) -> Candidate:
        """LT19's base mechanism ``Q``: run one of ``candidates``, chosen uniformly at random.

        The output is ``(i, output_i)``, ``i`` the index of the candidate that ran, and the
        score is candidate ``i``'s. A mixture with data-independent weights is as private
        as its least private part, so the event is the candidates' common event if they
        all have the same one, else ``PureEvent(max epsilon)`` if all are pure DP, else
        ``ZCDPEvent(max rho)`` if all are zCDP (Renyi divergence is jointly
        quasi-convex: van Erven & Harremoes 2014, Thm 13); otherwise declare a common
        event with ``Candidate(function, event)`` yourself.
        """
        owner = "Candidate.uniform"
        if isinstance(candidates, Candidate) or not isinstance(candidates, Sequence):
            raise InvalidParameter.for_parameter(
                "candidates", owner, "a non-empty sequence of Candidate", candidates
            )
        parts = tuple(candidates)
        if not parts:
            raise InvalidParameter(f"{owner}: the candidate set is empty; nothing to select.")
        for part in parts:
            if not isinstance(part, Candidate):
                raise InvalidParameter.for_parameter(
                    "candidates", owner, "a non-empty sequence of Candidate", part
                )
        event = _mixture_event(tuple(part.event for part in parts), owner)

        def function(rng: Random) -> Any:
            index = rng.integers(len(parts))
            score, output, secure = parts[index]._draw(rng)
            return _Drawn(score, (index, output), secure)

        return cls(function, event)

    def _draw(self, rng: Random) -> tuple[float, Any, bool]:
        """One call: (score, output, secure). Raises on any failure."""
        result = self.function(rng)
        if isinstance(result, _Drawn):
            return result.score, result.output, result.secure
        secure = True
        if isinstance(result, Release):
            if result.event != self.event:
                raise _BadDraw(
                    f"the candidate returned a release with event {result.event!r}, not its "
                    f"declared event {self.event!r}"
                )
            secure = result.secure
            result = result.value
            if self.score is None:
                return _check_score(result), result, secure
        if self.score is not None:
            return _check_score(self.score(result)), result, secure
        if not isinstance(result, tuple) or len(result) != 2:
            raise _BadDraw(
                "the candidate must return (score, output), or pass score= to score its output"
            )
        return _check_score(result[0]), result[1], secure


def _check_score(score: Any) -> float:
    if isinstance(score, bool) or not isinstance(score, numbers.Real):
        raise _BadDraw(f"a score must be a real number, got {type(score).__name__}")
    value = float(score)
    if not math.isfinite(value):
        raise _BadDraw(f"a score must be finite, got {value!r}")
    return value


# --- validation and events -----------------------------------------------------------


def _as_candidate(candidate: object, event: object, owner: str) -> Candidate:
    if isinstance(candidate, Candidate):
        if event is not None:
            raise InvalidParameter(
                f"{owner}: a Candidate declares its own event; do not pass event= too."
            )
        return candidate
    if isinstance(candidate, Mechanism):
        raise InvalidParameter(
            f"{owner}: a mechanism needs its input; pass Candidate.from_mechanism(mechanism, "
            "value)."
        )
    if isinstance(candidate, Sequence) and not isinstance(candidate, str | bytes):
        if event is not None:
            raise InvalidParameter(
                f"{owner}: pass a sequence of Candidate objects (each with its event), not event=."
            )
        if candidate and not all(isinstance(part, Candidate) for part in candidate):
            raise InvalidParameter.for_parameter(
                "candidate", owner, "a Candidate, a callable, or a sequence of Candidate", candidate
            )
        return Candidate.uniform(candidate)
    if not callable(candidate):
        raise InvalidParameter.for_parameter(
            "candidate", owner, "a Candidate or a callable function(rng)", candidate
        )
    if event is None:
        raise InvalidParameter(
            f"{owner}: a callable candidate must be declared with its event (event=...): "
            "what one call costs, including its score."
        )
    if not isinstance(event, Event):
        raise InvalidParameter.for_parameter("event", owner, "an Event", event)
    return Candidate(candidate, event)


def _check_gamma(value: object, owner: str) -> float:
    return check.check_probability(value, "stop_probability", owner, open_low=True)


def _check_cap(value: object, owner: str) -> int | None:
    return None if value is None else check.check_count(value, "max_draws", owner)


def _candidate_event(candidate: object, owner: str) -> Event:
    """The event of one draw, from a Candidate, a mechanism, an event or a guarantee."""
    if isinstance(candidate, Event):
        return candidate
    if isinstance(candidate, Candidate):
        return candidate.event
    if isinstance(candidate, Mechanism):
        return candidate.event
    if isinstance(candidate, Sequence) and not isinstance(candidate, str | bytes):
        return Candidate.uniform(candidate).event
    if isinstance(candidate, PureDP):
        return PureEvent(candidate.epsilon)
    if isinstance(candidate, ZCDP):
        return ZCDPEvent(candidate.rho)
    if isinstance(candidate, ApproxDP):
        return ApproxEvent(candidate.epsilon, candidate.delta)
    if isinstance(candidate, RDP):
        raise UnsupportedEvent(
            f"{owner}: no event describes a bare RDP curve; pass the candidate's event "
            "(e.g. GaussianEvent) instead."
        )
    raise InvalidParameter.for_parameter(
        "candidate", owner, "an Event, a guarantee, a Mechanism or a Candidate", candidate
    )


def _mean(gamma: float) -> float:
    # E[K] = 1/gamma rounded up: the event's gamma = 1/mean is then <= the real one,
    # and every bound of PS22 Thm 2 only grows as gamma shrinks.
    return max(1.0, fraction_up(1 / Fraction(gamma)))


def _check_mean(value: object, owner: str) -> float:
    mean = check.check_finite_float(value, "mean", owner)
    if not mean >= 1.0:
        raise InvalidParameter.for_parameter("mean", owner, "a finite float >= 1 (E[K])", value)
    return mean


def _law(
    stop_probability: object,
    repetitions: object,
    mean: object,
    shape: object,
    cap: int | None,
    owner: str,
) -> Repetitions:
    """The law of the number of draws from the public parameters (validated)."""
    if not isinstance(repetitions, str) or repetitions not in LAWS:
        raise InvalidParameter.for_parameter(
            "repetitions", owner, "one of " + ", ".join(map(repr, LAWS)), repetitions
        )
    fixed = {"geometric": 1.0, "logarithmic": 0.0, "poisson": math.inf}.get(repetitions)
    if shape is not None and fixed is not None:
        value = check.check_nonnegative(shape, "shape", owner, allow_inf=True)
        if value != fixed:
            raise InvalidParameter(
                f"{owner}: the {repetitions} law has shape {fixed:g}; for shape {value:g} "
                "pass repetitions='negative_binomial'."
            )
    if repetitions == "geometric":
        if mean is None:
            gamma = _check_gamma(stop_probability, owner)
            return Repetitions.geometric(Fraction(gamma), _mean(gamma))
        if stop_probability is not None:
            raise InvalidParameter(f"{owner}: pass stop_probability= or mean=, not both.")
        return Repetitions.of("geometric", _check_mean(mean, owner), 1.0)
    if stop_probability is not None:
        raise InvalidParameter(
            f"{owner}: stop_probability= is the geometric law's parameter; the "
            f"{repetitions} law is given by its mean=."
        )
    if cap is not None:
        raise InvalidParameter(f"{owner}: max_draws= is supported for the geometric law only.")
    if mean is None:
        raise InvalidParameter(f"{owner}: the {repetitions} law needs mean= (E[K] >= 1).")
    expected = _check_mean(mean, owner)
    if fixed is not None:
        return Repetitions.of(repetitions, expected, fixed)
    if shape is None:
        raise InvalidParameter(f"{owner}: the negative_binomial law needs shape= (eta >= 0).")
    eta = check.check_nonnegative(shape, "shape", owner)
    if 0.0 < eta < MIN_SHAPE:
        raise InvalidParameter.for_parameter(
            "shape", owner, f"0 (the logarithmic law) or a finite float >= {MIN_SHAPE:g}", shape
        )
    return Repetitions.of("negative_binomial", expected, eta)


def _guarantee(event: Event, delta: float | None, owner: str) -> Guarantee:
    """The guarantee stated on a release of ``event``."""
    epsilon = pure_epsilon(event)
    if epsilon is not None:
        return PureDP(epsilon)
    if isinstance(event, ApproxEvent):
        return ApproxDP(event.epsilon, event.delta)
    if isinstance(event, RepeatedEvent) and isinstance(event.event, ApproxEvent):
        inner = event.event
        total = fraction_up(Fraction(event.count) * Fraction(inner.delta))
        if total < 1:
            return ApproxDP(fraction_up(Fraction(event.count) * Fraction(inner.epsilon)), total)
    if not isinstance(event, RepeatAndSelectEvent):
        rho = zcdp_rho(event)
        if rho is not None:
            # With delta= (an (epsilon, delta) statement asked for): rho-zCDP implies
            # (eps(rho, delta), delta)-DP by ZCDP.to_approx's conversion; before issue
            # 33 the delta was silently ignored here.
            return ZCDP(rho) if delta is None else ZCDP(rho).to_approx(delta)
    if delta is not None:
        from dpkit.accounting import RDPAccountant

        accountant = RDPAccountant()
        if accountant.supports(event):
            return ApproxDP(accountant.compose(event).get_epsilon(delta), delta)
    raise UnsupportedEvent(
        f"{owner}: no guarantee can be stated for {event!r}"
        + ("" if delta is not None else "; pass delta= for an (epsilon, delta) guarantee")
        + ". Pure-DP candidates (Laplace, randomized response, exponential mechanism) "
        "are always supported."
    )


def random_stopping_event(
    candidate: object,
    *,
    stop_probability: float | None = None,
    repetitions: str = "geometric",
    mean: float | None = None,
    shape: float | None = None,
    max_draws: int | None = None,
    delta: float | None = None,
) -> Event:
    """The event of a whole :func:`random_stopping` run, without running it.

    ``candidate`` is the candidate's guarantee (``PureDP``, ``ZCDP``, ``ApproxDP``), its
    event, a dpkit mechanism or a :class:`Candidate`. Uncapped:
    ``RepeatAndSelectEvent(event, mean=1/gamma, shape=1.0)`` -- ``3 epsilon``-DP for an
    epsilon-DP candidate (LT19 Thm 3.2, ``dp.accounting.pure_epsilon`` of the event),
    and RDP by Papernot & Steinke 2022, Thm 2, where an accountant supports it.

    Other laws of the number of draws (``repetitions``, ``mean``, ``shape`` as for
    :func:`random_stopping`): ``RepeatAndSelectEvent(event, mean, shape)`` with shape
    ``eta`` (``0`` logarithmic, ``inf`` Poisson): ``(2 + eta) epsilon``-DP for finite
    ``eta`` (PS22 Cor. 3), RDP by PS22 Thm 2 or Thm 6.

    With a cap ``T = max_draws`` the run is no longer LT19's algorithm, and two
    statements are valid for an epsilon-DP candidate:

    * the composition of the ``T`` draws, ``RepeatedEvent(event, T)``: ``T epsilon``-DP;
    * ``ApproxEvent(3 epsilon, (1 + e^(3 epsilon)) beta)``: the capped run differs from
      the uncapped one only when the stopping time exceeds ``T`` (probability
      ``beta = (1 - gamma)^T``), a coupling argument (derived here; the tests check it
      against exact output laws).

    The event is chosen by this rule: (1) if one statement implies the other, the
    stronger one -- the composition wins when its own ``(3 epsilon, delta)`` profile,
    ``delta = (e^(T eps) - e^(3 eps)) / (1 + e^(T eps))``, is no larger (``T <= 3``,
    or a ``beta`` too large to say anything); (2) otherwise, with ``delta=`` given
    (the largest delta you accept), the ``(3 epsilon, delta)`` statement if its delta
    is at most yours, else the composition; (3) otherwise (no ``delta=``) the
    ``(3 epsilon, delta)`` statement. :func:`random_stopping` returns the statement not
    chosen in :attr:`SelectionRelease.alternatives`. Candidates that are not pure DP:
    the composition only. LT19's own capped theorems (3.4, 3.5) are not used: their
    constants could not be verified.
    """
    owner = "random_stopping_event"
    event = _candidate_event(candidate, owner)
    cap = _check_cap(max_draws, owner)
    law = _law(stop_probability, repetitions, mean, shape, cap, owner)
    if delta is not None:
        delta = check.check_delta(delta, owner, allow_zero=False)
    return _random_stopping_events(event, law, cap, delta)[0]


def _pure_profile(epsilon: float, at: float) -> float:
    """The smallest delta with which epsilon-DP implies (at, delta)-DP (binary randomized
    response's profile, Kairouz, Oh & Viswanath 2015): (e^eps - e^at) / (1 + e^eps)."""
    if at >= epsilon:
        return 0.0
    return -math.expm1(at - epsilon) / (1.0 + math.exp(-epsilon))


def _capped_approx(epsilon: float, gamma: float, cap: int) -> ApproxEvent | None:
    """``ApproxEvent(epsilon, (1 + e^epsilon) (1 - gamma)^T)`` (``epsilon`` the uncapped
    run's), rounded up; None when its delta is 1 or more."""
    beta = (Fraction(1) - Fraction(gamma)) ** cap
    try:
        factor = Fraction(math.exp(epsilon)) * (1 + Fraction(1, 10**12)) + 1
    except OverflowError:
        return None
    delta = fraction_up(factor * beta)
    return ApproxEvent(epsilon, delta) if delta < 1.0 else None


def _random_stopping_events(
    event: Event, law: Repetitions, cap: int | None, delta: float | None
) -> tuple[Event, tuple[Event, ...]]:
    """The chosen event of a run and the other valid events it does not imply."""
    uncapped = RepeatAndSelectEvent(event, law.mean, law.shape)
    gamma = law.gamma  # geometric: a float <= the exact stop probability
    if cap is None or gamma is None or gamma == 1.0:
        return uncapped, ()
    composed = RepeatedEvent(event, cap)
    epsilon = pure_epsilon(uncapped)
    approx = None if epsilon is None else _capped_approx(epsilon, gamma, cap)
    if approx is None:
        return composed, ()
    composed_epsilon = pure_epsilon(composed)
    assert composed_epsilon is not None  # the candidate is pure DP
    # Which statement is chosen changes only how good the release's statement is,
    # never its validity: both are proven, so no rounding direction matters here.
    if approx.delta >= _pure_profile(composed_epsilon, approx.epsilon):
        return composed, ()  # T epsilon-DP implies (3 epsilon, delta)
    if delta is not None and approx.delta > delta:
        return composed, (approx,)
    return approx, (composed,)


def thresholding_event(
    candidate: object, *, stop_probability: float, max_draws: int | None = None
) -> Event:
    """The event of a whole :func:`thresholding` run (LT19 Thm 3.1), without running it.

    For an epsilon-DP candidate: ``PureEvent(2 epsilon)`` uncapped. With a cap ``T``:
    ``PureEvent(2 epsilon + 2 e^(-T gamma))`` when ``T >= 1 + 1/(e gamma)`` (Thm 3.1 with
    ``epsilon_0 = 2 e^(-T gamma)``, as OpenDP instantiates it; the digest marks these
    constants SECONDARY; the tests check them against exact output laws, where the
    exact loss passes ``2 epsilon`` by at most a fifth of the extra term), or the
    composition ``RepeatedEvent(event, T)`` when that is smaller or the condition fails
    (both are pure: the smaller one implies the other, the rule of
    :func:`random_stopping_event`).
    Non-pure candidates: LT19's approximate-DP version is UNVERIFIED, so only the safe
    fallback is offered -- a cap ``T`` is required and the event is the composition
    ``RepeatedEvent(event, T)``.
    """
    owner = "thresholding_event"
    event = _candidate_event(candidate, owner)
    gamma = _check_gamma(stop_probability, owner)
    cap = _check_cap(max_draws, owner)
    return _thresholding_event(event, gamma, cap, owner)


def _thresholding_event(event: Event, gamma: float, cap: int | None, owner: str) -> Event:
    epsilon = pure_epsilon(event)
    if epsilon is None:
        if cap is None:
            raise UnsupportedEvent(
                f"{owner}: thresholding is analysed here for pure-DP candidates only "
                f"(LT19's approximate-DP version could not be verified); {event!r} has no "
                "pure-DP guarantee. Pass max_draws=T to pay the composition of T draws, "
                "or use random_stopping."
            )
        return RepeatedEvent(event, cap)
    two = fraction_up(2 * Fraction(epsilon))
    if cap is None:
        return PureEvent(two)
    composed = RepeatedEvent(event, cap)
    composed_epsilon = pure_epsilon(composed)
    assert composed_epsilon is not None
    if cap >= 1 + 1 / (math.e * gamma) * (1 + 1e-12):
        # epsilon_0 = 2 e^(-T gamma), rounded up.
        epsilon0 = math.nextafter(2.0 * math.exp(-cap * gamma), math.inf) * (1 + 1e-12)
        capped = fraction_up(Fraction(two) + Fraction(epsilon0))
        if capped < composed_epsilon:
            return PureEvent(capped)
    return composed


# --- the algorithms ------------------------------------------------------------------


def _draw_charged(
    cand: Candidate, random: Random, owner: str, selection_event: Event, guarantee: Guarantee
) -> tuple[float, Any, bool]:
    """One draw of the candidate; a draw that fails is the selection's output, raised as
    CandidateFailed carrying the whole selection's event and guarantee (to be charged)."""
    try:
        return cand._draw(random)
    except Exception as err:
        raise _failed(owner, err, selection_event, guarantee) from (
            None if isinstance(err, _BadDraw) else err
        )


def _failed(owner: str, err: BaseException, event: Event, guarantee: Guarantee) -> CandidateFailed:
    detail = str(err) if isinstance(err, _BadDraw) else f"the candidate raised {type(err).__name__}"
    return CandidateFailed(
        f"{owner}: a draw of the candidate failed ({detail}). The failure is this "
        f"selection's output: charge its event {event!r} ({guarantee}).",
        event=event,
        guarantee=guarantee,
    )


@overload
def random_stopping(
    candidate: Candidate | Sequence[Candidate] | Callable[[Random], Any],
    *,
    stop_probability: float | None = None,
    repetitions: Literal["geometric", "negative_binomial", "logarithmic"] = "geometric",
    mean: float | None = None,
    shape: float | None = None,
    event: Event | None = None,
    max_draws: int | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> SelectionRelease[Selected]: ...


@overload
def random_stopping(
    candidate: Candidate | Sequence[Candidate] | Callable[[Random], Any],
    *,
    stop_probability: float | None = None,
    repetitions: str,
    mean: float | None = None,
    shape: float | None = None,
    event: Event | None = None,
    max_draws: int | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> SelectionRelease[Selected | None]: ...


def random_stopping(
    candidate: Candidate | Sequence[Candidate] | Callable[[Random], Any],
    *,
    stop_probability: float | None = None,
    repetitions: str = "geometric",
    mean: float | None = None,
    shape: float | None = None,
    event: Event | None = None,
    max_draws: int | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> SelectionRelease[Any]:
    """Repeat a private candidate, stop at random, release the best draw (LT19 Alg. 2).

    After each draw a coin stops the run with probability ``gamma = stop_probability``,
    so the number of draws ``K`` is geometric with mean ``1/gamma``; the draw with the
    highest score (the first among equal ones) is released as :class:`Selected`.
    ``repetitions`` chooses another law of ``K`` (Papernot & Steinke 2022): ``K`` is
    drawn first, exactly and independently of the data, then the candidate runs ``K``
    times.

    Parameters
    ----------
    candidate:
        A :class:`Candidate`; a callable ``function(rng) -> (score, output)``
        declared with ``event``; or a non-empty sequence of candidates, one of which
        is drawn uniformly at random for each run (:meth:`Candidate.uniform`; the
        output is then ``(index, output)``).
    stop_probability:
        ``gamma`` in (0, 1] for the geometric law (or give its ``mean = 1/gamma``);
        ``gamma = 1`` runs the candidate once.
    repetitions:
        The law of the number of draws ``K`` (PS22 Definition 1 and Section 3.4):

        * ``"geometric"`` (default): ``P[K = k] = gamma (1 - gamma)^(k-1)``, shape 1;
        * ``"negative_binomial"`` with ``shape = eta >= 0``: the truncated negative
          binomial, ``P[K = k]`` proportional to ``binom(k + eta - 1, k) (1 - gamma)^k``
          for ``k >= 1`` (``eta = 1`` is the geometric law, ``eta = 0`` the logarithmic);
        * ``"logarithmic"``: ``P[K = k]`` proportional to ``(1 - gamma)^k / k``, shape 0;
        * ``"poisson"``: ``K ~ Poisson(mean)``; ``K = 0`` releases ``None`` (PS22's
          fixed default output) without running the candidate.

        Smaller shapes cost less privacy and have heavier tails (more very long runs
        at the same mean); Poisson concentrates ``K`` near its mean but has no pure-DP
        guarantee: pass ``delta=``.
    mean:
        ``E[K] >= 1`` (required for the laws other than geometric). The event carries
        it as given; the sampled truncated negative binomial has a mean at most this
        (lower by a relative (1 + eta) 1e-7 at most), so the accountant's bound covers it.
    shape:
        ``eta`` for ``"negative_binomial"`` (0, or at least 1e-9); the other laws fix it.
    event:
        The event of one call of a callable candidate (not with a :class:`Candidate`).
    max_draws:
        Optional cap ``T`` on the number of draws, geometric law only; changes the
        guarantee (see :func:`random_stopping_event`): choose ``T`` with
        ``(1 - gamma)^T`` negligible.
    delta:
        For candidates without a pure-DP guarantee, and for the Poisson law: state the
        release's guarantee as ``(epsilon, delta)``-DP from the RDP accountant (PS22
        Thm 2 and Thm 6). With ``max_draws`` and a pure-DP candidate: the largest
        delta you accept; the ``(3 epsilon, delta)`` statement is chosen only if its
        delta is at most this (see :func:`random_stopping_event`).
    confidence:
        Confidence of the reported :class:`~dpkit.mechanisms.FailureBound`.
    rng:
        Random source; the candidate receives it (see :func:`dpkit.random.as_random`).

    Privacy
    -------
    ``3 epsilon``-DP for an epsilon-DP candidate (LT19 Thm 3.2; PS22 Cor. 3 with
    eta = 1). Event ``RepeatAndSelectEvent(candidate_event, mean=1/gamma, shape=1.0)``
    (mean rounded up). Other laws: ``RepeatAndSelectEvent(candidate_event, mean,
    shape)``, ``(2 + eta) epsilon``-DP for an epsilon-DP candidate and finite ``eta``
    (PS22 Cor. 3: ``2 epsilon`` logarithmic), RDP by PS22 Thm 2 (Thm 6 for Poisson).
    ``K`` is sampled exactly (``dpkit.selection._repetitions``) with the law the
    event describes, or -- truncated negative binomial -- one with a parameter
    ``gamma`` no smaller and a mean no larger, whose bound is no larger. Neither ``K``
    nor the other draws are released. A failing draw raises
    :class:`~dpkit.errors.CandidateFailed` carrying the same event. With a cap ``T``:
    the better of ``T epsilon``-DP (composition) and ``(3 epsilon, (1 + e^(3 epsilon))
    (1 - gamma)^T)``-DP by the rule of :func:`random_stopping_event`; the other one,
    when it is not implied, is in the release's ``alternatives``
    (:class:`SelectionRelease`).

    Accuracy
    --------
    (LT19 Thm 3.3, exact form.) If one draw scores at least ``tau`` with probability
    ``p``, the released score is below ``tau`` with probability
    ``gamma (1 - p) / (gamma + p - gamma p) <= gamma / p``. The release's ``error`` is
    a :class:`~dpkit.mechanisms.FailureBound`: the smallest ``p`` that makes this at
    most ``1 - confidence``. For the other laws the release is below ``tau`` with
    probability ``E[(1 - p)^K]`` (the generating function of ``K`` at ``1 - p``), and
    ``error`` is None.

    Examples
    --------
    >>> import dpkit as dp
    >>> from dpkit.selection import Candidate, random_stopping
    >>> from dpkit.testing import seeded
    >>> laplace = dp.Laplace.calibrate(epsilon=0.5)
    >>> candidate = Candidate.from_mechanism(laplace, 10.0)  # a noisy score of 10
    >>> release = random_stopping(candidate, stop_probability=0.2, rng=seeded(0))
    >>> release.guarantee
    PureDP(epsilon=1.5)
    >>> logarithmic = random_stopping(
    ...     candidate, repetitions="logarithmic", mean=5.0, rng=seeded(0)
    ... )
    >>> logarithmic.guarantee  # 2 x 0.5 (PS22 Cor. 3, eta = 0)
    PureDP(epsilon=1.0)
    """
    owner = "random_stopping"
    cand = _as_candidate(candidate, event, owner)
    cap = _check_cap(max_draws, owner)
    law = _law(stop_probability, repetitions, mean, shape, cap, owner)
    if delta is not None:
        delta = check.check_delta(delta, owner, allow_zero=False)
    confidence = check.check_probability(
        confidence, "confidence", owner, open_low=True, open_high=True
    )
    selection_event, others = _random_stopping_events(cand.event, law, cap, delta)
    guarantee = _guarantee(selection_event, delta, owner)
    alternatives = tuple(Statement(other, _guarantee(other, delta, owner)) for other in others)
    random = as_random(rng)
    stop = law.stop  # geometric: the exact stop probability, coins drawn as we go
    error: FailureBound | None = None
    count = 0
    if stop is not None:
        gamma = float(stop)
        error = FailureBound(
            success_probability_needed(gamma, cap, 1.0 - confidence), confidence, gamma, cap
        )
    else:
        count = law.sample(random)  # drawn first, independently of the data
        if count == 0:  # Poisson: the fixed default output, nothing runs
            return SelectionRelease(
                value=None,
                error=None,
                event=selection_event,
                guarantee=guarantee,
                mechanism="RandomStopping",
                secure=random.secure,
                alternatives=alternatives,
            )
    best: Selected | None = None
    secure = random.secure
    draws = 0
    while True:
        draws += 1
        score, output, draw_secure = _draw_charged(cand, random, owner, selection_event, guarantee)
        secure = secure and draw_secure
        if best is None or score > best.score:
            best = Selected(score, output)
        if stop is None:
            if draws == count:
                break
        elif draws == cap or bernoulli(stop, rng=random):
            break
    del draws, count
    return SelectionRelease(
        value=best,
        error=error,
        event=selection_event,
        guarantee=guarantee,
        mechanism="RandomStopping",
        secure=secure,
        alternatives=alternatives,
    )


def thresholding(
    candidate: Candidate | Sequence[Candidate] | Callable[[Random], Any],
    *,
    threshold: float,
    stop_probability: float,
    event: Event | None = None,
    max_draws: int | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> SelectionRelease[Selected | None]:
    """The first draw whose score reaches a known target, or None (LT19 Alg. 1).

    Draws the candidate; releases the draw if its score is ``>= threshold``; otherwise
    a coin stops the run with probability ``gamma = stop_probability`` (releasing
    None), else it draws again -- at most ``max_draws`` times if given.

    Parameters
    ----------
    candidate, event, rng:
        As for :func:`random_stopping`.
    threshold:
        The known target score ``tau`` (a finite float).
    stop_probability:
        ``gamma`` in (0, 1].
    max_draws:
        Optional cap ``T`` (required for candidates that are not pure DP).
    delta:
        For candidates with neither a pure-DP nor a zCDP guarantee (e.g. subsampled
        Gaussian): state the release's guarantee as ``(epsilon, delta)``-DP from the
        RDP accountant.
    confidence:
        Confidence of the reported :class:`~dpkit.mechanisms.FailureBound`.

    Privacy
    -------
    For an epsilon-DP candidate, ``2 epsilon``-DP uncapped (LT19 Thm 3.1; the ratio of
    ``P[release = (x, q)]`` is ``e^eps`` times that of ``gamma + p (1 - gamma)``, itself at
    most ``e^eps``). With a cap ``T >= 1 + 1/(e gamma)``:
    ``(2 epsilon + 2 e^(-T gamma))``-DP -- the constants of Thm 3.1 as OpenDP states them,
    marked SECONDARY in our digest (not read in the paper) and checked against exact
    output laws by the tests -- or the composition of ``T`` draws (``T epsilon``-DP),
    whichever is smaller: both are pure, so one implies the other and the release's
    ``alternatives`` is empty. Candidates without a
    pure-DP guarantee: LT19's approximate-DP statement is UNVERIFIED, so this function
    ships only the safe fallback, basic composition over a required cap ``T``
    (``RepeatedEvent(event, T)``). See :func:`thresholding_event`.

    Accuracy
    --------
    If one draw reaches the threshold with probability ``p``, None is released with
    probability exactly ``gamma (1 - p) / (gamma + p - gamma p)`` uncapped (LT19
    Thm 3.1; the capped form is :meth:`~dpkit.mechanisms.FailureBound.failure_probability`).
    The release's ``error`` is that :class:`~dpkit.mechanisms.FailureBound`.
    Conditioned on not None, the release has the law of one draw conditioned on
    reaching the threshold.
    """
    owner = "thresholding"
    cand = _as_candidate(candidate, event, owner)
    tau = check.check_finite_float(threshold, "threshold", owner)
    gamma = _check_gamma(stop_probability, owner)
    cap = _check_cap(max_draws, owner)
    confidence = check.check_probability(
        confidence, "confidence", owner, open_low=True, open_high=True
    )
    if delta is not None:
        delta = check.check_delta(delta, owner, allow_zero=False)
    selection_event = _thresholding_event(cand.event, gamma, cap, owner)
    guarantee = _guarantee(selection_event, delta, owner)
    error = FailureBound(
        success_probability_needed(gamma, cap, 1.0 - confidence), confidence, gamma, cap
    )
    random = as_random(rng)
    stop = Fraction(gamma)
    secure = random.secure
    chosen: Selected | None = None
    draws = 0
    while True:
        draws += 1
        score, output, draw_secure = _draw_charged(cand, random, owner, selection_event, guarantee)
        secure = secure and draw_secure
        if score >= tau:
            chosen = Selected(score, output)
            break
        if draws == cap or bernoulli(stop, rng=random):
            break
    del draws
    return SelectionRelease(
        value=chosen,
        error=error,
        event=selection_event,
        guarantee=guarantee,
        mechanism="Thresholding",
        secure=secure,
    )
