"""Exact noisy argmax: ``argmax_i (c s_i + N_i)`` for i.i.d. Gumbel, exponential or Laplace noise.

Report-noisy-max mechanisms add independent noise to every score and release the
index of the largest noisy score. Done in floating point (``np.argmax(c*s + noise)``)
the released index is a function of rounded values: near-ties are broken by rounding
error, which is not the distribution the privacy proof is about. Here the argmax is
the one of the *real* numbers ``V_i = c (s_i - s_max) + F(U_i)``, where ``s_i`` are the
float scores taken as exact reals, ``c`` is a float taken as an exact real, ``U_i`` are
independent uniform reals in (0, 1) and ``F`` is the inverse CDF of the standard noise
(shifting every score by ``s_max`` does not change the argmax; it keeps the float
values small). Ties between the ``V_i`` have probability zero.

How (partially sampled random numbers, as in :mod:`dpkit.noise._certified`): every
``U_i`` starts as a 53-bit prefix, so ``V_i`` lies in the interval
``[c d_i + F(k 2^-53), c d_i + F((k+1) 2^-53)]`` (``F`` is increasing). Streaming over
chunks, a float64 pass computes the upper ends; a candidate can win only if its upper
end reaches ``L*``, the largest certified lower end seen so far, and a single
comparison against a threshold just below ``L*`` screens out all others. The few that
pass get certified float bounds (error margin ``FLOAT_MARGIN`` times the operands'
magnitude, as in the noise samplers), and a pool keeps those whose upper end still
reaches ``L*``. When more than one survives -- the two best noisy scores within
~10^-11 of each other, about once in 10^10 runs -- their uniforms are extended 64
random bits at a time and the bounds recomputed in :mod:`decimal` with correctly
rounded ``ln`` until one candidate's lower end is above every other's upper end.
The released index is therefore exactly the argmax of the real ``V_i``.

Noises, as increasing functions of a uniform ``u`` (so one code path serves all):

* ``"gumbel"``: ``F(u) = -ln(-ln u)`` (standard Gumbel; the argmax is the exponential
  mechanism, by the Gumbel-max trick);
* ``"exponential"``: ``F(u) = -ln(1 - u)`` (standard exponential; permute-and-flip);
* ``"laplace"``: ``F(u) = ln(2u)`` for ``u <= 1/2``, ``-ln(2 - 2u)`` above (standard Laplace).

Multiplicities (Gumbel only). With a positive integer ``n_i`` per candidate the argmax
is that of ``c s_i + ln(n_i) + G_i``: candidate ``i`` stands for ``n_i`` copies of
itself, each with its own Gumbel noise, and the largest of ``n_i`` independent
standard Gumbels is distributed as ``ln(n_i) + G`` (its CDF is
``exp(-e^-g)^n_i = exp(-e^-(g - ln n_i))``). So the released index has probability
``∝ n_i exp(c s_i)`` exactly. ``ln(n_i)`` is an exact real too: the float layer uses
``np.log`` (a few ulps) inside the same relative margin, with the magnitudes and the
screening slack enlarged by ``2 ln(n_i)``; the refinement layer adds the correctly
rounded :mod:`decimal` ``ln``.
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from dpkit.errors import InternalError
from dpkit.noise._certified import FLOAT_MARGIN, PREFIX_BITS
from dpkit.random import Random

__all__ = ["CHUNK", "NoiseKind", "noise_at", "noise_exact", "noisy_argmax"]

NoiseKind = Literal["gumbel", "exponential", "laplace"]
NOISE_KINDS: tuple[str, ...] = get_args(NoiseKind)

FloatArray = npt.NDArray[np.float64]
UIntArray = npt.NDArray[np.uint64]

#: Scores per streamed chunk: the float temporaries (a few times 512 KiB) stay in cache.
CHUNK = 1 << 16

_SHIFT = np.uint64(64 - PREFIX_BITS)
_H = 2.0**-PREFIX_BITS  # width of a prefix interval
_TWO53 = 2.0**PREFIX_BITS
_TWO52 = 2.0 ** (PREFIX_BITS - 1)
_HALF_H = 2.0 * _H  # laplace works with 2u = x 2^-52
_MAX = float(np.finfo(np.float64).max)
# |F| at any finite end of a 53-bit prefix interval is below 37 (F(2^-53) for the
# Laplace and Gumbel lower tails, F(1 - 2^-53) ~ 36.7 for the upper tails). So for a
# float value v = c d + F, |c d| + |F| + 1 <= |v| + 2 * 37 + 1 < |v| + 80.
_SCREEN_SLACK = 80.0
_EXTRA_BITS = 64
_MAX_ROUNDS = 200
#: Chunks up to this size skip the screening pass and certify every candidate.
_SMALL = 64


# ------------------------------------------------------------------------ float layer


def noise_at(kind: str, x: FloatArray) -> FloatArray:
    """``F(x 2^-53)`` in float64 for integer-valued ``x`` in ``[0, 2^53]``.

    ``x 2^-53``, ``2^53 - x`` and ``x 2^-52`` are exact, so the only errors are those
    of one or two ``log`` calls (a few ulps each): relative error ~2^-50 of ``|F|``,
    plus an absolute ~2^-50 from the inner ``log`` of the Gumbel. The ends map to
    ``+-inf`` exactly (``F(0)`` is ``-inf`` except for the exponential, where it is 0).
    Call it under ``np.errstate(divide="ignore")``: ``log(0)`` is expected.
    """
    if kind == "gumbel":
        result: FloatArray = -np.log(-np.log(x * _H))
    elif kind == "exponential":
        result = -np.log((_TWO53 - x) * _H)
    else:
        magnitude = np.log(np.minimum(x, _TWO53 - x) * _HALF_H)
        result = np.copysign(magnitude, x - _TWO52)
    return result


def _upper_values(
    kind: str,
    prefixes: UIntArray,
    scaled: FloatArray,
    out: FloatArray,
    work: FloatArray,
    scratch: FloatArray,
) -> FloatArray:
    """``out = scaled + F((k + 1) 2^-53)`` for the 53-bit ``prefixes`` k: the fast pass.

    The same arithmetic as :func:`noise_at` at ``x = k + 1``, written in place to keep
    the chunk's temporaries in cache (``work`` and ``scratch`` are scratch space).
    """
    if kind == "exponential":
        # 1 - (k + 1) 2^-53 = (2^53 - 1 - k) 2^-53, exact.
        np.subtract(_TWO53 - 1.0, prefixes, out=work)
        work *= _H
        np.log(work, out=work)
        return np.subtract(scaled, work, out=out)
    np.add(prefixes, 1.0, out=work)
    if kind == "gumbel":
        work *= _H
        np.log(work, out=work)
        np.negative(work, out=work)
        np.log(work, out=work)
        return np.subtract(scaled, work, out=out)
    np.subtract(work, _TWO52, out=out)  # its sign says which half of (0, 1)
    np.subtract(_TWO53, work, out=scratch)
    np.minimum(work, scratch, out=work)
    work *= _HALF_H
    np.log(work, out=work)
    np.copysign(work, out, out=work)
    return np.add(scaled, work, out=out)


def _float_bounds(
    kind: str,
    prefixes: UIntArray,
    scaled: FloatArray,
    floor: float = -math.inf,
    shift: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Certified float bounds ``lo <= V_i <= hi`` for the candidates given.

    ``scaled`` is the float ``c (s_i - s_max)``, within a relative 2^-52 of the real
    value (two correctly rounded operations), or, where it equals ``floor``, an upper
    bound on a real value that may be anywhere below it (see :func:`_stream`). With
    multiplicities, ``scaled`` also includes the float ``shift = ln(n_i)`` (a few ulps
    off), and ``|c (s_i - s_max)| <= |scaled| + shift``, so the error of the sum is
    within the margin times ``|scaled| + 2 shift + 1``.
    """
    x = prefixes.astype(np.float64)
    ends = noise_at(kind, np.concatenate((x, x + 1.0)))
    f_low, f_high = ends[: x.size], ends[x.size :]
    magnitude = np.abs(scaled) + 1.0
    if shift is not None:
        magnitude += 2.0 * shift
    low = scaled + f_low - FLOAT_MARGIN * (magnitude + np.abs(f_low))
    high = scaled + f_high + FLOAT_MARGIN * (magnitude + np.abs(f_high))
    low[scaled <= floor] = -math.inf
    return low, high


