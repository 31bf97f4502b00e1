"""DP-Sniper: a trained classifier, a c-optimal randomized threshold and an input search.

Bichsel, Steffen, Bogunovic & Vechev, "DP-Sniper: Black-Box Discovery of Differential
Privacy Violations using Classifiers", IEEE S&P 2021. The auditor looks for a witness
``(a, a', S)`` with a large ``ln P[M(a) in S] - ln P[M(a') in S]``:

1. **Classifier.** Train ``p(b) ~ P[input = a | output = b]`` on outputs of ``M(a)``
   (label 1) and ``M(a')`` (label 0): :func:`logistic_classifier` (logistic regression
   on standardised, optionally quadratic features, fitted by Newton's method), the
   histogram attack of :func:`~dpkit.audit.audit`, or any trainer.
2. **c-optimal threshold.** On fresh outputs of ``M(a')``, choose the threshold ``t``
   and the tie-break probability ``q`` so that the randomized test "``p(b) > t``, or
   ``p(b) = t`` and a Bernoulli(``q``) coin says yes" accepts a fraction ``c`` of them
   (DP-Sniper's Algorithm 1; ``c`` is the smallest probability the attack ever has to
   estimate). The coin is dpkit's exact Bernoulli, drawn per output, so every count
   below is a true binomial count.
3. **Input search (DD-Search).** Steps 1-2 for every candidate pair (and, by
   default, each pair in both orders); each attack is scored on a fresh *check*
   batch, and the pair whose check-batch lower bound is largest wins.
4. **Final estimate.** The winning test is run on a fresh *final* batch from each
   input. With ``k1`` of ``n`` outputs of ``M(a)`` and ``k2`` of ``n`` outputs of
   ``M(a')`` accepted, the bound is ``ln(CP_lower(k1) - delta) - ln(CP_upper(k2))``
   with one-sided Clopper-Pearson bounds at level ``(1 - confidence) / 2`` each.

Multiple testing. Everything that is *selected* -- the classifier, the threshold, the
tie-break probability, the winning pair among all candidates -- is a function of the
training, threshold and check batches only. The final batch is drawn afterwards with
fresh randomness, so conditionally on the selection its two counts are binomial with
the true probabilities of the chosen randomized test, and the union bound over the two
Clopper-Pearson bounds gives the stated confidence. No correction for the number of
candidate pairs is needed (or applied): the check batch may be reused freely because
the final batch is not. The bound follows from the definition: an
``(epsilon, delta)``-DP mechanism satisfies ``E[phi(M(a))] <= e^epsilon
E[phi(M(a'))] + delta`` for every randomized test ``phi``, so
``epsilon >= ln((P[M(a) in S] - delta) / P[M(a') in S])``.

Differences from the reference implementation (eth-sri/dp-sniper): the tie-break coin
is sampled (the reference plugs in its expectation, which makes its counts
non-binomial), the winner of the search is chosen by the check-batch lower bound (the
reference uses the point estimate), and ``delta > 0`` claims can be audited.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.audit.blackbox import Mechanism, ScoreFunction, Trainer, _draw, _histogram_trainer
from dpkit.audit.bounds import clopper_pearson_lower, clopper_pearson_upper
from dpkit.errors import DataError, InvalidParameter
from dpkit.mechanisms.subsampled_laplace import poisson_sample_mask
from dpkit.random import Random, RandomLike, as_random

__all__ = [
    "SniperResult",
    "logistic_classifier",
    "neighbouring_patterns",
    "sniper_audit",
]

FloatArray = npt.NDArray[np.float64]
ClassifierName = Literal["logistic", "histogram"]

_NEWTON_STEPS = 50
_NEWTON_TOLERANCE = 1e-10


# --------------------------------------------------------------------------- classifier


def _feature_map(outputs: npt.NDArray[Any], degree: int) -> FloatArray:
    rows = np.asarray(outputs, dtype=np.float64).reshape(outputs.shape[0], -1)
    if degree == 1:
        return rows
    columns = rows.shape[1]
    products = [rows[:, i] * rows[:, j] for i in range(columns) for j in range(i, columns)]
    return np.hstack([rows, np.stack(products, axis=1)])


def _newton_logistic(design: FloatArray, labels: FloatArray, penalty: float) -> FloatArray:
    """Ridge-penalised logistic regression by damped Newton steps (intercept: column 0)."""
    weights = np.zeros(design.shape[1])
    ridge = penalty * np.eye(design.shape[1])
    ridge[0, 0] = 0.0  # the intercept is not shrunk

    def objective(w: FloatArray) -> float:
        logits = design @ w
        loss = np.logaddexp(0.0, logits) - labels * logits
        return float(np.sum(loss) + 0.5 * w @ ridge @ w)

    current = objective(weights)
    for _ in range(_NEWTON_STEPS):
        prob = 0.5 * (1.0 + np.tanh(0.5 * (design @ weights)))
        gradient = design.T @ (prob - labels) + ridge @ weights
        curvature = (design * (prob * (1.0 - prob))[:, None]).T @ design + ridge
        step = np.linalg.solve(curvature + 1e-12 * np.eye(design.shape[1]), gradient)
        # Halve the step until the objective does not increase (plain Newton can
        # overshoot on nearly separable outputs).
        scale = 1.0
        while scale > 1e-6 and objective(weights - scale * step) > current:
            scale /= 2.0
        weights = weights - scale * step
        current = objective(weights)
        if float(np.max(np.abs(scale * step))) < _NEWTON_TOLERANCE:
            break
    return weights


def logistic_classifier(*, degree: int = 1, regularization: float = 1e-6) -> Trainer:
    """A trainer for DP-Sniper's classifier: logistic regression on the outputs.

    The returned ``fit(outputs_x, outputs_x_prime)`` standardises the outputs (each
    column, with the pooled mean and standard deviation of the training outputs),
    optionally adds all products of two columns (``degree=2``), and fits
    ``P[input = x | output]`` by Newton's method with a ridge penalty of
    ``regularization`` times the number of training outputs (which keeps separable
    data finite). It returns the fitted log-odds as the score: a monotone function of
    the posterior, so it defines the same tests. Usable as ``attack=`` of
    :func:`~dpkit.audit.audit` and ``classifier=`` of :func:`sniper_audit`.

    Parameters
    ----------
    degree:
        1 (linear log-odds) or 2 (quadratic).
    regularization:
        Ridge penalty per training output, >= 0.

    Notes
    -----
    Training only *chooses* a test; the auditors estimate its error rates on fresh
    samples, so a poor fit costs power, never validity.
    """
    owner = "logistic_classifier"
    if degree not in (1, 2) or isinstance(degree, bool):
        raise InvalidParameter.for_parameter("degree", owner, "1 or 2", degree)
    penalty_per_row = check.check_nonnegative(regularization, "regularization", owner)

    def fit(out_x: npt.NDArray[Any], out_xp: npt.NDArray[Any]) -> ScoreFunction:
        raw = _feature_map(np.concatenate([out_x, out_xp]), degree)
        centre = raw.mean(axis=0)
        spread = raw.std(axis=0)
        spread = np.where(spread > 0, spread, 1.0)

        def design(outputs: npt.NDArray[Any]) -> FloatArray:
            features = (_feature_map(outputs, degree) - centre) / spread
            return np.hstack([np.ones((features.shape[0], 1)), features])

        labels = np.concatenate([np.ones(out_x.shape[0]), np.zeros(out_xp.shape[0])])
        weights = _newton_logistic(
            design(np.concatenate([out_x, out_xp])), labels, penalty_per_row * labels.size
        )

        def score(outputs: npt.NDArray[Any]) -> FloatArray:
            return np.asarray(design(outputs) @ weights, dtype=np.float64)

        return score

    fit.__name__ = "logistic" if degree == 1 else "logistic-quadratic"
    return fit


# --------------------------------------------------------------------------- threshold


def _power_threshold(scores: FloatArray, c: float) -> tuple[float, float]:
    """``(t, q)`` so that ``#{s > t} + q #{s = t} = c n`` (DP-Sniper, Algorithm 1).

    ``t`` is the ``floor(c n)``-th largest score (0-based); ``q`` in [0, 1) splits the
    remaining mass over the scores tied at ``t``.
    """
    ordered = np.sort(scores)[::-1]
    target = c * ordered.size
    t = float(ordered[min(math.floor(target), ordered.size - 1)])
    above = int(np.count_nonzero(ordered > t))
    tied = int(np.count_nonzero(ordered == t))
    q = min(max((target - above) / tied, 0.0), 1.0)
    return t, q


def _accept(scores: FloatArray, t: float, q: float, rng: Random) -> int:
    """How many outputs the randomized test accepts: above ``t``, or tied and a coin says yes."""
    tied = scores == t
    coins = poisson_sample_mask(int(np.count_nonzero(tied)), q, rng)
    return int(np.count_nonzero(scores > t)) + int(np.count_nonzero(coins))


def _scores_of(score: ScoreFunction, outputs: npt.NDArray[Any]) -> FloatArray:
    values = np.asarray(score(outputs), dtype=np.float64).reshape(-1)
    if values.size != outputs.shape[0] or not np.all(np.isfinite(values)):
        raise DataError("sniper_audit: the classifier must return one finite score per output.")
    return values


def _epsilon(p_x: float, p_xp: float, delta: float) -> float:
    """``ln((p_x - delta) / p_xp)`` floored at 0 (``inf`` when only ``p_xp`` is 0)."""
    if p_x <= delta:
        return 0.0
    if p_xp <= 0.0:
        return math.inf
    return max(0.0, math.log(p_x - delta) - math.log(p_xp))


def _bound(k1: int, k2: int, n: int, delta: float, level: float) -> tuple[float, float, float]:
    lower = float(clopper_pearson_lower(k1, n, level))
    upper = float(clopper_pearson_upper(k2, n, level))
    return _epsilon(lower, upper, delta), lower, upper


# --------------------------------------------------------------------------- search


@dataclass(frozen=True, slots=True)
class SniperResult:
    """The outcome of :func:`sniper_audit`.

    Attributes
    ----------
    epsilon_lower_bound:
        A lower bound on epsilon at ``delta``, valid with probability at least
        ``confidence`` (never a certificate of privacy).
    epsilon_estimate:
        The plug-in ``ln((k1/n - delta) / (k2/n))`` on the final batch (no confidence).
    confidence, delta, c:
        As requested.
    x, x_prime:
        The winning pair: the test accepts outputs that look like ``M(x)``.
    candidate:
        Its index among the candidates tried (pairs in order; with both directions,
        pair ``i`` is candidate ``2 i`` and its reverse ``2 i + 1``).
    threshold, tie_probability:
        The winning test: score above ``threshold``, or equal and a coin with this
        probability.
    accepted_x, accepted_x_prime, final_samples:
        Final-batch counts: outputs of ``M(x)`` and ``M(x')`` the test accepted, of
        ``final_samples`` each.
    p_x_lower, p_x_prime_upper:
        Their Clopper-Pearson bounds, each at level ``(1 - confidence) / 2``.
    check_bounds:
        Per candidate, the lower bound on its check batch (the search criterion).
    classifier:
        The classifier's name.
    """

    epsilon_lower_bound: float
    epsilon_estimate: float
    confidence: float
    delta: float
    c: float
    x: Any
    x_prime: Any
    candidate: int
    threshold: float
    tie_probability: float
    accepted_x: int
    accepted_x_prime: int
    final_samples: int
    p_x_lower: float
    p_x_prime_upper: float
    check_bounds: tuple[float, ...]
    classifier: str

    def refutes(self, epsilon: float) -> bool:
        """Whether the audit refutes an ``(epsilon, delta)`` claim at its confidence."""
        return self.epsilon_lower_bound > epsilon


@dataclass(frozen=True, slots=True)
class _Attack:
    score: ScoreFunction
    threshold: float
    tie: float


@dataclass(frozen=True, slots=True)
class _Budget:
    train: int
    threshold: int
    check: int
    final: int


def _build_attack(
    mechanism: Mechanism,
    pair: tuple[Any, Any],
    trainer: Trainer,
    c: float,
    budget: _Budget,
    streams: list[Random],
) -> _Attack:
    """DP-Sniper's steps 1-2 for one pair, on samples drawn only for this purpose."""
    x, xp = pair
    train_x = _draw(mechanism, x, budget.train, streams[0], "x")
    train_xp = _draw(mechanism, xp, budget.train, streams[1], "x_prime")
    score = trainer(train_x, train_xp)
    if not callable(score):
        raise InvalidParameter("sniper_audit: the classifier trainer must return a function.")
    calibration = _scores_of(score, _draw(mechanism, xp, budget.threshold, streams[2], "x_prime"))
    threshold, tie = _power_threshold(calibration, c)
    return _Attack(score, threshold, tie)


def _run_test(
    mechanism: Mechanism, pair: tuple[Any, Any], attack: _Attack, n: int, streams: list[Random]
) -> tuple[int, int]:
    """Counts accepted among ``n`` fresh outputs of each input (fresh coins too)."""
    counts = []
    for index, (value, name) in enumerate(zip(pair, ("x", "x_prime"), strict=True)):
        outputs = _draw(mechanism, value, n, streams[2 * index], name)
        scores = _scores_of(attack.score, outputs)
        counts.append(_accept(scores, attack.threshold, attack.tie, streams[2 * index + 1]))
    return counts[0], counts[1]


def _trainer_for(classifier: object) -> Trainer:
    if classifier == "logistic":
        return logistic_classifier()
    if classifier == "histogram":
        return _histogram_trainer
    if callable(classifier):
        return classifier
    raise InvalidParameter.for_parameter(
        "classifier", "sniper_audit", "'logistic', 'histogram' or a trainer callable", classifier
    )


def _candidates(pairs: object, both_directions: bool) -> list[tuple[Any, Any]]:
    if not isinstance(pairs, Sequence) or isinstance(pairs, str) or len(pairs) == 0:
        raise InvalidParameter(
            "sniper_audit: 'pairs' must be a non-empty sequence of (x, x_prime) pairs."
        )
    out: list[tuple[Any, Any]] = []
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise InvalidParameter("sniper_audit: every entry of 'pairs' must be a 2-tuple.")
        out.append(pair)
        if both_directions:
            out.append((pair[1], pair[0]))
    return out


def sniper_audit(
    mechanism: Mechanism,
    pairs: Sequence[tuple[Any, Any]],
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
    c: float = 0.01,
    classifier: ClassifierName | Trainer = "logistic",
    train_samples: int = 100_000,
    threshold_samples: int = 100_000,
    check_samples: int = 100_000,
    final_samples: int = 1_000_000,
    both_directions: bool = True,
    rng: RandomLike | None = None,
) -> SniperResult:
    """DP-Sniper with DD-Search: a lower bound on epsilon from the best of several pairs.

    Parameters
    ----------
    mechanism:
        ``mechanism(x, n, rng) -> array`` of ``n`` independent outputs (as for
        :func:`~dpkit.audit.audit`).
    pairs:
        Candidate neighbouring pairs ``(x, x_prime)`` (e.g. from
        :func:`neighbouring_patterns`). Every pair must be neighbouring under the
        claim's relation.
    delta:
        The delta of the claim audited, in [0, 1); DP-Sniper itself audits pure DP.
    confidence:
        In (0, 1): the probability that the bound does not exceed the true epsilon.
    c:
        In (0, 1): the attack accepts a fraction ``c`` of the outputs of ``M(x')``
        (DP-Sniper's default 0.01). Smaller ``c`` reaches rarer, more telling regions
        but needs more samples.
    classifier:
        ``"logistic"`` (:func:`logistic_classifier`), ``"histogram"`` (the
        likelihood-ratio histogram of :func:`~dpkit.audit.audit`) or a trainer
        ``fit(outputs_x, outputs_x_prime) -> score``.
    train_samples, threshold_samples, check_samples, final_samples:
        Outputs per input for training, for the threshold (from ``x_prime`` only),
        for the check estimate of each candidate and for the final estimate.
    both_directions:
        Also try every pair reversed (default True).
    rng:
        Random source for every draw and every tie-break coin.

    Returns
    -------
    SniperResult
        ``epsilon_lower_bound`` is valid at ``confidence`` (see the module docstring
        for why the search over candidates needs no correction).

    Notes
    -----
    Privacy guarantee: none (an auditor). Accuracy: the bound is a one-sided
    ``confidence`` lower bound; with ``c = 0.01`` and ``n`` final samples its gap to
    the attack's true ratio is about ``2 z / sqrt(c n)`` in epsilon, with ``z`` the
    normal quantile at ``(1 - confidence) / 2``.

    Reference: B. Bichsel, S. Steffen, I. Bogunovic, M. Vechev, "DP-Sniper: Black-Box
    Discovery of Differential Privacy Violations using Classifiers", IEEE S&P 2021.
    """
    owner = "sniper_audit"
    if not callable(mechanism):
        raise InvalidParameter.for_parameter("mechanism", owner, "a callable", mechanism)
    candidates = _candidates(pairs, both_directions)
    delta = check.check_delta(delta, owner)
    confidence = check.check_probability(
        confidence, "confidence", owner, open_low=True, open_high=True
    )
    c = check.check_probability(c, "c", owner, open_low=True, open_high=True)
    trainer = _trainer_for(classifier)
    budget = _Budget(
        train=check.check_count(train_samples, "train_samples", owner),
        threshold=check.check_count(threshold_samples, "threshold_samples", owner),
        check=check.check_count(check_samples, "check_samples", owner),
        final=check.check_count(final_samples, "final_samples", owner),
    )
    level = (1.0 - confidence) / 2.0
    random = as_random(rng)
    # One family of streams per candidate for the search, one for the final batch;
    # the final streams are never touched before the winner is fixed.
    search_streams = [random.spawn(7) for _ in candidates]
    final_streams = random.spawn(4)
    attacks: list[_Attack] = []
    check_bounds: list[float] = []
    for pair, streams in zip(candidates, search_streams, strict=True):
        attack = _build_attack(mechanism, pair, trainer, c, budget, streams[:3])
        k1, k2 = _run_test(mechanism, pair, attack, budget.check, streams[3:])
        attacks.append(attack)
        check_bounds.append(_bound(k1, k2, budget.check, delta, level)[0])
    best = int(np.argmax(check_bounds))
    winner, pair = attacks[best], candidates[best]
    # Fresh samples and fresh coins: the chosen test is fixed before they exist.
    k1, k2 = _run_test(mechanism, pair, winner, budget.final, final_streams)
    bound, lower, upper = _bound(k1, k2, budget.final, delta, level)
    estimate = _epsilon(k1 / budget.final, k2 / budget.final, delta)
    return SniperResult(
        epsilon_lower_bound=bound,
        epsilon_estimate=estimate,
        confidence=confidence,
        delta=delta,
        c=c,
        x=pair[0],
        x_prime=pair[1],
        candidate=best,
        threshold=winner.threshold,
        tie_probability=winner.tie,
        accepted_x=k1,
        accepted_x_prime=k2,
        final_samples=budget.final,
        p_x_lower=lower,
        p_x_prime_upper=upper,
        check_bounds=tuple(check_bounds),
        classifier=getattr(trainer, "__name__", "trained"),
    )


# --------------------------------------------------------------------------- inputs


def neighbouring_patterns(
    length: int, *, componentwise: bool = True
) -> list[tuple[FloatArray, FloatArray]]:
    """Candidate input pairs for mechanisms on vectors of ``length`` queries.

    The patterns of StatDP (Ding et al., CCS 2018) as used by DP-Sniper's search:
    against the all-ones vector, one entry lowered to 0 or raised to 2; with
    ``componentwise=True`` (neighbours whose queries may *each* move by at most 1, as
    for histograms or counts with sensitivity 1 per entry) also one up and the rest
    down, one down and the rest up, half up and half down, all up, all down, and the
    "X" pair (first half 1 / second half 0 against its mirror image). Pass the result
    to :func:`sniper_audit`, which also tries every pair reversed.
    """
    n = check.check_count(length, "length", "neighbouring_patterns")
    ones = np.ones(n)
    half = n // 2

    def vector(head: float, rest: float, split: int = 1) -> FloatArray:
        out = np.full(n, rest)
        out[:split] = head
        return out

    pairs = [(ones, vector(0.0, 1.0)), (ones, vector(2.0, 1.0))]
    if componentwise:
        pairs += [
            (ones, vector(2.0, 0.0)),
            (ones, vector(0.0, 2.0)),
            (ones, vector(2.0, 0.0, half)),
            (ones, np.full(n, 2.0)),
            (ones, np.zeros(n)),
            (vector(1.0, 0.0, half), vector(0.0, 1.0, half)),
        ]
    return [(a.copy(), b.copy()) for a, b in pairs]
