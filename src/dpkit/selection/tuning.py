"""DP hyperparameter tuning: random search under random stopping (LT19, PS22).

:func:`tune` is Liu & Talwar's recipe made into one call. A *candidate* draws
hyperparameters uniformly from the search space, trains a DP model on the training
rows, and scores it on the validation rows with Laplace noise (LT19 Lemma 5.1);
:func:`~dpkit.selection.random_stopping` repeats the candidate a random number of
times and releases the best. The whole search costs a small multiple of one training
run -- ``3 epsilon`` for the geometric number of trials, whatever its mean (LT19
Thm 3.2) -- instead of the sum over every trial that "train them all and keep the
best" pays.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting.events import (
    ComposedEvent,
    Event,
    LaplaceEvent,
    PureEvent,
    pure_epsilon,
)
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.errors import InvalidParameter
from dpkit.learn._base import laplace_for
from dpkit.mechanisms._base import Guarantee
from dpkit.random import Random, RandomLike, as_random
from dpkit.selection.private_candidates import (
    Candidate,
    random_stopping,
    random_stopping_event,
)

__all__ = ["TuneResult", "tune"]

#: Hyperparameters tune sets itself.
_RESERVED = frozenset({"epsilon", "delta", "rng"})
#: Largest search space whose every setting's event is checked before anything runs.
_MAX_SETTINGS = 100_000


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` releases.

    Attributes
    ----------
    model:
        The selected model, fitted on the training rows.
    params:
        Its hyperparameters (drawn from the search space).
    noisy_score:
        Its *noisy* validation score, the one the selection compared: accuracy for
        classifiers, or minus the mean of the squared errors over the squared range of
        ``bounds_y`` (clipped at 1) for regressors; a noisy count divided by a noisy
        number of validation rows. It is a DP release, not the model's accuracy: it
        carries Laplace noise, and being the best of several noisy scores it is biased
        upwards. Measure accuracy on rows the tuning never saw. ``score`` is its old
        name, deprecated (a :class:`DeprecationWarning`).
    model_epsilon:
        The epsilon each trial's model was trained with.
    event, guarantee:
        The whole tuning run (the validation-size release and the selection), and the
        budget it meets (the event's own accounting is at most the budget).
    """

    model: Any
    params: dict[str, Any]
    noisy_score: float
    model_epsilon: float
    event: Event
    guarantee: Guarantee

    @property
    def score(self) -> float:
        """Deprecated name of :attr:`noisy_score` (the noisy validation score)."""
        warnings.warn(
            "TuneResult.score is deprecated: it is the noisy validation score, now named "
            "TuneResult.noisy_score.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.noisy_score


def tune(
    estimator: Any,
    search_space: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]],
    X: Any,
    y: Any,
    *,
    budget: float | PureDP | ApproxDP,
    mean_trials: float = 10.0,
    repetitions: str = "geometric",
    shape: float | None = None,
    validation_fraction: float = 0.2,
    count_share: float = 0.02,
    score_share: float = 0.1,
    rng: RandomLike | None = None,
) -> TuneResult:
    """Tune a dpkit.learn model privately: random search with random stopping.

    Parameters
    ----------
    estimator:
        A :mod:`dpkit.learn` model (anything with ``epsilon``, ``rng`` and
        ``privacy_event(n_features)``); tune sets ``epsilon`` and ``rng`` of its clones.
    search_space:
        ``{name: [values, ...]}`` (each trial draws every name's value uniformly and
        independently) or a sequence of settings ``[{name: value}, ...]`` (one drawn
        uniformly). Every setting must give the model the same event at equal epsilon
        (checked before anything runs): e.g. ``max_iter`` and ``learning_rate`` of a
        full-batch LogisticRegression, not its ``sampling_rate``.
    X, y:
        The data: rows go independently to validation with probability
        ``validation_fraction`` (public coins), the others to training.
    budget:
        The whole run's guarantee: ``epsilon`` (float) or ``PureDP`` for pure-DP models;
        ``ApproxDP(epsilon, delta)`` for models with a delta (LogisticRegression), then
        accounted with the RDP accountant (PS22 Thm 2).
    mean_trials:
        Expected number of trials ``E[K]`` (geometric: stop probability
        ``1 / mean_trials``).
    repetitions, shape:
        The law of the number of trials (see :func:`random_stopping`).
    validation_fraction:
        In (0, 1).
    count_share:
        Share of epsilon spent once on the noisy number of validation rows (to turn the
        noisy count of correct predictions into an accuracy).
    score_share:
        For models with a delta: the validation score's epsilon as a share of the model
        epsilon (their costs add). Pure-DP models score with their own epsilon for free:
        a row is in the training or the validation rows, never both.
    rng:
        Random source.

    Privacy
    -------
    Add/remove one row. A trial is ``max(eps_model, eps_score)``-DP for pure models
    (the row is in one split; LT19 Lemma 5.1), or ``event(model) + Laplace(score)``
    otherwise; random stopping releases the best of a random number of trials
    (``RepeatAndSelectEvent``: ``(2 + eta) eps``-DP, 3 eps for geometric, LT19 Thm 3.2,
    PS22 Cor. 3; RDP: PS22 Thm 2); the validation count adds ``count_share * epsilon``.
    The model epsilon is the largest (bisection, never overshooting) whose total meets
    ``budget``. Rows with a non-finite feature, a label outside the model's classes or
    a non-finite target are dropped, never refused; an empty split is fitted (noise
    only). The released model does not hold the generator that drew the noise.

    Only the selected trial is released: the number of trials ``K`` must stay hidden
    too (the guarantee of the best of a *known* number of trials is much weaker), and
    ``tune``'s running time is about ``K`` times one trial's. Run it where its duration
    is not observed by whoever receives the result.

    Examples
    --------
    >>> import numpy as np, dpkit as dp
    >>> from dpkit.testing import seeded
    >>> X = np.array([[0.1, 0.3], [0.9, 0.6]] * 1500)
    >>> y = np.array([0, 1] * 1500)
    >>> result = dp.tune(
    ...     dp.learn.GaussianNB(bounds=(0, 1), classes=[0, 1]),
    ...     {"var_smoothing": [1e-9, 1e-3, 1e-1]},
    ...     X, y, budget=1.0, mean_trials=5, rng=seeded(0),
    ... )
    >>> result.guarantee
    PureDP(epsilon=1.0)
    >>> round(result.model_epsilon, 4)  # (1 - 0.02) / 3
    0.3267
    >>> result.noisy_score > 0.9
    True
    """
    owner = "tune"
    if repetitions == "poisson":
        raise InvalidParameter(
            f"{owner}: the Poisson law can draw no trial at all, and tune must return a "
            "model; use 'geometric', 'negative_binomial' or 'logarithmic'."
        )
    target = _check_budget(budget, owner)
    settings = _settings(search_space, owner)
    fraction = check.check_probability(
        validation_fraction, "validation_fraction", owner, open_low=True, open_high=True
    )
    count_share = check.check_probability(
        count_share, "count_share", owner, open_low=True, open_high=True
    )
    score_share = check.check_positive(score_share, "score_share", owner)
    mean = check.check_positive(mean_trials, "mean_trials", owner)
    features, labels = _data(estimator, X, y, owner)
    width = features.shape[1]
    pure = isinstance(target, PureDP)
    epsilon = target.epsilon
    delta = None if pure else target.delta  # type: ignore[union-attr]
    count_epsilon = count_share * epsilon
    count_event = LaplaceEvent(1.0 / count_epsilon)

    def trial_plan(model_epsilon: float) -> tuple[Event, float]:
        """A trial's event (training and score) and the score's Laplace scale."""
        events = {_model_event(estimator, setting, model_epsilon, width) for setting in settings}
        if len(events) != 1:
            raise InvalidParameter(
                f"{owner}: the search space changes the model's privacy event at equal "
                "epsilon; search only hyperparameters that do not (e.g. not sampling_rate)."
            )
        (model_event,) = events
        if pure:
            model_pure = pure_epsilon(model_event)
            if model_pure is None:
                raise InvalidParameter(
                    f"{owner}: this model has no pure-DP guarantee; give budget as "
                    "ApproxDP(epsilon, delta)."
                )
            # The score runs at the model's own (event) epsilon, in parallel: a row is in
            # the training rows or the validation rows, never both (LT19 Lemma 5.1).
            scale, _ = laplace_for(1.0, model_pure)
            return PureEvent(model_pure), scale
        scale, score_event = laplace_for(1.0, score_share * model_epsilon)
        return ComposedEvent((model_event, score_event)), scale

    def total(model_epsilon: float) -> tuple[Event, PureDP | ApproxDP]:
        selection = random_stopping_event(
            trial_plan(model_epsilon)[0], **_law_arguments(repetitions, mean, shape)
        )
        event = ComposedEvent((count_event, selection))
        return event, _guarantee(event, delta)

    model_epsilon = _largest_epsilon(lambda e: total(e)[1].epsilon, epsilon, owner)
    event, _ = total(model_epsilon)  # within the budget: the budget is the guarantee
    trial, score_scale = trial_plan(model_epsilon)

    random = as_random(rng)
    validation = _validation_mask(features.shape[0], fraction, random)
    train = ~validation
    # The number of (kept) validation rows is data-dependent, so it is never used as
    # is: the selection compares un-normalised sums of sensitivity 1 (the score's
    # calibration needs no n), and only the released score is divided, by this noisy
    # count (sensitivity 1, charged as count_event): post-processing of both releases.
    noisy_size = float(noise.laplace(float(validation.sum()), scale=1 / count_epsilon, rng=random))
    score_rows = _score_function(estimator, features[validation], labels[validation])

    own_rng = estimator.get_params().get("rng")

    def candidate(rng: Random) -> tuple[float, tuple[dict[str, Any], Any]]:
        setting = settings[rng.integers(len(settings))]
        model = _configured(estimator, setting, model_epsilon).set_params(rng=rng)
        model.fit(features[train], labels[train])
        # The released model must not hold the generator its noise (and the split)
        # came from: whoever holds it could replay the stream.
        model.set_params(rng=own_rng)
        noisy = float(noise.laplace(score_rows(model), scale=score_scale, rng=rng))
        return noisy, (dict(setting), model)

    release = random_stopping(
        Candidate(candidate, trial),
        **_law_arguments(repetitions, mean, shape),
        delta=delta,
        rng=random,
    )
    selected = release.value
    params, model = selected.output
    return TuneResult(
        model=model,
        params=params,
        noisy_score=selected.score / max(noisy_size, 1.0),
        model_epsilon=model_epsilon,
        event=event,
        guarantee=target,
    )