def _screen(best_low: float, slack: float = _SCREEN_SLACK) -> float:
    """A threshold ``t`` such that every candidate whose upper end can reach ``best_low``
    has its float upper value ``v >= t``.

    The float ``v`` is within ``FLOAT_MARGIN (|v| + 80)`` of the real upper end, so a
    candidate has ``v >= best_low - FLOAT_MARGIN (|v| + 80)``, which implies
    ``v >= best_low - 2 FLOAT_MARGIN (|best_low| + 80)``; the factor 3 absorbs the
    rounding of this very expression. With multiplicities the slack is
    ``80 + 2 max ln(n_i)`` (``|c d| <= |v| + ln n_i + |F|``).
    """
    if best_low == -math.inf:
        return -math.inf
    return best_low - 3.0 * FLOAT_MARGIN * (abs(best_low) + slack)


# ---------------------------------------------------------------------- exact layer


def noise_exact(kind: str, u: Decimal) -> Decimal:
    """``F(u)`` in the active :mod:`decimal` context (``ln`` is correctly rounded)."""
    if kind == "gumbel":
        return -(-u.ln()).ln()
    if kind == "exponential":
        return -(1 - u).ln()
    if u <= Decimal("0.5"):
        return (2 * u).ln()
    return -(2 - 2 * u).ln()


