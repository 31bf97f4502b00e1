"""Private selection from private candidates: random stopping and thresholding (LT19).

Privacy is checked on candidates with known output laws (randomized response, random
epsilon-DP pairs of laws on a few outcomes): the selection's exact output law is
computed in closed form, checked against sampled releases (chi-square, false-failure
rate 1e-6 per test), and its privacy loss checked against the theorem; a black-box
audit (``dpkit.audit``) catches the planted bug "charge epsilon instead of 3 epsilon".
Utility: LT19 Thm 3.3 over seeded runs (binomial tests, false-failure rate 1e-6 each).
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special, stats

import dpkit as dp
from dpkit.accounting._math.selection import tnb_gamma, tnb_mean
from dpkit.accounting.events import (
    ApproxEvent,
    GaussianEvent,
    LaplaceEvent,
    PureEvent,
    RepeatAndSelectEvent,
    RepeatedEvent,
    pure_epsilon,
)
from dpkit.audit import audit
from dpkit.errors import CandidateFailed, InvalidParameter, UnsupportedEvent
from dpkit.mechanisms import FailureBound
from dpkit.selection import (
    Candidate,
    Selected,
    random_stopping,
    random_stopping_event,
    thresholding,
    thresholding_event,
)
from dpkit.selection._repetitions import Repetitions
from dpkit.testing import assert_pmf, seeded

ALPHA = 1e-6


# --- exact output laws -----------------------------------------------------------------


def stopping_pgf(z: np.ndarray, gamma: float, cap: int | None) -> np.ndarray:
    """E[z^min(K, T)] for K ~ Geometric(gamma) on {1, 2, ...}."""
    z = np.asarray(z, dtype=float)
    if cap is None:
        return gamma * z / (1 - (1 - gamma) * z)
    k = np.arange(1, cap)
    head = (gamma * (1 - gamma) ** (k - 1) * z[..., None] ** k).sum(axis=-1)
    return head + (1 - gamma) ** (cap - 1) * z**cap


def random_stopping_law(pmf: np.ndarray, gamma: float, cap: int | None = None) -> np.ndarray:
    """Law of the released outcome when outcome i has score i (distinct scores)."""
    below_or_equal = np.cumsum(pmf)
    below = below_or_equal - pmf
    return stopping_pgf(below_or_equal, gamma, cap) - stopping_pgf(below, gamma, cap)


def thresholding_law(pmf: np.ndarray, tau: int, gamma: float, cap: int | None = None) -> np.ndarray:
    """Law of (outcome i for i >= tau, then None last) when outcome i has score i."""
    p = pmf[tau:].sum()
    a = (1 - p) * (1 - gamma)
    repeats = 1 / (1 - a) if cap is None else (1 - a**cap) / (1 - a)
    out = np.zeros(len(pmf) + 1)
    out[tau : len(pmf)] = pmf[tau:] * repeats
    out[-1] = 1 - p * repeats
    return out


def max_log_ratio(p: np.ndarray, q: np.ndarray) -> float:
    """max |ln p_i / q_i| over the outcomes (both laws must have the same support)."""
    support = (p > 0) | (q > 0)
    assert np.all(p[support] > 0) and np.all(q[support] > 0)
    return float(np.max(np.abs(np.log(p[support]) - np.log(q[support]))))


def rr_law(epsilon: float, k: int, true: int) -> np.ndarray:
    law = np.full(k, 1.0 / (math.exp(epsilon) + k - 1))
    law[true] = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    return law


@functools.cache
def dp_pairs(epsilon: float, seed: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """epsilon-DP pairs of laws: k-ary randomized response on neighbours, and random pairs.

    Remembered per (epsilon, seed): the parametrized privacy tests ask for the same
    pairs again (~0.1 s each); the arrays are read-only, so no test can change them.
    """
    pairs = []
    for k in (2, 3, 5):
        for a in range(k):
            for b in range(k):
                if a != b:
                    pairs.append((rr_law(epsilon, k, a), rr_law(epsilon, k, b)))
    rng = np.random.default_rng(seed)
    for _ in range(300):
        m = int(rng.integers(2, 7))
        p = rng.dirichlet(np.full(m, 0.5)) + 1e-9
        p /= p.sum()
        q = p * np.exp(rng.choice([-0.5, 0.5], m) * epsilon)
        q /= q.sum()  # ratio within e^(eps/2) * e^(eps/2)
        assert max_log_ratio(p, q) <= epsilon * (1 + 1e-12)
        pairs.append((p, q))
    for p, q in pairs:
        p.setflags(write=False)
        q.setflags(write=False)
    return tuple(pairs)


def rr_candidate(epsilon: float, k: int, true: int) -> Candidate:
    mechanism = dp.RandomizedResponse(epsilon=epsilon, categories=list(range(k)))
    return Candidate.from_mechanism(mechanism, [true], score=lambda v: float(v[0]))


# --- the sampled law is the exact one --------------------------------------------------


@pytest.mark.parametrize(("gamma", "cap"), [(0.3, None), (0.2, 4), (1.0, None)])
def test_random_stopping_samples_follow_the_exact_law(gamma: float, cap: int | None) -> None:
    candidate = rr_candidate(1.0, 4, 1)
    rng = seeded(11)
    draws = [
        random_stopping(candidate, stop_probability=gamma, max_draws=cap, rng=rng).value.output[0]
        for _ in range(3000)
    ]
    law = random_stopping_law(rr_law(1.0, 4, 1), gamma, cap)
    assert_pmf(draws, dict(enumerate(law)), alpha=ALPHA)
    # Power: a geometric with the wrong stop probability is rejected on the same draws.
    with pytest.raises(AssertionError):
        wrong = random_stopping_law(rr_law(1.0, 4, 1), 0.6 if gamma < 0.5 else 0.4, cap)
        assert_pmf(draws, dict(enumerate(wrong)), alpha=ALPHA)


@pytest.mark.parametrize(("gamma", "cap"), [(0.2, None), (0.3, 3)])
def test_thresholding_samples_follow_the_exact_law(gamma: float, cap: int | None) -> None:
    candidate = rr_candidate(1.0, 4, 0)
    rng = seeded(12)
    outcomes = []
    for _ in range(3000):
        value = thresholding(
            candidate, threshold=2.0, stop_probability=gamma, max_draws=cap, rng=rng
        ).value
        outcomes.append(4 if value is None else int(value.output[0]))
    law = thresholding_law(rr_law(1.0, 4, 0), 2, gamma, cap)
    assert_pmf(outcomes, dict(enumerate(law)), alpha=ALPHA)


# --- privacy: exact loss within the theorems ---------------------------------------------


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("gamma", [1.0, 0.5, 0.1, 0.01])
def test_random_stopping_is_3_epsilon_dp_exactly(epsilon: float, gamma: float) -> None:
    claimed = pure_epsilon(random_stopping_event(dp.PureDP(epsilon), stop_probability=gamma))
    assert claimed == pytest.approx(3 * epsilon, rel=1e-12) and claimed >= 3 * epsilon
    worst = max(
        max_log_ratio(random_stopping_law(p, gamma), random_stopping_law(q, gamma))
        for p, q in dp_pairs(epsilon, seed=int(100 * epsilon))
    )
    assert worst <= claimed * (1 + 1e-9)
    if gamma < 1:
        # Planted bug: charging the candidate's epsilon for the whole selection is false.
        assert worst > epsilon * 1.2


def test_capped_random_stopping_falls_back_to_composition() -> None:
    # The capped statements are checked against exact output laws, with planted
    # weaker bounds, in test_capped_selection_exact.py (issue 33, item 5). Here: caps
    # of at most 3 draws, or a delta of 1 or more, state the composition of T draws.
    epsilon = 1.0
    assert random_stopping_event(
        dp.PureDP(epsilon), stop_probability=0.5, max_draws=4
    ) == RepeatedEvent(PureEvent(epsilon), 4)  # (1 + e^3) / 16 > 1
    assert random_stopping_event(
        dp.PureDP(epsilon), stop_probability=0.1, max_draws=2
    ) == RepeatedEvent(PureEvent(epsilon), 2)


def pair_grid(epsilon: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """Two-outcome pairs (below, above tau) at the extreme ratios, over a grid of p."""
    pairs = []
    for p in np.geomspace(1e-6, 1 - 1e-9, 400):
        for p2 in (
            max(p * math.exp(-epsilon), 1 - (1 - p) * math.exp(epsilon)),
            min(p * math.exp(epsilon), 1 - (1 - p) * math.exp(-epsilon)),
        ):
            if 0 < p2 < 1:
                pairs.append((np.array([1 - p, p]), np.array([1 - p2, p2])))
    return pairs


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 2.0])
@pytest.mark.parametrize(
    ("gamma", "cap"), [(0.5, None), (0.01, None), (0.1, 10), (0.1, 40), (0.01, 400), (0.5, 3)]
)
def test_thresholding_is_2_epsilon_dp_exactly(epsilon: float, gamma: float, cap: int | None):
    event = thresholding_event(dp.PureDP(epsilon), stop_probability=gamma, max_draws=cap)
    claimed = pure_epsilon(event)
    assert claimed is not None
    if cap is None:
        assert event == PureEvent(2 * epsilon)
    pairs = [*pair_grid(epsilon), *dp_pairs(epsilon, seed=7)]
    worst = 0.0
    for p, q in pairs:
        tau = len(p) - 1  # only the top outcome reaches the threshold
        worst = max(
            worst,
            max_log_ratio(
                thresholding_law(p, tau, gamma, cap), thresholding_law(q, tau, gamma, cap)
            ),
        )
    assert worst <= claimed * (1 + 1e-9)
    if cap is None:  # charging epsilon is false; the factor 2 is needed as gamma -> 0
        assert worst > (1.5 if gamma <= 0.01 else 1.0) * epsilon


# --- the planted bug is caught by a black-box audit ----------------------------------------


#: The selection audited: 2-ary randomized response at epsilon = 2, stop probability 1/2.
AUDIT_EPSILON, AUDIT_GAMMA = 2.0, 0.5


def audited_selection(x: bool, n: int, rng) -> np.ndarray:
    """n released scores of random stopping over the randomized-response candidate."""
    candidate = rr_candidate(AUDIT_EPSILON, 2, 1 if x else 0)
    return np.array(
        [
            random_stopping(candidate, stop_probability=AUDIT_GAMMA, rng=rng).value.score
            for _ in range(n)
        ]
    )


def check_audit_catches_the_undercharge(result) -> None:
    epsilon = AUDIT_EPSILON
    # Exact loss: ln(P'[0] / P[0]) = 2.52 > 2 = the buggy charge; 6 = the true one.
    exact = max_log_ratio(
        random_stopping_law(rr_law(epsilon, 2, 1), AUDIT_GAMMA),
        random_stopping_law(rr_law(epsilon, 2, 0), AUDIT_GAMMA),
    )
    assert 2.5 < exact < 3 * epsilon
    assert result.refutes(epsilon)  # the planted bug
    assert not result.refutes(3 * epsilon)
    assert result.epsilon_lower_bound <= exact


def test_audit_catches_charging_epsilon_instead_of_3_epsilon() -> None:
    # The released score is 0 or 1, so the only tests are "score = 0" and "score = 1":
    # the region is fixed before sampling (threshold 0.5, both orientations, Bonferroni
    # over the two) and every draw estimates it, none spent choosing it (the slow twin
    # below runs the data-chosen histogram attack with a selection half).
    # Exact rates of "score = 0 means x' = False": FPR = P[0] = 0.0634,
    # FNR = P'[1] = 0.2130. At 6000 draws per side and level 1e-6 / 4 per rate, the
    # expected counts (380, 1278) give the bound ln((1 - FNR_up) / FPR_up) = 2.245;
    # with both counts 4 standard deviations worse (76 and 127 more) it is 2.055,
    # still > 2: the planted bug is refuted unless a count is off by > 4 sd (< 1e-4).
    release = random_stopping(
        rr_candidate(AUDIT_EPSILON, 2, 1), stop_probability=AUDIT_GAMMA, rng=seeded(0)
    )
    assert release.guarantee == dp.PureDP(3 * AUDIT_EPSILON)
    result = audit(
        audited_selection,
        True,
        False,
        samples=6000,
        correction="bonferroni",
        thresholds=[0.5],
        confidence=1 - ALPHA,
        rng=seeded(21),
    )
    check_audit_catches_the_undercharge(result)


@pytest.mark.slow
def test_audit_catches_charging_epsilon_instead_of_3_epsilon_histogram() -> None:
    # The full-size audit: the histogram attack chooses the region from 10^4 draws per
    # side, and 10^4 more estimate it (expected bound 2.31).
    result = audit(
        audited_selection,
        True,
        False,
        samples=20_000,
        attack="histogram",
        confidence=1 - ALPHA,
        rng=seeded(21),
    )
    check_audit_catches_the_undercharge(result)


# --- utility: LT19 Theorem 3.3 over seeded runs ---------------------------------------------


def test_random_stopping_meets_theorem_3_3() -> None:
    # Candidate: Laplace(scale 1) noise around 0; tau = 1 is reached with p = e^-1 / 2.
    laplace = dp.Laplace.calibrate(epsilon=1.0)
    candidate = Candidate.from_mechanism(laplace, 0.0)
    gamma, tau, runs = 0.05, 1.0, 1000
    p = 0.5 * math.exp(-tau / laplace.scale)
    rng = seeded(31)
    releases = [random_stopping(candidate, stop_probability=gamma, rng=rng) for _ in range(runs)]
    failures = sum(r.value.score < tau for r in releases)
    exact = gamma * (1 - p) / (gamma + p - gamma * p)
    assert exact <= gamma / p
    # Thm 3.3: P[score < tau] <= gamma / p; one-sided binomial test, false failure 1e-6.
    assert stats.binom.sf(failures - 1, runs, gamma / p) >= ALPHA
    # The exact form, two-sided (false failure 1e-6).
    assert stats.binomtest(failures, runs, exact).pvalue >= ALPHA
    # The reported FailureBound: scores reach the (1 - p*)-quantile w.p. >= confidence.
    error = releases[0].error
    assert isinstance(error, FailureBound) and error.confidence == 0.95
    assert error.failure_probability(error.success_probability) <= 0.05
    assert error.failure_probability(p) == pytest.approx(exact, rel=1e-12)


def test_thresholding_failure_probability_is_its_error() -> None:
    laplace = dp.Laplace.calibrate(epsilon=1.0)
    candidate = Candidate.from_mechanism(laplace, 0.0)
    gamma, tau, runs = 0.05, 1.0, 1000
    p = 0.5 * math.exp(-tau)
    rng = seeded(32)
    releases = [
        thresholding(candidate, threshold=tau, stop_probability=gamma, rng=rng) for _ in range(runs)
    ]
    failures = sum(r.value is None for r in releases)
    error = releases[0].error
    assert isinstance(error, FailureBound)
    assert stats.binomtest(failures, runs, error.failure_probability(p)).pvalue >= ALPHA
    assert all(r.value.score >= tau for r in releases if r.value is not None)


def test_failure_bound_closed_forms() -> None:
    for gamma in (1.0, 0.3, 0.01):
        for cap in (None, 1, 2, 7, 100):
            for p in (0.0, 0.01, 0.5, 0.99, 1.0):
                bound = FailureBound(0.5, 0.9, gamma, cap)
                pmf = np.array([1 - p, p])
                exact = thresholding_law(pmf, 1, gamma, cap)[-1] if p > 0 else 1.0
                assert bound.failure_probability(p) == pytest.approx(exact, abs=1e-12)
                fail = random_stopping_law(pmf, gamma, cap)[0] if p < 1 else 0.0
                assert bound.failure_probability(p) == pytest.approx(fail, abs=1e-12)


# --- API and events --------------------------------------------------------------------------


def test_release_carries_the_repeat_and_select_event() -> None:
    laplace = dp.Laplace.calibrate(epsilon=0.5)
    candidate = Candidate.from_mechanism(laplace, 3.0)
    release = random_stopping(candidate, stop_probability=0.25, rng=seeded(1))
    assert release.event == RepeatAndSelectEvent(laplace.event, mean=4.0, shape=1.0)
    assert release.event == random_stopping_event(laplace, stop_probability=0.25)
    assert release.event == random_stopping_event(candidate, stop_probability=0.25)
    assert release.guarantee == dp.PureDP(1.5)
    assert isinstance(release.value, Selected) and release.value.score == release.value.output
    assert release.mechanism == "RandomStopping" and release.secure is False
    # mean = 1/gamma rounded up, never below the real mean
    event = random_stopping_event(dp.PureDP(1.0), stop_probability=0.3)
    assert Fraction(event.mean) >= 1 / Fraction(0.3)


def test_callable_candidate_with_declared_event() -> None:
    def candidate(rng):
        noisy = dp.laplace(0.7, epsilon=1.0, sensitivity=1, rng=rng).value
        return noisy, {"model": "m", "accuracy": noisy}

    release = random_stopping(
        candidate, event=LaplaceEvent(1.0), stop_probability=0.5, rng=seeded(3)
    )
    score, output = release.value
    assert output["accuracy"] == score
    assert release.guarantee == dp.PureDP(3.0)


def test_stop_probability_one_runs_once() -> None:
    calls = []

    def candidate(rng):
        calls.append(1)
        return 1.0, "only"

    release = random_stopping(candidate, event=PureEvent(1.0), stop_probability=1.0, rng=seeded(4))
    assert calls == [1] and release.value == Selected(1.0, "only")
    assert release.event == RepeatAndSelectEvent(PureEvent(1.0), 1.0, 1.0)


def test_max_draws_caps_the_run() -> None:
    calls = []

    def candidate(rng):
        calls.append(1)
        return float(len(calls)), None

    random_stopping(
        candidate, event=PureEvent(1.0), stop_probability=1e-9, max_draws=5, rng=seeded(5)
    )
    assert len(calls) == 5
    calls.clear()
    release = thresholding(
        candidate,
        event=PureEvent(1.0),
        threshold=100.0,
        stop_probability=1e-9,
        max_draws=7,
        rng=seeded(5),
    )
    assert len(calls) == 7 and release.value is None
    assert release.event == RepeatedEvent(PureEvent(1.0), 7)  # T < 1 + 1/(e gamma)


def test_capped_thresholding_event() -> None:
    event = thresholding_event(dp.PureDP(1.0), stop_probability=0.1, max_draws=100)
    assert event == PureEvent(pure_epsilon(event))
    assert 2.0 + 2 * math.exp(-10) <= pure_epsilon(event) <= 2.0 + 2.1 * math.exp(-10)


def test_non_pure_candidates() -> None:
    gaussian = GaussianEvent(2.0)
    with pytest.raises(UnsupportedEvent, match="max_draws"):
        thresholding_event(gaussian, stop_probability=0.1)
    assert thresholding_event(gaussian, stop_probability=0.1, max_draws=5) == RepeatedEvent(
        gaussian, 5
    )

    def candidate(rng):
        return float(dp.gaussian(0.0, rho=0.125, sensitivity=1, rng=rng).value), None

    capped = random_stopping(
        candidate, event=gaussian, stop_probability=0.5, max_draws=4, rng=seeded(6)
    )
    assert capped.event == RepeatedEvent(gaussian, 4)
    assert capped.guarantee == dp.ZCDP(0.5)
    with pytest.raises(UnsupportedEvent, match="delta"):
        random_stopping(candidate, event=gaussian, stop_probability=0.5, rng=seeded(6))
    # With delta, the guarantee comes from the RDP accountant once it supports the event.
    accountant = dp.accounting.RDPAccountant()
    if accountant.supports(RepeatAndSelectEvent(gaussian, 2.0, 1.0)):
        release = random_stopping(
            candidate, event=gaussian, stop_probability=0.5, delta=1e-6, rng=seeded(6)
        )
        assert isinstance(release.guarantee, dp.ApproxDP) and release.guarantee.delta == 1e-6
    else:
        with pytest.raises(UnsupportedEvent):
            random_stopping(candidate, event=gaussian, stop_probability=0.5, delta=1e-6)


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, math.nan, math.inf, True, "0.5", None], ids=repr)
@pytest.mark.parametrize("function", [random_stopping, thresholding])
def test_rejects_bad_stop_probability(function, bad) -> None:
    kwargs = {"threshold": 0.0} if function is thresholding else {}
    with pytest.raises(InvalidParameter, match="stop_probability"):
        function(lambda rng: (1.0, None), event=PureEvent(1.0), stop_probability=bad, **kwargs)
    with pytest.raises(InvalidParameter, match="stop_probability"):
        random_stopping_event(dp.PureDP(1.0), stop_probability=bad)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"], ids=repr)
def test_rejects_bad_max_draws(bad) -> None:
    with pytest.raises(InvalidParameter, match="max_draws"):
        random_stopping(
            lambda rng: (1.0, None), event=PureEvent(1.0), stop_probability=0.5, max_draws=bad
        )


def test_rejects_bad_candidates() -> None:
    with pytest.raises(InvalidParameter, match="declared with its event"):
        random_stopping(lambda rng: (1.0, None), stop_probability=0.5)
    with pytest.raises(InvalidParameter, match="event"):
        random_stopping(lambda rng: (1.0, None), event=1.0, stop_probability=0.5)
    with pytest.raises(InvalidParameter, match="from_mechanism"):
        random_stopping(dp.Laplace.calibrate(epsilon=1.0), stop_probability=0.5)
    with pytest.raises(InvalidParameter, match="candidate"):
        random_stopping(3.0, event=PureEvent(1.0), stop_probability=0.5)
    with pytest.raises(InvalidParameter, match="sequence of Candidate"):
        random_stopping([1.0, 2.0], stop_probability=0.5)
    candidate = Candidate(lambda rng: (1.0, None), PureEvent(1.0))
    with pytest.raises(InvalidParameter, match="own event"):
        random_stopping(candidate, event=PureEvent(1.0), stop_probability=0.5)
    with pytest.raises(InvalidParameter, match="function"):
        Candidate("not callable", PureEvent(1.0))
    with pytest.raises(InvalidParameter, match="mechanism"):
        Candidate.from_mechanism("laplace", 1.0)
    with pytest.raises(dp.DataError):
        Candidate.from_mechanism(dp.Laplace.calibrate(epsilon=1.0), math.nan)
    with pytest.raises(InvalidParameter, match="threshold"):
        thresholding(candidate, threshold=math.nan, stop_probability=0.5)
    with pytest.raises(InvalidParameter):
        random_stopping_event("epsilon=1", stop_probability=0.5)


@pytest.mark.parametrize(
    "score", [math.nan, math.inf, -math.inf, "high", None, True, np.float64("nan")], ids=repr
)
@pytest.mark.parametrize("function", [random_stopping, thresholding])
def test_bad_scores_stop_the_run_and_are_charged(function, score) -> None:
    kwargs = {"threshold": 0.0} if function is thresholding else {}
    with pytest.raises(CandidateFailed, match="score") as info:
        function(
            lambda rng: (score, None),
            event=PureEvent(1.0),
            stop_probability=0.5,
            rng=seeded(8),
            **kwargs,
        )
    expected = (random_stopping_event if function is random_stopping else thresholding_event)(
        PureEvent(1.0), stop_probability=0.5
    )
    assert info.value.event == expected
    assert isinstance(info.value, dp.DPError)


@pytest.mark.parametrize("function", [random_stopping, thresholding])
def test_a_candidate_that_raises_is_charged_and_reported(function) -> None:
    calls = []

    def candidate(rng):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("training diverged")
        return -1.0, None

    kwargs = {"threshold": 0.0} if function is thresholding else {}
    with pytest.raises(CandidateFailed, match="RuntimeError") as info:
        function(candidate, event=PureEvent(0.5), stop_probability=1e-9, rng=seeded(9), **kwargs)
    assert len(calls) == 3
    assert isinstance(info.value.__cause__, RuntimeError)
    # The failure is the selection's output: the whole selection's cost, not 3 draws'.
    if function is random_stopping:
        assert info.value.guarantee == dp.PureDP(1.5)
        assert info.value.event == random_stopping_event(dp.PureDP(0.5), stop_probability=1e-9)
    else:
        assert info.value.guarantee == dp.PureDP(1.0)
    assert "3" not in str(info.value).split("(")[0]  # the number of draws is not reported
    # Wrong return shapes and mismatched release events are failures of the draw too.
    with pytest.raises(CandidateFailed, match="score, output"):
        function(lambda rng: 1.0, event=PureEvent(0.5), stop_probability=0.5, **kwargs)
    laplace = dp.Laplace.calibrate(epsilon=1.0)
    with pytest.raises(CandidateFailed, match="declared event"):
        function(
            lambda rng: laplace.release(0.0, rng=rng),
            event=PureEvent(0.5),
            stop_probability=0.5,
            **kwargs,
        )


# --- a set of candidates (LT19's Q: one drawn uniformly per run) ---------------------------


def test_a_candidate_set_draws_one_uniformly() -> None:
    settings = [rr_candidate(1.0, 4, 3), rr_candidate(1.0, 4, 0)]
    rng = seeded(41)
    releases = [random_stopping(settings, stop_probability=1.0, rng=rng) for _ in range(2000)]
    indices = [r.value.output[0] for r in releases]
    assert_pmf(indices, {0: 0.5, 1: 0.5}, alpha=ALPHA)
    assert all(r.value.score == r.value.output[1][0] for r in releases)
    assert releases[0].event == RepeatAndSelectEvent(settings[0].event, 1.0, 1.0)
    # The best of several runs favours the candidate with the higher scores.
    best = [
        random_stopping(settings, stop_probability=0.2, rng=rng).value.output[0] for _ in range(300)
    ]
    assert sum(i == 0 for i in best) > 165  # expected about 192
    # Events: a mixture is as private as its least private part.
    mixed = Candidate.uniform(
        [
            Candidate.from_mechanism(dp.Laplace.calibrate(epsilon=1.0), 0.0),
            Candidate.from_mechanism(dp.Laplace.calibrate(epsilon=0.25), 0.0),
        ]
    )
    assert mixed.event == PureEvent(1.0)
    assert random_stopping_event([mixed, mixed], stop_probability=0.5) == RepeatAndSelectEvent(
        PureEvent(1.0), 2.0, 1.0
    )
    gaussian = Candidate(lambda rng: (0.0, None), GaussianEvent(1.0))
    assert Candidate.uniform([gaussian, mixed]).event == dp.accounting.ZCDPEvent(0.5)
    approx = Candidate(lambda rng: (0.0, None), ApproxEvent(1.0, 1e-6))
    with pytest.raises(UnsupportedEvent, match="common event"):
        Candidate.uniform([approx, mixed])


def test_rejects_an_empty_or_mixed_candidate_set() -> None:
    with pytest.raises(InvalidParameter, match="empty"):
        random_stopping([], stop_probability=0.5)
    with pytest.raises(InvalidParameter, match="empty"):
        thresholding((), threshold=0.0, stop_probability=0.5)
    with pytest.raises(InvalidParameter, match="sequence of Candidate"):
        random_stopping([lambda rng: (1.0, None)], stop_probability=0.5)
    with pytest.raises(InvalidParameter, match="not event="):
        random_stopping(
            [Candidate(lambda rng: (1.0, None), PureEvent(1.0))],
            event=PureEvent(1.0),
            stop_probability=0.5,
        )
    with pytest.raises(InvalidParameter, match="candidates"):
        Candidate.uniform("ab")


def test_thresholding_of_an_rdp_only_candidate_states_approx_dp_with_delta() -> None:
    sampled = dp.accounting.PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    if dp.accounting.zcdp_rho(sampled) is not None:
        pytest.skip("the subsampled Gaussian has a zCDP bound here")
    candidate = Candidate(lambda rng: (0.0, None), sampled)
    with pytest.raises(UnsupportedEvent, match="delta"):
        thresholding(candidate, threshold=1.0, stop_probability=0.5, max_draws=3)
    release = thresholding(
        candidate, threshold=1.0, stop_probability=0.5, max_draws=3, delta=1e-6, rng=seeded(2)
    )
    assert release.event == RepeatedEvent(sampled, 3)
    assert isinstance(release.guarantee, dp.ApproxDP) and release.guarantee.delta == 1e-6


# --- other laws of the number of draws (Papernot & Steinke 2022) ---------------------------


def k_parameter(law: Repetitions) -> float:
    """The sampled gamma (exact for the geometric law)."""
    if law.stop is not None:
        return float(law.stop)
    assert law.gamma is not None
    return law.gamma


def k_pmf(law: Repetitions, k: np.ndarray) -> np.ndarray:
    """P[K = k], from scipy's laws (independent of the sampler's arithmetic)."""
    k = np.asarray(k)
    if law.gamma is None:
        return stats.poisson(law.mean).pmf(k)
    gamma = k_parameter(law)
    if gamma == 1.0:
        return (k == 1).astype(float)
    if law.shape == 0:
        return np.where(k >= 1, stats.logser(1 - gamma).pmf(np.maximum(k, 1)), 0.0)
    zero = gamma**law.shape  # P[NegBin = 0], conditioned away
    return np.where(k >= 1, stats.nbinom(law.shape, gamma).pmf(k) / (1 - zero), 0.0)


def k_pgf(law: Repetitions, z: np.ndarray) -> np.ndarray:
    """E[z^K]."""
    z = np.asarray(z, dtype=float)
    if law.gamma is None:
        return np.exp(law.mean * (z - 1))
    gamma = k_parameter(law)
    if gamma == 1.0:
        return z
    q = 1 - gamma
    if law.shape == 0:
        return np.log1p(-q * z) / math.log(gamma)
    eta = law.shape
    return ((1 - q * z) ** -eta - 1) / (gamma**-eta - 1)


def selection_law(pmf: np.ndarray, law: Repetitions) -> np.ndarray:
    """Law of the released outcome (outcome i scores i), then None (K = 0) last."""
    below_or_equal = np.cumsum(pmf)
    below = below_or_equal - pmf
    out = k_pgf(law, below_or_equal) - k_pgf(law, below)
    return np.append(out, k_pgf(law, np.zeros(1)))


K_LAWS = [
    ("geometric", 1.0, 4.0),
    ("negative_binomial", 0.5, 4.0),
    ("negative_binomial", 2.5, 6.0),
    ("negative_binomial", 3.0, 2.0),
    ("logarithmic", 0.0, 5.0),
    ("negative_binomial", 0.5, 200.0),
    ("poisson", math.inf, 3.5),
]


@pytest.mark.parametrize(("name", "shape", "mean"), K_LAWS)
def test_the_number_of_draws_follows_its_law(name: str, shape: float, mean: float) -> None:
    law = Repetitions.of(name, mean, shape)
    rng = seeded(21)
    draws = np.array([law.sample(rng) for _ in range(4000)])
    assert (draws >= 1).all() or name == "poisson"
    assert_pmf(draws, lambda k: k_pmf(law, k), alpha=ALPHA)
    # Power: the same law with a mean 30% larger is rejected on the same draws (for the
    # heavy tail at mean 200, where that barely moves the bulk: the logarithmic law).
    wrong = (
        Repetitions.of(name, 1.3 * mean, shape)
        if mean < 100
        else Repetitions.of("logarithmic", mean, 0.0)
    )
    with pytest.raises(AssertionError):
        assert_pmf(draws, lambda k: k_pmf(wrong, k), alpha=ALPHA)


@pytest.mark.parametrize("shape", [0.0, 1e-9, 0.1, 0.5, 1.0, 2.0, 7.5])
@pytest.mark.parametrize("mean", [1.0, 1.0001, 1.5, 3.0, 10.0, 1e3, 1e6])
def test_the_sampled_law_is_covered_by_the_accountant(shape: float, mean: float) -> None:
    law = Repetitions.of("negative_binomial", mean, shape)
    gamma = k_parameter(law)
    # The accountant's gamma is no larger, and the sampled mean no larger than the event's
    # (PS22 Thm 2's bound grows in both log(1/gamma) and E[K]).
    if shape == 1.0:  # geometric: 1/mean exactly
        assert law.stop == 1 / Fraction(mean) and gamma <= 1 / mean
    elif mean > 1.0:
        assert gamma >= tnb_gamma(shape, mean)
        assert tnb_mean(gamma, shape) <= mean * (1 - 1e-11)
        assert tnb_mean(gamma, shape) >= mean * (1 - (1 + shape) * 1e-7)
    else:
        assert gamma == 1.0
    assert random_stopping_event(
        dp.PureDP(1.0), repetitions="negative_binomial", shape=shape, mean=mean
    ) == RepeatAndSelectEvent(PureEvent(1.0), mean, shape)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 2.0])
@pytest.mark.parametrize("shape", [0.0, 0.25, 0.5, 2.0])
@pytest.mark.parametrize("mean", [1.5, 5.0, 50.0])
def test_truncated_negative_binomial_is_2_plus_eta_epsilon_dp(
    epsilon: float, shape: float, mean: float
) -> None:
    event = random_stopping_event(
        dp.PureDP(epsilon), repetitions="negative_binomial", shape=shape, mean=mean
    )
    claimed = pure_epsilon(event)
    assert claimed is not None and claimed >= (2 + shape) * epsilon
    assert claimed == pytest.approx((2 + shape) * epsilon, rel=1e-12)
    law = Repetitions.of("negative_binomial", mean, shape)
    worst = max(
        max_log_ratio(selection_law(p, law)[:-1], selection_law(q, law)[:-1])
        for p, q in dp_pairs(epsilon, seed=int(10 * mean + 100 * shape))
    )
    assert worst <= claimed * (1 + 1e-9)
    if mean >= 5.0:
        # Planted bug: charging the candidate's epsilon for the whole selection is false.
        assert worst > epsilon * 1.2


@pytest.mark.parametrize("mean", [1.0, 3.0, 20.0])
def test_poisson_meets_its_rdp_bound_exactly(mean: float) -> None:
    epsilon = 1.0
    event = random_stopping_event(dp.PureDP(epsilon), repetitions="poisson", mean=mean)
    assert event == RepeatAndSelectEvent(PureEvent(epsilon), mean, math.inf)
    assert pure_epsilon(event) is None  # no pure-DP bound for Poisson
    curve = dp.accounting.RDPAccountant().compose(event).guarantee
    law = Repetitions.of("poisson", mean, math.inf)
    # The accountant's orders up to 64, as a column: every order's divergence in one
    # logsumexp per pair (one row per order; ~240 orders, and scipy's logsumexp costs
    # ~1 ms a call), with the pair's log-laws taken once instead of once per order.
    checked = list(
        itertools.takewhile(
            lambda pair: pair[0] <= 64, zip(curve.orders, curve.epsilons, strict=True)
        )
    )
    orders = np.array([order for order, _ in checked])[:, None]
    bounds = np.array([bound for _, bound in checked])
    for p, q in dp_pairs(epsilon, seed=7)[:40]:
        log_a, log_b = np.log(selection_law(p, law)), np.log(selection_law(q, law))
        terms = orders * log_a + (1 - orders) * log_b
        divergences = special.logsumexp(terms, axis=1) / (orders[:, 0] - 1)
        above = divergences > bounds * (1 + 1e-9) + 1e-12
        assert not above.any(), (orders[above, 0], divergences[above], bounds[above])


@pytest.mark.parametrize(("name", "shape"), [("logarithmic", None), ("poisson", None)])
def test_random_stopping_with_other_laws_samples_the_exact_law(name: str, shape) -> None:
    candidate = rr_candidate(1.0, 4, 1)
    rng = seeded(13)
    delta = 1e-6 if name == "poisson" else None
    outcomes = []
    for _ in range(3000):
        value = random_stopping(
            candidate, repetitions=name, mean=2.5, shape=shape, delta=delta, rng=rng
        ).value
        outcomes.append(4 if value is None else int(value.output[0]))
    law = selection_law(rr_law(1.0, 4, 1), Repetitions.of(name, 2.5, 0.0))
    assert_pmf(outcomes, dict(enumerate(law)), alpha=ALPHA)


def test_other_laws_carry_their_events_and_guarantees() -> None:
    candidate = rr_candidate(0.5, 3, 0)
    log = random_stopping(candidate, repetitions="logarithmic", mean=10.0, rng=seeded(1))
    assert log.event == RepeatAndSelectEvent(candidate.event, 10.0, 0.0)
    assert log.guarantee == dp.PureDP(1.0) and log.error is None
    half = random_stopping(
        candidate, repetitions="negative_binomial", shape=0.5, mean=10.0, rng=seeded(1)
    )
    assert half.event == RepeatAndSelectEvent(candidate.event, 10.0, 0.5)
    assert half.guarantee == dp.PureDP(1.25)
    # The geometric law by its mean: the same event as stop_probability = 1/mean.
    geometric = random_stopping(candidate, mean=4.0, rng=seeded(1))
    assert geometric.event == random_stopping_event(candidate, stop_probability=0.25)
    assert geometric.guarantee == dp.PureDP(1.5)
    assert isinstance(geometric.error, FailureBound)
    same = random_stopping(
        candidate, repetitions="negative_binomial", shape=1.0, mean=4.0, rng=seeded(1)
    )
    assert same.event == geometric.event
    # Poisson: RDP only, so delta= is required; K = 0 releases None.
    with pytest.raises(UnsupportedEvent, match="delta"):
        random_stopping(candidate, repetitions="poisson", mean=3.0, rng=seeded(1))
    rng = seeded(2)
    values = [
        random_stopping(candidate, repetitions="poisson", mean=1.0, delta=1e-6, rng=rng)
        for _ in range(40)
    ]
    assert any(v.value is None for v in values) and any(v.value is not None for v in values)
    assert all(isinstance(v.guarantee, dp.ApproxDP) for v in values)
    assert values[0].event == RepeatAndSelectEvent(candidate.event, 1.0, math.inf)


def test_a_failing_draw_under_another_law_is_charged() -> None:
    def fragile(rng):
        raise RuntimeError("diverged")

    with pytest.raises(CandidateFailed) as info:
        random_stopping(
            fragile, event=PureEvent(1.0), repetitions="logarithmic", mean=3.0, rng=seeded(3)
        )
    assert info.value.event == RepeatAndSelectEvent(PureEvent(1.0), 3.0, 0.0)
    assert info.value.guarantee == dp.PureDP(2.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"repetitions": "negative_binomial", "shape": -0.5, "mean": 3.0},
        {"repetitions": "negative_binomial", "shape": math.nan, "mean": 3.0},
        {"repetitions": "negative_binomial", "shape": math.inf, "mean": 3.0},
        {"repetitions": "negative_binomial", "shape": 1e-12, "mean": 3.0},
        {"repetitions": "negative_binomial", "shape": "1", "mean": 3.0},
        {"repetitions": "negative_binomial", "mean": 3.0},
        {"repetitions": "negative_binomial", "shape": 0.5},
        {"repetitions": "negative_binomial", "shape": 0.5, "mean": 0.5},
        {"repetitions": "logarithmic", "mean": math.nan},
        {"repetitions": "logarithmic", "mean": math.inf},
        {"repetitions": "logarithmic", "mean": 0.99},
        {"repetitions": "logarithmic", "mean": 3.0, "shape": 0.5},
        {"repetitions": "poisson", "mean": 0.5},
        {"repetitions": "poisson", "mean": 3.0, "shape": 1.0},
        {"repetitions": "poisson", "stop_probability": 0.5},
        {"repetitions": "logarithmic", "mean": 3.0, "stop_probability": 0.5},
        {"repetitions": "logarithmic", "mean": 3.0, "max_draws": 10},
        {"repetitions": "geometric", "mean": 3.0, "stop_probability": 0.5},
        {"repetitions": "geometric", "mean": 3.0, "shape": 2.0},
        {"repetitions": "geometric", "mean": 0.0},
        {"repetitions": "binomial", "mean": 3.0},
        {"repetitions": None, "mean": 3.0},
    ],
    ids=repr,
)
def test_rejects_bad_laws(kwargs) -> None:
    with pytest.raises(InvalidParameter):
        random_stopping(lambda rng: (1.0, None), event=PureEvent(1.0), **kwargs)
    with pytest.raises(InvalidParameter):
        random_stopping_event(dp.PureDP(1.0), **kwargs)


@pytest.mark.parametrize(("name", "shape", "mean"), [K_LAWS[1], K_LAWS[4], K_LAWS[6]])
def test_the_exact_sampler_refines_when_undecided(monkeypatch, name, shape, mean) -> None:
    """With a 2-bit start nearly every draw refines its precision; the law is unchanged."""
    from dpkit.selection import _repetitions

    monkeypatch.setattr(_repetitions, "_FIRST_BITS", 2)
    law = Repetitions.of(name, mean, shape)
    rng = seeded(22)
    draws = np.array([law.sample(rng) for _ in range(3000)])
    assert_pmf(draws, lambda k: k_pmf(law, k), alpha=ALPHA)


def test_delta_is_used_for_a_capped_zcdp_candidate() -> None:
    # Issue 33, item 4: with a cap the run's event is the composition of T zCDP draws, and
    # delta= was silently ignored (a ZCDP guarantee came back). It now states the
    # (epsilon, delta) guarantee that composition implies; without delta, the zCDP one.
    from dpkit.accounting import ZCDPEvent

    def candidate(rng: object) -> tuple[float, int]:
        return 0.5, 1

    options = {"event": ZCDPEvent(0.1), "stop_probability": 0.3, "max_draws": 10, "rng": 1}
    with pytest.warns(dp.InsecureRandomWarning):
        plain = random_stopping(candidate, **options)  # type: ignore[arg-type]
        asked = random_stopping(candidate, delta=1e-6, **options)  # type: ignore[arg-type]
    assert plain.guarantee == dp.ZCDP(1.0000000000000002)  # 10 x 0.1, rounded up
    assert asked.guarantee == dp.ZCDP(1.0000000000000002).to_approx(1e-6)
    assert isinstance(asked.guarantee, dp.ApproxDP) and asked.guarantee.delta == 1e-6
