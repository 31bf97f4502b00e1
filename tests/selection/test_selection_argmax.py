"""The exact noisy-argmax engine: float layer against the exact layer, streaming, fallback."""

from __future__ import annotations

import decimal
import itertools
import math
from decimal import Decimal

import numpy as np
import pytest

from dpkit.noise._certified import FLOAT_MARGIN
from dpkit.selection import _argmax
from dpkit.testing import assert_binomial, seeded

KINDS = ("gumbel", "exponential", "laplace")
TWO53 = 2**53

# Prefix ends where the noise functions are hardest: both tails, the middle, and
# values next to powers of two.
EDGE_X = [0, 1, 2, 3, 1000, 2**26, 2**52 - 1, 2**52, 2**52 + 1, TWO53 - 2, TWO53 - 1, TWO53]


def exact_noise(kind: str, x: int) -> Decimal:
    with decimal.localcontext(_argmax.exact_context(60)):
        return _argmax.noise_exact(kind, Decimal(x) / Decimal(TWO53))


@pytest.mark.parametrize("kind", KINDS)
def test_float_noise_is_within_the_certified_margin(kind: str) -> None:
    # The float filter's correctness rests on |F_float - F| <= FLOAT_MARGIN (|F| + 1).
    rng = np.random.default_rng(5)
    xs = EDGE_X + [int(v) for v in rng.integers(0, TWO53, size=2000, dtype=np.int64)]
    with np.errstate(divide="ignore"):
        floats = _argmax.noise_at(kind, np.array(xs, dtype=np.float64))
    for x, value in zip(xs, floats, strict=True):
        exact = exact_noise(kind, x)
        if not exact.is_finite():
            assert value == float(exact), (kind, x)
            continue
        error = abs(Decimal(float(value)) - exact)
        # 2^-6 of the certified margin (8 ulps): the filter's slack is far larger than
        # the error of NumPy's log (observed: under 1 ulp here).
        assert error <= Decimal(FLOAT_MARGIN * 2**-6) * (abs(exact) + 1), (kind, x)


@pytest.mark.parametrize("kind", KINDS)
def test_noise_is_increasing_with_the_stated_ends(kind: str) -> None:
    values = [exact_noise(kind, x) for x in EDGE_X]
    assert all(a < b for a, b in itertools.pairwise(values))
    assert values[-1] == Decimal("Infinity")
    assert values[0] == (Decimal(0) if kind == "exponential" else Decimal("-Infinity"))


@pytest.mark.parametrize("kind", KINDS)
def test_fast_pass_equals_noise_at_upper_end(kind: str) -> None:
    # The in-place pass must compute exactly what the certified formula computes.
    rng = np.random.default_rng(6)
    prefixes = np.concatenate(
        (np.array(EDGE_X[:-1], dtype=np.uint64), rng.integers(0, TWO53, 500, dtype=np.uint64))
    )
    scaled = -rng.exponential(3.0, prefixes.size)
    out, work, scratch = np.empty((3, prefixes.size))
    with np.errstate(divide="ignore"):
        fast = _argmax._upper_values(kind, prefixes.copy(), scaled, out, work, scratch)
        reference = scaled + _argmax.noise_at(kind, prefixes.astype(np.float64) + 1.0)
    np.testing.assert_array_equal(fast, reference)