def exact_context(precision: int) -> decimal.Context:
    """A :mod:`decimal` context for the exact layer: wide exponents, infinities allowed."""
    context = decimal.Context(prec=precision, Emin=-999_999_999, Emax=999_999_999)
    for signal in (decimal.Overflow, decimal.DivisionByZero, decimal.InvalidOperation):
        context.traps[signal] = False
    return context


def uniform_ends(numerator: int, bits: int) -> tuple[Decimal, Decimal]:
    """Decimal ends of ``[numerator, numerator + 1) / 2^bits``, rounded outwards."""
    context = decimal.getcontext()
    denominator = Decimal(1 << bits)
    saved = context.rounding
    context.rounding = decimal.ROUND_FLOOR
    low = Decimal(numerator) / denominator
    context.rounding = decimal.ROUND_CEILING
    high = Decimal(numerator + 1) / denominator
    context.rounding = saved
    return low, high


def precision_for(bits: int) -> int:
    """Working precision once ``bits`` bits of a uniform are known.

    ``bits`` bits resolve ``0.301 bits`` digits; the precision, ``12 + 0.375 bits``, stays
    ahead of that (by 49 digits at the first refinement, 117 bits) and grows by 24
    digits per 64 bits, faster than the 19.3 digits those bits resolve. So the
    interval padding (relative ``10^(6 - precision)``) shrinks faster than the
    intervals do, and every refinement loop ends with probability 1.
    """
    return 12 + (3 * bits) // 8


