"""AboveThreshold (sparse vector): validation, calibration, offline and online runs."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting.events import SparseVectorEvent
from dpkit.selection import SparseVector, SparseVectorStream, _above, sparse_vector
from dpkit.testing import check_mechanism, seeded


def test_contract() -> None:
    check_mechanism(SparseVector(epsilon=1.0, threshold=5.0), [1.0, 3.0, 9.0, 2.0])


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, True], ids=repr)
def test_rejects_bad_epsilon(bad) -> None:
    with pytest.raises(dp.InvalidParameter, match="epsilon"):
        SparseVector(epsilon=bad, threshold=0.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 2.0**1001, "1", None], ids=repr)
def test_rejects_bad_threshold(bad) -> None:
    with pytest.raises(dp.InvalidParameter, match="threshold"):
        SparseVector(epsilon=1.0, threshold=bad)


def test_rejects_absurd_noise_scales() -> None:
    with pytest.raises(dp.InvalidParameter, match="2\\^1000"):
        SparseVector(epsilon=1e-300, threshold=0.0, sensitivity=1e10)


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ([], "empty"),
        ([1.0, math.nan], "NaN"),
        ([math.inf], "infinite"),
        (["x"], "numbers"),
        ([[1.0]], "1-dimensional"),
    ],
    ids=["empty", "nan", "inf", "strings", "2d"],
)
def test_rejects_bad_answers(answers, message) -> None:
    with pytest.raises(dp.DataError, match=message):
        SparseVector(epsilon=1.0, threshold=0.0).release(answers, rng=seeded(0))


@pytest.mark.parametrize(
    ("epsilon", "sensitivity", "monotonic", "threshold_scale", "query_scale"),
    [
        (1.0, 1.0, False, Fraction(2), Fraction(4)),
        (1.0, 1.0, True, Fraction(2), Fraction(2)),
        (0.3, 0.7, False, 2 * Fraction(0.7) / Fraction(0.3), 4 * Fraction(0.7) / Fraction(0.3)),
    ],
)
def test_scales_are_rounded_up(
    epsilon, sensitivity, monotonic, threshold_scale, query_scale
) -> None:
    mechanism = SparseVector(
        epsilon=epsilon, threshold=0.0, sensitivity=sensitivity, monotonic=monotonic
    )
    assert Fraction(mechanism.threshold_scale) >= threshold_scale
    assert Fraction(math.nextafter(mechanism.threshold_scale, 0)) < threshold_scale
    assert Fraction(mechanism.query_scale) >= query_scale
    assert Fraction(math.nextafter(mechanism.query_scale, 0)) < query_scale


def test_event_and_guarantee() -> None:
    mechanism = SparseVector(epsilon=0.5, threshold=1.0, monotonic=True)
    assert mechanism.event == SparseVectorEvent(0.5)
    assert mechanism.guarantee == dp.PureDP(0.5)


def test_clear_cases() -> None:
    # Gaps of 10^6 noise scales: the outcome is certain for any practical purpose.
    mechanism = SparseVector(epsilon=1.0, threshold=0.0)
    assert mechanism.release([-1e7] * 50, rng=seeded(1)).value is None
    assert mechanism.release([-1e7, -1e7, 1e7, 1e7], rng=seeded(2)).value == 2
    assert mechanism.release([1e7], rng=seeded(3)).value == 0
    # Answers beyond 2^1000 are clipped, not turned into inf - inf.
    assert mechanism.release([-1.7e308, 1.7e308], rng=seeded(4)).value == 1


def test_long_runs_cross_chunks() -> None:
    answers = np.full(5000, -1e7)
    answers[4321] = 1e7
    mechanism = SparseVector(epsilon=1.0, threshold=0.0)
    assert mechanism.release(answers, rng=seeded(5)).value == 4321


def test_wrapper() -> None:
    release = sparse_vector([0.0, 100.0], epsilon=1.0, threshold=50.0, rng=seeded(6))
    assert release.value == 1
    assert release.error is None and release.mechanism == "SparseVector"
    assert release.event == SparseVectorEvent(1.0)
    assert release == SparseVector(epsilon=1.0, threshold=50.0).release([0.0, 100.0], rng=seeded(6))


def test_stream_halts_after_the_first_above() -> None:
    stream = SparseVector(epsilon=1.0, threshold=0.0).stream(rng=seeded(7))
    assert isinstance(stream, SparseVectorStream) and stream.secure is False
    assert [stream.query(-1e7) for _ in range(3)] == [False, False, False]
    assert not stream.halted and stream.index is None and stream.answered == 3
    assert stream.query(1e7) is True
    assert stream.halted and stream.index == 3 and stream.answered == 4
    assert stream.event == SparseVectorEvent(1.0) and stream.guarantee == dp.PureDP(1.0)
    assert "halted=True" in repr(stream)
    with pytest.raises(dp.BudgetExceeded, match="halted"):
        stream.query(0.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, "x", [1.0, 2.0]], ids=repr)
def test_stream_rejects_bad_answers(bad) -> None:
    stream = SparseVector(epsilon=1.0, threshold=0.0).stream(rng=seeded(8))
    with pytest.raises(dp.DataError):
        stream.query(bad)
    assert stream.answered == 0


def test_stream_and_offline_use_the_same_draws() -> None:
    answers = [0.5, -1.0, 2.0, 1.0, 3.0, 0.0]
    mechanism = SparseVector(epsilon=2.0, threshold=1.0)
    for seed in range(20):
        offline = mechanism.release(answers, rng=seeded(seed)).value
        stream = mechanism.stream(rng=seeded(seed))
        online = None
        for i, answer in enumerate(answers):
            if stream.query(answer):
                online = i
                break
        # Both draw the threshold first, then one word per query in order; offline
        # draws its first 64 words at once, which is the same stream of bits.
        assert online == offline


def test_accuracy() -> None:
    mechanism = SparseVector(epsilon=1.0, threshold=0.0)
    beta, k = 0.05, 100
    expected = 2 * math.log(2 / beta) + 4 * math.log(2 * k / beta)
    assert mechanism.accuracy(k, confidence=1 - beta) == pytest.approx(expected, rel=1e-9)
    assert SparseVector(epsilon=1.0, threshold=0.0, monotonic=True).accuracy(k) < (
        mechanism.accuracy(k)
    )
    with pytest.raises(dp.InvalidParameter):
        mechanism.accuracy(0)


def test_exact_comparison_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    # With a useless float filter every comparison goes through the decimal path.
    monkeypatch.setattr(_above, "FLOAT_MARGIN", 10.0)
    mechanism = SparseVector(epsilon=1.0, threshold=0.0)
    assert mechanism.release([-1e3, -1e3, 1e3], rng=seeded(9)).value == 2
    first = [mechanism.release([0.0, 1.0, -1.0, 2.0], rng=seeded(s)).value for s in range(20)]
    again = [mechanism.release([0.0, 1.0, -1.0, 2.0], rng=seeded(s)).value for s in range(20)]
    assert first == again and len(set(first)) > 1


def test_exact_comparison_gives_up_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_above, "FLOAT_MARGIN", 10.0)
    monkeypatch.setattr(_above, "_MAX_ROUNDS", 0)
    with pytest.raises(AssertionError, match="bug in dpkit"):
        SparseVector(epsilon=1.0, threshold=0.0).release([0.0], rng=seeded(0))


def test_threshold_in_an_end_interval_is_handled_and_tightened() -> None:
    # U_0 in [0, 2^-53): the threshold noise is unbounded below at 53 bits, so the
    # float filter cannot decide anything until the exact layer refines U_0.
    state = _above.NoisyThreshold(0.0, 1.0, 2.0, seeded(10))
    state._uniform = _above._Uniform(0)
    state._noise_low, state._noise_high = -math.inf, -36.0
    # T + X_0 is below -36, far below every answer: the first query is above.
    assert state.first_above(np.array([-5.0, 3.0])) == 0
    assert math.isfinite(state._noise_low) and state._noise_low < -36.0
    # The filter now decides on its own: a query far above is settled in float.
    above, below = state._float_decisions(np.array([100.0]), np.array([2**52], dtype=np.uint64))
    assert above[0] and not below[0]