@pytest.mark.parametrize("kind", KINDS)
def test_float_bounds_contain_the_exact_interval(kind: str) -> None:
    rng = np.random.default_rng(7)
    prefixes = np.array(EDGE_X[:-1] + [int(v) for v in rng.integers(0, TWO53, 300)], np.uint64)
    scaled = -rng.exponential(5.0, prefixes.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        low, high = _argmax._float_bounds(kind, prefixes, scaled)
    for k, c, lo, hi in zip(prefixes, scaled, low, high, strict=True):
        exact_low = Decimal(float(c)) + exact_noise(kind, int(k))
        exact_high = Decimal(float(c)) + exact_noise(kind, int(k) + 1)
        assert Decimal(float(lo)) <= exact_low and exact_high <= Decimal(float(hi))


def test_single_candidate_needs_no_randomness() -> None:
    rng = seeded(0)
    before = rng.getrandbits(64)
    rng2 = seeded(0)
    assert _argmax.noisy_argmax("gumbel", np.array([4.0]), 0.5, rng2) == 0
    assert rng2.getrandbits(64) == before


@pytest.mark.parametrize("kind", KINDS)
def test_dominant_candidate_wins_at_any_position_and_chunking(kind: str) -> None:
    # Exercises the multi-chunk pool with a candidate whose win has probability
    # 1 - O(n e^-60): certain for any practical purpose.
    n = 1000
    for position in (0, 137, 511, 999):
        scores = np.zeros(n)
        scores[position] = 200.0
        for chunk in (7, 64, 100, 4096):
            got = _argmax.noisy_argmax(kind, scores, 0.5, seeded(position + chunk), chunk=chunk)
            assert got == position


def test_extreme_score_range_is_clamped_not_nan() -> None:
    # s_i - s_max overflows (c <= 1) or c (s_i - s_max) does (c > 1); either way the
    # clamped entries keep a valid upper end and the top score wins.
    scores = np.array([-1.7e308, 1.7e308, -1.7e308, 0.0, 1.6e308])
    for kind in KINDS:
        for c in (2.0**-800, 0.5, 1.0, 3.0):
            assert _argmax.noisy_argmax(kind, scores, c, seeded(1)) == 1
    many = np.full(300, -1.7e308)
    many[123] = 1.7e308
    for chunk in (65, 1000):
        assert _argmax.noisy_argmax("gumbel", many, 0.5, seeded(2), chunk=chunk) == 123


def test_huge_scores_keep_their_differences() -> None:
    # Shifting by s_max keeps differences exact: 1e15 + 1000 vs 1e15 is a 500-unit gap.
    scores = np.array([1e15, 1e15 + 1000.0, 1e15])
    for seed in range(20):
        assert _argmax.noisy_argmax("gumbel", scores, 0.5, seeded(seed)) == 1


def test_forced_fallback_is_deterministic_and_in_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_argmax, "FLOAT_MARGIN", 1.0)
    scores = np.array([0.0, 0.3, 0.3, 1.0])
    for kind in KINDS:
        first = [_argmax.noisy_argmax(kind, scores, 0.5, seeded(s)) for s in range(30)]
        again = [_argmax.noisy_argmax(kind, scores, 0.5, seeded(s)) for s in range(30)]
        assert first == again
        assert set(first) <= {0, 1, 2, 3} and len(set(first)) > 1


def test_refine_breaks_identical_prefixes_fairly() -> None:
    # Equal scores and the same 53-bit prefix: only the refined bits decide, and by
    # symmetry each wins with probability 1/2.
    rng = seeded(9)
    trials = 2000
    wins = sum(
        _argmax._refine("gumbel", 0.5, [1.0, 1.0], 1.0, [2**52 + 17, 2**52 + 17], rng)
        for _ in range(trials)
    )
    assert_binomial(wins, trials, 0.5)


def test_refine_gives_up_loudly_when_it_cannot_separate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_argmax, "_MAX_ROUNDS", 0)
    with pytest.raises(AssertionError, match="bug in dpkit"):
        _argmax._refine("gumbel", 0.5, [0.0, 0.0], 0.0, [5, 5], seeded(0))


def test_precision_grows_faster_than_the_bits_resolve() -> None:
    for bits in range(53 + 64, 53 + 64 * 200, 64):  # bits at each refinement round
        assert _argmax.precision_for(bits) - 6 > bits * math.log10(2) + 10
        assert _argmax.precision_for(bits + 64) - _argmax.precision_for(bits) > 64 * math.log10(2)