def _refine(
    kind: str,
    coefficient: float,
    scores: list[float],
    s_max: float,
    prefixes: list[int],
    rng: Random,
    multiplicities: list[int] | None = None,
) -> int:
    """The position (in ``prefixes``) of the exact argmax among near-tied candidates."""
    c, top = Decimal(coefficient), Decimal(s_max)
    exact_scores = [Decimal(s) for s in scores]
    counts = multiplicities if multiplicities is not None else [1] * len(scores)
    numerators = list(prefixes)
    alive = list(range(len(prefixes)))
    bits = PREFIX_BITS
    for _ in range(_MAX_ROUNDS):
        bits += _EXTRA_BITS
        for i in alive:
            numerators[i] = (numerators[i] << _EXTRA_BITS) | rng.getrandbits(_EXTRA_BITS)
        precision = precision_for(bits)
        bounds: dict[int, tuple[Decimal, Decimal]] = {}
        with decimal.localcontext(exact_context(precision)):
            unit = Decimal(10) ** (6 - precision)
            for i in alive:
                # ln(n_i) correctly rounded; the padding covers it (2 ln n_i + ...).
                log_count = Decimal(counts[i]).ln() if counts[i] != 1 else Decimal(0)
                scaled = c * (exact_scores[i] - top) + log_count
                extra = abs(scaled) + 2 * log_count + 1
                u_low, u_high = uniform_ends(numerators[i], bits)
                f_low, f_high = noise_exact(kind, u_low), noise_exact(kind, u_high)
                low = scaled + f_low - (extra + abs(f_low)) * unit
                high = scaled + f_high + (extra + abs(f_high)) * unit
                bounds[i] = (low, high)
            best_low = max(low for low, _ in bounds.values())
        alive = [i for i in alive if bounds[i][1] >= best_low]
        if len(alive) == 1:
            return alive[0]
    raise InternalError("The exact argmax could not separate near-tied candidates.")


# ----------------------------------------------------------------------------- driver


class _Pool:
    """Candidates that may still win: global index, 53-bit prefix, scaled score, bounds."""

    def __init__(self) -> None:
        self.index = np.empty(0, dtype=np.int64)
        self.prefix = np.empty(0, dtype=np.uint64)
        self.low = np.empty(0, dtype=np.float64)
        self.high = np.empty(0, dtype=np.float64)

    def add(
        self, index: npt.NDArray[np.int64], prefix: UIntArray, low: FloatArray, high: FloatArray
    ) -> None:
        if self.index.size == 0:
            self.index, self.prefix, self.low, self.high = index, prefix, low, high
            return
        self.index = np.concatenate((self.index, index))
        self.prefix = np.concatenate((self.prefix, prefix))
        self.low = np.concatenate((self.low, low))
        self.high = np.concatenate((self.high, high))

    def prune(self, best_low: float) -> None:
        # A candidate whose upper end is below some other's lower end cannot win.
        keep = self.high >= best_low
        self.index, self.prefix = self.index[keep], self.prefix[keep]
        self.low, self.high = self.low[keep], self.high[keep]


def noisy_argmax(
    kind: str,
    scores: FloatArray,
    coefficient: float,
    rng: Random,
    *,
    chunk: int = CHUNK,
    multiplicity: npt.NDArray[np.int64] | None = None,
) -> int:
    """The exact ``argmax_i (coefficient * scores[i] + F(U_i))`` (see the module docstring).

    Parameters
    ----------
    kind:
        One of :data:`NOISE_KINDS`.
    scores:
        Finite float64 scores, one-dimensional and non-empty.
    coefficient:
        A positive float (taken as an exact real).
    rng:
        Source of the uniforms: 64 bits per score, streamed chunk by chunk, then 64
        more per near-tied candidate and refinement round.
    chunk:
        Scores per streamed chunk; the distribution of the result does not depend on it.
    multiplicity:
        Optional positive integers ``n_i`` below 2^53 (Gumbel only): the index is then
        drawn with probability ``∝ n_i exp(coefficient * scores[i])`` (module docstring).
    """
    n = scores.size
    if n == 1:
        return 0  # one candidate: no randomness needed, the output is fixed
    shift = None
    if multiplicity is not None:
        if kind != "gumbel" or multiplicity.shape != scores.shape:
            raise InternalError("Multiplicities need Gumbel noise and one per score.")
        if not (multiplicity >= 1).all() or not (multiplicity < 2**53).all():
            raise InternalError("Multiplicities must be integers in [1, 2^53).")
        shift = np.log(multiplicity.astype(np.float64))
    s_max, s_min = float(scores.max()), float(scores.min())
    # -inf (log 0) is expected; inf - inf never arises (see _float_bounds, _stream).
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        spread_overflows = not math.isfinite(coefficient * (s_max - s_min))
        pool = _stream(kind, scores, s_max, coefficient, spread_overflows, rng, chunk, shift)
    if pool.index.size == 1:
        return int(pool.index[0])
    if pool.index.size == 0:
        raise InternalError("The exact argmax lost every candidate.")
    winner = _refine(
        kind,
        coefficient,
        [float(scores[i]) for i in pool.index],
        s_max,
        [int(p) for p in pool.prefix],
        rng,
        None if multiplicity is None else [int(multiplicity[i]) for i in pool.index],
    )
    return int(pool.index[winner])