def _check_budget(budget: object, owner: str) -> PureDP | ApproxDP:
    if isinstance(budget, PureDP | ApproxDP):
        if isinstance(budget, ApproxDP) and budget.delta == 0.0:
            return PureDP(budget.epsilon)
        return budget
    return PureDP(check.check_epsilon(budget, owner, name="budget"))


def _settings(space: object, owner: str) -> list[dict[str, Any]]:
    """The search space as a list of settings, each drawn with equal probability."""
    expected = "a non-empty mapping {name: [values]} or a non-empty sequence of settings"
    if isinstance(space, Mapping):
        names = list(space)
        pools = []
        for name in names:
            values = space[name]
            if isinstance(values, str) or not isinstance(values, Sequence) or not values:
                raise InvalidParameter.for_parameter("search_space", owner, expected, space)
            pools.append(list(values))
        if not names or math.prod(len(p) for p in pools) > _MAX_SETTINGS:
            raise InvalidParameter.for_parameter(
                "search_space", owner, f"{expected}, at most {_MAX_SETTINGS} settings", space
            )
        settings = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*pools)]
    elif isinstance(space, Sequence) and not isinstance(space, str) and space:
        if not all(isinstance(s, Mapping) for s in space):
            raise InvalidParameter.for_parameter("search_space", owner, expected, space)
        settings = [dict(s) for s in space]
    else:
        raise InvalidParameter.for_parameter("search_space", owner, expected, space)
    for setting in settings:
        reserved = _RESERVED & set(setting)
        if reserved:
            raise InvalidParameter(
                f"{owner}: the search space may not set {sorted(reserved)}: tune sets them."
            )
    return settings


