"""Black-box auditing: a lower bound on epsilon from samples of M(x) and M(x').

The auditor draws outputs of the mechanism on a neighbouring pair, picks a test (a
region ``S`` of outputs: a threshold on the output, a region of a histogram, or a
threshold on a trained classifier's score, as in DP-Sniper), and turns the test's
error rates into a lower bound on epsilon with exact Clopper-Pearson bounds
(:mod:`dpkit.audit.bounds`).

Multiple testing. Picking the best of many regions on the same samples that then
estimate its error rates voids the confidence. Two honest ways are offered:

``correction="split"`` (default)
    The samples of each input are drawn in two independent batches. The *selection*
    batch chooses the region (every candidate threshold, both orientations); the
    *estimation* batch, drawn with fresh randomness, evaluates that one region. The
    chosen region is a function of the selection batch only, so conditionally on it
    the estimation counts are plain binomials and the bound holds at the stated
    confidence (the DP-Sniper procedure; Bichsel et al. 2021, Sec. 5).
``correction="bonferroni"``
    No split: a *fixed* list of candidate thresholds, given before any sample is
    drawn, is evaluated on all samples, each one-sided bound at level
    ``(1 - confidence) / (4 K)`` for ``K`` thresholds in both orientations (a union
    bound over ``2 K`` tests with two rates each).

Whatever the attack, the result is a lower bound on epsilon at the stated
confidence -- evidence against a privacy claim when it exceeds it, never a
certificate that the mechanism is private (a weak attack finds nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.audit.bounds import clopper_pearson_upper as _cp_upper
from dpkit.audit.bounds import epsilon_from_rates
from dpkit.errors import DataError, InvalidParameter
from dpkit.random import Random, RandomLike, as_random

__all__ = ["AuditOutputs", "AuditResult", "Mechanism", "ScoreFunction", "Trainer", "audit"]

FloatArray = npt.NDArray[np.float64]
#: A mechanism under audit: ``mechanism(x, n, rng)`` returns ``n`` independent outputs
#: on input ``x`` (first axis of length ``n``; 1-D, or 2-D for vector outputs).
Mechanism = Callable[[Any, int, Random], npt.ArrayLike]
#: Maps outputs (first axis ``n``) to ``n`` real scores; high means "looks like M(x)".
ScoreFunction = Callable[[npt.NDArray[Any]], npt.ArrayLike]
#: Trains a score function on selection outputs of M(x) and M(x') (DP-Sniper's classifier).
Trainer = Callable[[npt.NDArray[Any], npt.NDArray[Any]], ScoreFunction]
AttackName = Literal["threshold", "histogram"]

_EXACT_CANDIDATES = 4096  # below this many distinct scores, every one is a candidate
_QUANTILE_CANDIDATES = 2000
_EXTREME_CANDIDATES = 64  # order statistics at each end of each sample (rare regions)
_HISTOGRAM_BINS_1D = 256
_HISTOGRAM_BINS_PER_COLUMN = 16
_CATEGORICAL_MAX = 256


@dataclass(frozen=True, slots=True)
class AuditOutputs:
    """The estimation samples an audit's bound was computed from (``keep_outputs=True``).

    Attributes
    ----------
    x, x_prime:
        The outputs of M(x) and M(x') (first axis: one row per draw).
    scores_x, scores_x_prime:
        Their attack scores; the test's region is ``{score > threshold}``
        (for ``attack="threshold"`` the score is the output itself).
    """

    x: npt.NDArray[Any]
    x_prime: npt.NDArray[Any]
    scores_x: FloatArray
    scores_x_prime: FloatArray


@dataclass(frozen=True, slots=True)
class AuditResult:
    """The outcome of a black-box audit.

    Attributes
    ----------
    epsilon_lower_bound:
        A lower bound on the mechanism's epsilon at ``delta``, valid with probability
        at least ``confidence`` over the audit's randomness. Exceeding a claimed
        epsilon is evidence that the claim is false; not exceeding it proves nothing.
    confidence, delta:
        As requested.
    samples:
        Draws from each of M(x) and M(x') (selection and estimation together).
    attack, correction:
        The attack used and how multiple testing was handled.
    threshold:
        The chosen test says "positive" when the score is above this value.
    positive:
        ``"x"`` or ``"x_prime"``: the input the test says "positive" for.
    false_positives, negatives, false_negatives, positives:
        Counts of the estimation samples the bound was computed from.
    fpr_upper, fnr_upper:
        Their Clopper-Pearson upper bounds.
    epsilon_estimate:
        The plug-in value of the same formula (no confidence; for orientation only).
    outputs:
        The estimation samples and their scores when ``audit(..., keep_outputs=True)``
        (for plots, e.g. ``dpkit audit --plot``), else None.
    """

    epsilon_lower_bound: float
    confidence: float
    delta: float
    samples: int
    attack: str
    correction: str
    threshold: float
    positive: str
    false_positives: int
    negatives: int
    false_negatives: int
    positives: int
    fpr_upper: float
    fnr_upper: float
    epsilon_estimate: float
    outputs: AuditOutputs | None = field(default=None, repr=False, compare=False)

    def refutes(self, epsilon: float) -> bool:
        """Whether the audit refutes an ``(epsilon, delta)`` claim at its confidence."""
        return self.epsilon_lower_bound > epsilon


def _draw(mechanism: Mechanism, x: Any, n: int, rng: Random, name: str) -> npt.NDArray[Any]:
    """Call the mechanism and check its outputs, with messages that show no values."""
    try:
        raw = mechanism(x, n, rng)
        out = np.asarray(raw)
    except (TypeError, ValueError) as err:
        raise DataError(f"audit: the mechanism's output on {name} is not an array.") from err
    if out.ndim == 0 or out.ndim > 2 or out.shape[0] != n:
        raise DataError(
            f"audit: the mechanism must return an array of shape ({n},) or ({n}, d) when "
            f"asked for {n} outputs; on {name} it returned shape {out.shape}."
        )
    if out.dtype == np.bool_:
        return out.astype(np.int8)
    if not (np.issubdtype(out.dtype, np.integer) or np.issubdtype(out.dtype, np.floating)):
        raise DataError(
            f"audit: the mechanism must return numbers; on {name} it returned dtype {out.dtype}."
        )
    if np.issubdtype(out.dtype, np.floating) and not np.all(np.isfinite(out)):
        raise DataError(f"audit: the mechanism returned NaN or infinite outputs on {name}.")
    return out


def _threshold_score(outputs: npt.NDArray[Any]) -> FloatArray:
    if outputs.ndim == 2 and outputs.shape[1] != 1:
        raise DataError(
            "audit: attack='threshold' needs scalar outputs; use attack='histogram' or a "
            f"trained score for outputs of shape (n, {outputs.shape[1]})."
        )
    return outputs.reshape(-1).astype(np.float64)


def _column_binner(pooled: npt.NDArray[Any], bins: int) -> Callable[[npt.NDArray[Any]], Any]:
    """Categories for a column with few distinct values, quantile bins otherwise."""
    values = np.unique(pooled)
    if values.size <= _CATEGORICAL_MAX:
        # Unseen values get their own category (index values.size).
        def categorical(column: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
            index = np.minimum(np.searchsorted(values, column), values.size - 1)
            return np.where(values[index] == column, index, values.size).astype(np.int64)

        return categorical
    edges = np.unique(np.quantile(pooled.astype(np.float64), np.linspace(0, 1, bins + 1)[1:-1]))

    def quantile(column: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        return np.searchsorted(edges, column.astype(np.float64), side="right").astype(np.int64)

    return quantile


def _histogram_trainer(out_x: npt.NDArray[Any], out_xp: npt.NDArray[Any]) -> ScoreFunction:
    """A smoothed log-likelihood ratio per histogram cell, learnt on the selection batch."""
    two_d_x = out_x.reshape(out_x.shape[0], -1)
    two_d_xp = out_xp.reshape(out_xp.shape[0], -1)
    columns = two_d_x.shape[1]
    bins = _HISTOGRAM_BINS_1D if columns == 1 else _HISTOGRAM_BINS_PER_COLUMN
    pooled = np.concatenate([two_d_x, two_d_xp])
    binners = [_column_binner(pooled[:, j], bins) for j in range(columns)]

    def cells(outputs: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        rows = outputs.reshape(outputs.shape[0], -1)
        cell = np.zeros(rows.shape[0], dtype=np.int64)
        for j, binner in enumerate(binners):
            # Mixed radix: at most _CATEGORICAL_MAX + 1 codes per column.
            cell = cell * (_CATEGORICAL_MAX + 2) + binner(rows[:, j])
        return cell

    cx, cxp = cells(two_d_x), cells(two_d_xp)
    seen, inverse = np.unique(np.concatenate([cx, cxp]), return_inverse=True)
    count_x = np.bincount(inverse[: cx.size], minlength=seen.size).astype(np.float64)
    count_xp = np.bincount(inverse[cx.size :], minlength=seen.size).astype(np.float64)
    # Add-half smoothing keeps empty cells finite; the estimation batch judges the result.
    log_ratio = np.log((count_x + 0.5) / (cx.size + 0.5 * seen.size)) - np.log(
        (count_xp + 0.5) / (cxp.size + 0.5 * seen.size)
    )

    def score(outputs: npt.NDArray[Any]) -> FloatArray:
        c = cells(outputs)
        index = np.minimum(np.searchsorted(seen, c), seen.size - 1)
        return np.where(seen[index] == c, log_ratio[index], 0.0)

    return score


def _scores(score: ScoreFunction, outputs: npt.NDArray[Any]) -> FloatArray:
    values = np.asarray(score(outputs), dtype=np.float64).reshape(-1)
    if values.size != outputs.shape[0] or not np.all(np.isfinite(values)):
        raise DataError(
            "audit: the attack's score function must return one finite score per output."
        )
    return values


def _candidates(sx: FloatArray, sxp: FloatArray) -> FloatArray:
    pooled = np.concatenate([sx, sxp])
    distinct = np.unique(pooled)
    if distinct.size <= _EXACT_CANDIDATES:
        cuts = distinct
    else:
        k = _EXTREME_CANDIDATES
        ends = [np.sort(s) for s in (sx, sxp)]
        cuts = np.unique(
            np.concatenate(
                [np.quantile(pooled, np.linspace(0, 1, _QUANTILE_CANDIDATES + 1))]
                + [e[:k] for e in ends]
                + [e[-k:] for e in ends]
            )
        )
    # "score > t" for t below the minimum is the whole space: useless, but harmless.
    return np.concatenate([[-np.inf], cuts])


def _above(sorted_scores: FloatArray, thresholds: FloatArray) -> npt.NDArray[np.int64]:
    """How many scores are strictly above each threshold."""
    return sorted_scores.size - np.searchsorted(sorted_scores, thresholds, side="right")


def _bounds_for(
    sx: FloatArray, sxp: FloatArray, thresholds: FloatArray, delta: float, level: float
) -> FloatArray:
    """epsilon bounds for "score > t" (rows: positive = x, positive = x')."""
    above_x = _above(np.sort(sx), thresholds)
    above_xp = _above(np.sort(sxp), thresholds)
    out = np.empty((2, thresholds.size))
    for row, (pos_above, n_pos, neg_above, n_neg) in enumerate(
        ((above_x, sx.size, above_xp, sxp.size), (above_xp, sxp.size, above_x, sx.size))
    ):
        fpr = _cp_upper(neg_above, n_neg, level)
        fnr = _cp_upper(n_pos - pos_above, n_pos, level)
        out[row] = epsilon_from_rates(fpr, fnr, delta)
    return out


def _check_attack(attack: object) -> None:
    if not (callable(attack) or attack in ("threshold", "histogram")):
        raise InvalidParameter.for_parameter(
            "attack", "audit", "'threshold', 'histogram' or a trainer callable", attack
        )


def audit(
    mechanism: Mechanism,
    x: Any,
    x_prime: Any,
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
    samples: int = 10**6,
    attack: AttackName | Trainer = "threshold",
    correction: Literal["split", "bonferroni"] = "split",
    thresholds: Sequence[float] | None = None,
    selection_fraction: float = 0.5,
    keep_outputs: bool = False,
    rng: RandomLike | None = None,
) -> AuditResult:
    """Audit a mechanism on one neighbouring pair: a lower bound on epsilon at ``delta``.

    Parameters
    ----------
    mechanism:
        ``mechanism(x, n, rng) -> array`` of ``n`` independent outputs on input ``x``
        (shape ``(n,)``, or ``(n, d)`` for vector outputs; finite numbers or booleans),
        drawing its randomness from the :class:`~dpkit.random.Random` passed.
    x, x_prime:
        A neighbouring pair, chosen adversarially (the worst case for the mechanism).
    delta:
        The delta of the claim audited, in [0, 1).
    confidence:
        In (0, 1): the probability, over the audit's randomness, that the bound
        returned does not exceed the true epsilon(delta).
    samples:
        Draws from each of M(x) and M(x'); with ``"split"`` a fraction
        ``selection_fraction`` of them chooses the test and the rest estimate it.
    attack:
        ``"threshold"`` (regions ``{y > t}`` and their complements, scalar outputs),
        ``"histogram"`` (regions made of histogram cells ranked by their estimated
        likelihood ratio: categories for discrete outputs, quantile bins for
        continuous ones, a grid of cells for 2-D outputs) or a *trainer*
        ``fit(outputs_x, outputs_x_prime) -> score`` returning a function that maps
        outputs to real scores (a trained classifier, as in DP-Sniper), thresholded.
    correction:
        ``"split"`` (default) or ``"bonferroni"`` (``attack="threshold"`` with a fixed
        ``thresholds`` list only); see the module docstring.
    thresholds:
        The fixed candidate thresholds for ``"bonferroni"``, chosen before sampling.
    selection_fraction:
        Share of the samples used to choose the test with ``"split"``, in (0, 1).
    keep_outputs:
        Keep the estimation samples and their scores in ``result.outputs`` (memory:
        all of them).
    rng:
        Random source for the mechanism's draws.

    Returns
    -------
    AuditResult
        ``epsilon_lower_bound`` is a lower bound on epsilon at confidence
        ``confidence``; never a certificate of privacy.

    Notes
    -----
    The bound: a test with false-positive rate FPR and false-negative rate FNR on an
    (epsilon, delta)-DP mechanism has ``epsilon >= ln((1 - delta - FPR) / FNR)`` and
    ``epsilon >= ln((1 - delta - FNR) / FPR)`` (Kairouz, Oh & Viswanath 2015); both
    rates are replaced by one-sided Clopper-Pearson upper bounds at level
    ``(1 - confidence) / 2`` each. Region search as in DP-Sniper (Bichsel et al.,
    IEEE S&P 2021), with a threshold on a score.
    """
    owner = "audit"
    if not callable(mechanism):
        raise InvalidParameter.for_parameter("mechanism", owner, "a callable", mechanism)
    delta = check.check_delta(delta, owner)
    confidence = check.check_probability(
        confidence, "confidence", owner, open_low=True, open_high=True
    )
    samples = check.check_count(samples, "samples", owner, minimum=2)
    _check_attack(attack)
    selection_fraction = check.check_probability(
        selection_fraction, "selection_fraction", owner, open_low=True, open_high=True
    )
    random = as_random(rng)
    alpha = 1.0 - confidence
    name = attack if isinstance(attack, str) else getattr(attack, "__name__", "trained")
    if correction == "bonferroni":
        fixed = _fixed_thresholds(attack, thresholds)
        streams = random.spawn(2)
        raw_x = _draw(mechanism, x, samples, streams[0], "x")
        raw_xp = _draw(mechanism, x_prime, samples, streams[1], "x_prime")
        est_x, est_xp = _threshold_score(raw_x), _threshold_score(raw_xp)
        level = alpha / (4 * fixed.size)
        grid = _bounds_for(est_x, est_xp, fixed, delta, level)
        row, column = np.unravel_index(int(np.argmax(grid)), grid.shape)
        return _result(
            est_x,
            est_xp,
            float(fixed[column]),
            int(row),
            delta,
            confidence,
            level,
            samples,
            name,
            correction,
            AuditOutputs(raw_x, raw_xp, est_x, est_xp) if keep_outputs else None,
        )
    if correction != "split":
        raise InvalidParameter.for_parameter(
            "correction", owner, "'split' or 'bonferroni'", correction
        )
    if thresholds is not None:
        raise InvalidParameter(f"{owner}: 'thresholds' is used only with correction='bonferroni'.")
    n_select = min(max(1, round(samples * selection_fraction)), samples - 1)
    streams = random.spawn(4)
    sel_x = _draw(mechanism, x, n_select, streams[0], "x")
    sel_xp = _draw(mechanism, x_prime, n_select, streams[1], "x_prime")
    if attack == "threshold":
        score: ScoreFunction = _threshold_score
    elif attack == "histogram":
        score = _histogram_trainer(sel_x, sel_xp)
    else:
        assert callable(attack)
        score = attack(sel_x, sel_xp)
        if not callable(score):
            raise InvalidParameter(f"{owner}: the attack trainer must return a score function.")
    level = alpha / 2
    sx, sxp = _scores(score, sel_x), _scores(score, sel_xp)
    cuts = _candidates(sx, sxp)
    grid = _bounds_for(sx, sxp, cuts, delta, level)
    row, column = np.unravel_index(int(np.argmax(grid)), grid.shape)
    # Fresh randomness for estimation: the chosen test depends on the selection batch only.
    n_estimate = samples - n_select
    raw_x = _draw(mechanism, x, n_estimate, streams[2], "x")
    raw_xp = _draw(mechanism, x_prime, n_estimate, streams[3], "x_prime")
    est_x, est_xp = _scores(score, raw_x), _scores(score, raw_xp)
    return _result(
        est_x,
        est_xp,
        float(cuts[column]),
        int(row),
        delta,
        confidence,
        level,
        samples,
        name,
        correction,
        AuditOutputs(raw_x, raw_xp, est_x, est_xp) if keep_outputs else None,
    )


def _fixed_thresholds(attack: object, thresholds: Sequence[float] | None) -> FloatArray:
    if attack != "threshold":
        raise InvalidParameter(
            "audit: correction='bonferroni' needs attack='threshold' (a trained or histogram "
            "attack is chosen from data, so use correction='split')."
        )
    if thresholds is None or len(thresholds) == 0:
        raise InvalidParameter(
            "audit: correction='bonferroni' needs a fixed, non-empty 'thresholds' list, "
            "chosen before sampling."
        )
    fixed = np.asarray(thresholds, dtype=np.float64).reshape(-1)
    if np.any(np.isnan(fixed)):
        raise InvalidParameter("audit: 'thresholds' must not contain NaN.")
    return fixed


def _result(
    est_x: FloatArray,
    est_xp: FloatArray,
    threshold: float,
    row: int,
    delta: float,
    confidence: float,
    level: float,
    samples: int,
    attack: str,
    correction: str,
    outputs: AuditOutputs | None = None,
) -> AuditResult:
    pos, neg = (est_x, est_xp) if row == 0 else (est_xp, est_x)
    false_positives = int(np.count_nonzero(neg > threshold))
    false_negatives = int(np.count_nonzero(pos <= threshold))
    fpr_upper = float(_cp_upper(false_positives, neg.size, level))
    fnr_upper = float(_cp_upper(false_negatives, pos.size, level))
    bound = float(epsilon_from_rates(fpr_upper, fnr_upper, delta))
    estimate = float(
        epsilon_from_rates(false_positives / neg.size, false_negatives / pos.size, delta)
    )
    return AuditResult(
        epsilon_lower_bound=bound,
        confidence=confidence,
        delta=delta,
        samples=samples,
        attack=attack,
        correction=correction,
        threshold=threshold,
        positive="x" if row == 0 else "x_prime",
        false_positives=false_positives,
        negatives=int(neg.size),
        false_negatives=false_negatives,
        positives=int(pos.size),
        fpr_upper=fpr_upper,
        fnr_upper=fnr_upper,
        epsilon_estimate=estimate if math.isfinite(estimate) else math.inf,
        outputs=outputs,
    )