def _stream(
    kind: str,
    scores: FloatArray,
    s_max: float,
    coefficient: float,
    spread_overflows: bool,
    rng: Random,
    chunk: int,
    shift: FloatArray | None = None,
) -> _Pool:
    """One float pass over the scores: the pool of candidates that may still win."""
    n = scores.size
    slack = _SCREEN_SLACK if shift is None else _SCREEN_SLACK + 2.0 * float(shift.max())
    # When c (s_i - s_max) can overflow (to -inf, then -inf + inf = nan), clamp it from
    # below at `floor`, an upper bound on the real value of every overflowed entry:
    # either s_i - s_max overflowed, so the real value is below -c MAX, or the product
    # did, so it is below -MAX. A clamped entry keeps a valid upper end and gets the
    # lower end -inf; with c >= 2^-900 its upper end is below -2^123, out of the race.
    floor = -min(1.0, coefficient) * _MAX * (1.0 - 2.0**-50) if spread_overflows else -math.inf
    # Buffers reused by every chunk: fresh allocations would cost page faults.
    scaled_buffer, value_buffer, work_buffer, scratch_buffer = np.empty((4, min(chunk, n)))
    word_buffer = np.empty(min(chunk, n), dtype=np.uint64)
    pool = _Pool()
    best_low = -math.inf
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        # 53-bit prefixes from 64-bit words; Random.bytes read as words needs one
        # allocation fewer than Random.uint64.
        prefixes_all = word_buffer[:size]
        np.right_shift(np.frombuffer(rng.bytes(8 * size), dtype="<u8"), _SHIFT, out=prefixes_all)
        scaled = scaled_buffer[:size]
        np.subtract(scores[start : start + size], s_max, out=scaled)
        scaled *= coefficient
        if spread_overflows:
            np.maximum(scaled, floor, out=scaled)
        local_shift = None
        if shift is not None:
            local_shift = shift[start : start + size]
            scaled += local_shift
        if size <= _SMALL:
            # Few scores: certifying all of them is cheaper than screening.
            local = np.arange(size)
            prefixes = prefixes_all.copy()
        else:
            values = _upper_values(
                kind,
                prefixes_all,
                scaled,
                value_buffer[:size],
                work_buffer[:size],
                scratch_buffer[:size],
            )
            top = int(np.argmax(values))
            if not values[top] >= _screen(best_low, slack):
                continue  # nothing in this chunk can win
            # Certify the chunk's best first: its lower end raises the bar for the rest.
            top_low, _ = _float_bounds(
                kind,
                prefixes_all[top : top + 1],
                scaled[top : top + 1],
                floor,
                None if local_shift is None else local_shift[top : top + 1],
            )
            best_low = max(best_low, float(top_low[0]))
            local = np.flatnonzero(values >= _screen(best_low, slack))
            if local.size == 0:  # cannot happen (the top passes), but never index nothing
                continue
            prefixes = prefixes_all[local]
        shift_local = None if local_shift is None else local_shift[local]
        low, high = _float_bounds(kind, prefixes, scaled[local], floor, shift_local)
        best_low = max(best_low, float(low.max()))
        pool.add(local + start, prefixes, low, high)
        pool.prune(best_low)
    return pool
