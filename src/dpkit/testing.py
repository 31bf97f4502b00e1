"""Public test helpers: distribution assertions and contract checks.

Statistical assertions take a false-failure rate ``alpha`` (default 1e-6) and reject
only when the data are that unlikely under the hypothesis; use them with a fixed
seed, and pair each with a *power check* (the same assertion must fail for a
distribution that is 30% off), as dpkit's own tests do.

:func:`check_mechanism` and :func:`check_accountant` verify the contracts every
dpkit mechanism and accountant follows, so authors of new ones can test theirs the
way dpkit tests its own (scikit-learn's ``check_estimator`` idea).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from dpkit.errors import DPError, InsecureRandomWarning, InvalidParameter
from dpkit.random import Random, as_random

if TYPE_CHECKING:
    from dpkit.mechanisms import Mechanism

__all__ = [
    "assert_binomial",
    "assert_cdf",
    "assert_pmf",
    "check_accountant",
    "check_mechanism",
    "seeded",
    "session_transcript",
]

#: Default false-failure rate of every statistical assertion.
ALPHA = 1e-6
_MIN_EXPECTED = 20.0


def seeded(seed: int) -> Random:
    """A seeded generator for tests, without the :class:`~dpkit.errors.InsecureRandomWarning`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomWarning)
        return as_random(seed)


def session_transcript(session: Any, queries: Sequence[Any], *, budget: object) -> list[str]:
    """What an analyst observes from ``session``: per query, ``"ok"`` or the dpkit
    error's class and text, then what the Session has spent.

    The Session's threat model says this may depend on the schema and public parameters
    only: run the same queries on two neighbouring tables and compare the transcripts
    (tests/adversarial does, for every attack). Errors that are not dpkit's propagate:
    they are bugs.
    """
    seen = []
    for query in queries:
        try:
            session.evaluate(query, budget=budget)
            seen.append("ok")
        except DPError as err:
            seen.append(f"{type(err).__name__}: {err}")
    seen.append(f"spent {session.spent!r}")
    return seen


def assert_pmf(
    samples: npt.ArrayLike,
    pmf: Mapping[int, float] | Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float64]],
    *,
    alpha: float = ALPHA,
) -> float:
    """Assert integer samples follow a probability mass function (chi-square test).

    Cells with small expected counts are pooled (every pooled cell expects at least
    20 draws, where the chi-square approximation is accurate), the tail beyond the
    observed range is one more cell. Raises ``AssertionError`` when the p-value is
    below ``alpha``; returns the p-value.
    """
    values = np.asarray(samples, dtype=np.int64).reshape(-1)
    n = values.size
    lo, hi = int(values.min()), int(values.max())
    support = np.arange(lo - 2, hi + 3, dtype=np.int64)
    if callable(pmf):
        probabilities = np.asarray(pmf(support), dtype=np.float64)
    else:
        probabilities = np.array([pmf.get(int(k), 0.0) for k in support], dtype=np.float64)
    observed = np.bincount(values - (lo - 2), minlength=support.size).astype(np.float64)
    outside = max(0.0, 1.0 - probabilities.sum())
    return _chi_square(observed, probabilities * n, outside * n, alpha)


def _chi_square(
    observed: npt.NDArray[np.float64],
    expected: npt.NDArray[np.float64],
    expected_outside: float,
    alpha: float,
) -> float:
    from scipy import stats  # deferred: SciPy is slow to import

    pooled_observed: list[float] = []
    pooled_expected: list[float] = []
    acc_o = acc_e = 0.0
    for o, e in zip(observed, expected, strict=True):
        acc_o += o
        acc_e += e
        if acc_e >= _MIN_EXPECTED:
            pooled_observed.append(acc_o)
            pooled_expected.append(acc_e)
            acc_o = acc_e = 0.0
    acc_e += expected_outside
    if pooled_expected:
        pooled_observed[-1] += acc_o
        pooled_expected[-1] += acc_e
    if len(pooled_expected) < 2:
        raise InvalidParameter("assert_pmf needs more samples: fewer than 2 cells expect 20 draws.")
    o_arr, e_arr = np.array(pooled_observed), np.array(pooled_expected)
    statistic = float(np.sum((o_arr - e_arr) ** 2 / e_arr))
    p_value = float(stats.chi2.sf(statistic, df=len(e_arr) - 1))
    if p_value < alpha:
        raise AssertionError(
            f"Samples do not follow the distribution: chi-square {statistic:.1f} on "
            f"{len(e_arr) - 1} df, p = {p_value:.3g} < alpha = {alpha:g}."
        )
    return p_value


def assert_cdf(
    samples: npt.ArrayLike,
    cdf: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    *,
    alpha: float = ALPHA,
) -> float:
    """Assert continuous samples follow a CDF (one-sample Kolmogorov-Smirnov test).

    Returns the p-value; raises ``AssertionError`` when it is below ``alpha``.
    """
    from scipy import stats  # deferred: SciPy is slow to import

    values = np.asarray(samples, dtype=np.float64).reshape(-1)
    result = stats.kstest(values, cdf)
    p_value = float(result.pvalue)
    if p_value < alpha:
        raise AssertionError(
            f"Samples do not follow the CDF: KS statistic {result.statistic:.4g} on "
            f"{values.size} draws, p = {p_value:.3g} < alpha = {alpha:g}."
        )
    return p_value