def _data(estimator: Any, X: Any, y: Any, owner: str) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The schema is checked; unusable rows are dropped, never refused, before the split.

    Rows with a non-finite feature go for every model; for a regressor, rows with a
    non-finite target too -- the very rows its ``fit`` drops (one helper,
    :func:`dpkit.learn._rows.regression_rows`). Otherwise a NaN target in a validation
    row would reach the score, and the Laplace noise on a NaN score fails the draw: a
    failure only the table with that row can produce. Dropping a row is a per-row
    transformation (a neighbour's kept rows differ by at most that row), so the split,
    the validation count and the score keep their sensitivity 1. Classifiers keep
    labels outside their classes: such a row scores 0 (never equal to a prediction),
    within the same sensitivity, and their ``fit`` drops it from training.
    """
    from sklearn.base import is_classifier

    from dpkit.learn._rows import (
        finite_rows,
        regression_rows,
        training_features,
        training_target,
    )

    for name in ("privacy_event", "fit", "set_params", "get_params"):
        if not hasattr(estimator, name):
            raise InvalidParameter.for_parameter(
                "estimator", owner, "a dpkit.learn model (with privacy_event)", estimator
            )
    if not is_classifier(estimator):
        return regression_rows(X, y, owner)
    features = training_features(X, owner)
    labels = training_target(y, features.shape[0], owner)
    keep = finite_rows(features)
    return features[keep], labels[keep]


def _configured(estimator: Any, setting: Mapping[str, Any], epsilon: float) -> Any:
    from sklearn.base import clone

    return clone(estimator).set_params(**setting, epsilon=epsilon)


def _model_event(estimator: Any, setting: Mapping[str, Any], epsilon: float, width: int) -> Event:
    event: Event = _configured(estimator, setting, epsilon).privacy_event(width)
    return event


def _law_arguments(repetitions: str, mean: float, shape: float | None) -> dict[str, Any]:
    if repetitions == "geometric":
        return {"stop_probability": 1.0 / mean}
    return {"repetitions": repetitions, "mean": mean, "shape": shape}


def _guarantee(event: Event, delta: float | None) -> PureDP | ApproxDP:
    if delta is None:
        epsilon = pure_epsilon(event)
        assert epsilon is not None  # the trial event is pure here
        return PureDP(epsilon)
    from dpkit.accounting.rdp import RDPAccountant

    return ApproxDP(RDPAccountant().compose(event).get_epsilon(delta), delta)


def _largest_epsilon(total_epsilon: Any, budget: float, owner: str) -> float:
    """The largest model epsilon (relative 1e-9) whose total is within ``budget``."""
    low, high = 0.0, budget
    if total_epsilon(high) <= budget:
        return high
    for _ in range(100):
        middle = (low + high) / 2 if low > 0 else high / 2
        if total_epsilon(middle) <= budget:
            low = middle
        else:
            high = middle
        if low > 0 and high - low <= 1e-9 * low:
            break
    if low == 0.0:
        raise InvalidParameter(f"{owner}: the budget {budget!r} is too small for any trial.")
    return low


def _validation_mask(rows: int, fraction: float, rng: Random) -> npt.NDArray[np.bool_]:
    """Independent coins: row i is in validation with probability ``floor(f 2^64) / 2^64``.

    Independent per-row coins make the split exchangeable: adding or removing a row
    leaves the others' assignment law unchanged, which the privacy argument needs.
    """
    threshold = np.uint64(math.floor(math.ldexp(fraction, 64)))
    mask: npt.NDArray[np.bool_] = rng.uint64(rows) < threshold
    return mask


def _score_function(estimator: Any, X: npt.NDArray[Any], y: npt.NDArray[Any]) -> Any:
    """``model -> float`` with sensitivity 1 in the validation rows."""
    from sklearn.base import is_classifier

    if is_classifier(estimator):

        def correct(model: Any) -> float:
            if len(y) == 0:
                return 0.0
            return float((model.predict(X) == y).sum())

        return correct
    bounds = estimator.get_params().get("bounds_y")
    if bounds is None:
        raise InvalidParameter(
            "tune: a regressor is scored by its clipped squared error, which needs its "
            "public bounds_y."
        )
    low, high = (float(v) for v in bounds)
    # y is finite here (_data dropped the other rows), so each row's term is in [0, 1].
    target = np.clip(np.asarray(y, dtype=np.float64), low, high)

    def negative_error(model: Any) -> float:
        if len(y) == 0:
            return 0.0
        errors = ((model.predict(X) - target) / (high - low)) ** 2
        return -float(np.minimum(errors, 1.0).sum())

    return negative_error