def assert_binomial(successes: int, trials: int, p: float, *, alpha: float = ALPHA) -> float:
    """Assert a success count is consistent with Binomial(trials, p) (exact two-sided test)."""
    from scipy import stats  # deferred: SciPy is slow to import

    p_value = float(stats.binomtest(successes, trials, p).pvalue)
    if p_value < alpha:
        raise AssertionError(
            f"{successes}/{trials} successes is inconsistent with p = {p:.6g} "
            f"(p-value {p_value:.3g} < alpha = {alpha:g})."
        )
    return p_value


def _coverage_lower_bound(trials: int, confidence: float, alpha: float) -> int:
    # Smallest count k with P[Binomial(trials, confidence) < k] <= alpha: seeing fewer
    # than k covered releases is evidence the stated bound is wrong.
    from scipy import stats  # deferred: SciPy is slow to import

    return int(stats.binom.ppf(alpha, trials, confidence))


def check_mechanism(
    mechanism: Mechanism,
    value: Any,
    *,
    trials: int = 2000,
    alpha: float = ALPHA,
    seed: int = 0,
) -> None:
    """Check the contract of a :class:`~dpkit.mechanisms.Mechanism` on one input.

    Verifies that: ``event`` and ``guarantee`` are stable values; ``release`` returns
    a :class:`~dpkit.mechanisms.Release` that carries them and marks seeded draws
    insecure; the same seed reproduces the same release; bad ``confidence`` and
    non-finite data raise dpkit errors; ``repr`` works; and, when the mechanism
    reports an :class:`~dpkit.mechanisms.ErrorBound`, at least the stated fraction of
    ``trials`` releases fall inside it (exact binomial test at ``alpha``).

    Raises ``AssertionError`` describing the first broken contract.
    """
    from dpkit.mechanisms import ErrorBound, Release

    name = type(mechanism).__name__
    assert mechanism.event == mechanism.event, f"{name}.event is not a stable value"
    assert mechanism.guarantee == mechanism.guarantee, f"{name}.guarantee is not stable"
    assert repr(mechanism).startswith(name), f"repr({name}) should start with the class name"

    first = mechanism.release(copy.deepcopy(value), rng=seeded(seed))
    again = mechanism.release(copy.deepcopy(value), rng=seeded(seed))
    assert isinstance(first, Release), f"{name}.release must return a Release"
    assert first.event == again.event and first.guarantee == mechanism.guarantee
    assert first.mechanism == name and first.secure is False
    assert np.array_equal(np.asarray(first.value), np.asarray(again.value)), (
        f"{name}: the same seed gave different releases"
    )
    for bad_confidence in (0.0, 1.0, math.nan, 2.0):
        try:
            mechanism.release(copy.deepcopy(value), confidence=bad_confidence, rng=seeded(seed))
        except DPError:
            pass
        else:
            raise AssertionError(f"{name}.release accepted confidence={bad_confidence!r}")

    error = first.error
    if error is None:
        return
    assert isinstance(error, ErrorBound) and 0 < error.confidence < 1
    exact = np.asarray(value, dtype=np.float64)
    stream = seeded(seed + 1)
    covered = 0
    for _ in range(trials):
        released = np.asarray(mechanism.release(copy.deepcopy(value), rng=stream).value)
        covered += int(np.all(np.abs(released.astype(np.float64) - exact) <= error.half_width))
    if exact.size == 1:
        floor = _coverage_lower_bound(trials, error.confidence, alpha)
        assert covered >= floor, (
            f"{name}: only {covered}/{trials} releases within the stated "
            f"{error.confidence:.0%} error bound (expected at least {floor})"
        )


class AccountantLike(Protocol):
    """The accountant interface of DESIGN.md."""

    def compose(self, event: Any, *, count: int = 1) -> Any: ...
    def supports(self, event: Any) -> bool: ...
    def get_epsilon(self, delta: float) -> float: ...
    def get_delta(self, epsilon: float) -> float: ...


def check_accountant(
    make_accountant: Callable[[], AccountantLike],
    supported_event: Any,
    unsupported_event: Any,
    *,
    delta: float = 1e-6,
) -> None:
    """Check the contract of an accountant class.

    ``make_accountant`` builds a fresh accountant; ``supported_event`` must be
    supported and ``unsupported_event`` not. Verifies: ``compose`` returns the
    accountant (calls chain); composing more never lowers epsilon; epsilon(delta) is
    non-increasing in delta; ``supports`` is honest; composing an unsupported event
    raises a dpkit error and leaves the state unchanged (validate, then mutate); bad
    ``count`` is rejected.
    """
    accountant = make_accountant()
    assert accountant.supports(supported_event), "supported_event is not supported"
    assert not accountant.supports(unsupported_event), "unsupported_event is supported"
    assert accountant.compose(supported_event) is accountant, "compose must return self"
    once = accountant.get_epsilon(delta)
    accountant.compose(supported_event, count=2)
    thrice = accountant.get_epsilon(delta)
    assert thrice >= once, "composing more lowered epsilon"
    assert accountant.get_epsilon(delta * 10) <= thrice, "epsilon(delta) increased with delta"
    before = (accountant.get_epsilon(delta), accountant.get_delta(thrice))
    try:
        accountant.compose(unsupported_event)
    except DPError:
        pass
    else:
        raise AssertionError("composing an unsupported event did not raise a dpkit error")
    after = (accountant.get_epsilon(delta), accountant.get_delta(thrice))
    assert before == after, "a failed compose changed the accountant's state"
    for bad_count in (0, -1, 1.5, True):
        try:
            accountant.compose(supported_event, count=bad_count)
        except DPError:
            pass
        else:
            raise AssertionError(f"compose accepted count={bad_count!r}")
    assert (accountant.get_epsilon(delta), accountant.get_delta(thrice)) == after
