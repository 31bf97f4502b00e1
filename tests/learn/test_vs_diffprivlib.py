"""dpkit.learn is no less accurate than diffprivlib's same-named models at equal epsilon.

Stated test (issue 16): for each model, table and epsilon in {0.5, 1, 3}, 20 paired runs
(seed s: the same train/test split, 80/20, for both libraries) give differences
``D_s = score_dpkit - score_diffprivlib``. dpkit passes only if the test rejects
"dpkit is worse by more than the margin":

* classifiers (accuracy, bounded): H0: E[D] <= -0.005 (half a percentage point), one-
  sided paired t-test at level 1e-3 (t > t_{0.999, 19} = 3.579);
* regression (R^2, unbounded below, and diffprivlib's runs sometimes explode to
  -1e7, which makes a mean meaningless): H0: P(D > -0.01) <= 1/2, one-sided sign test,
  rejected when at least 18 of the 20 seeds have D > -0.01 (level 2.0e-4).

Power check: the same classifier test does not pass a constant (majority-class)
classifier against diffprivlib. Every model and table runs at epsilon 1 by default;
epsilon 0.5 and 3 (10-20 s each on an idle machine) run with --runslow.

Both libraries get the same public information: feature bounds (Adult: its public
bounds, as in :func:`dpkit.data.load_adult_features`; the scikit-learn tables: the
range of each column, given to both as if public), and for logistic regression
diffprivlib's ``data_norm`` is the public bound sqrt(11) on a row's norm. Neighbouring
relations differ: diffprivlib's models treat the number of rows as public (replace one
row) and LogisticRegression is epsilon-DP; dpkit's are add/remove one row, and its
LogisticRegression is (epsilon, 1e-6)-DP (noisy gradient descent needs a delta).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest
from scipy import stats
from threadpoolctl import threadpool_limits

import dpkit as dp
from dpkit.data import load_adult_features
from dpkit.testing import seeded

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # diffprivlib's own import-time deprecations
    import diffprivlib.models as dpl
from sklearn.datasets import load_breast_cancer, load_diabetes

SEEDS = 20
EPSILONS = (0.5, 1.0, 3.0)
LEVEL = 1e-3


def non_inferior(differences: np.ndarray, margin: float) -> tuple[bool, float]:
    """One-sided paired t-test of H0: mean <= -margin; (rejected, t statistic)."""
    mean = differences.mean()
    error = differences.std(ddof=1) / np.sqrt(len(differences))
    t = (mean + margin) / max(error, 1e-12)
    return bool(t > stats.t.ppf(1 - LEVEL, len(differences) - 1)), float(t)


def non_inferior_median(differences: np.ndarray, margin: float) -> tuple[bool, int]:
    """One-sided sign test of H0: P(D > -margin) <= 1/2; (rejected, seeds above)."""
    above = int((differences > -margin).sum())
    p_value = stats.binom.sf(above - 1, len(differences), 0.5)
    return bool(p_value <= LEVEL), above


@cache
def tables() -> dict[str, tuple[np.ndarray, np.ndarray, Any, Any]]:
    """name -> (X, y, feature bounds, target bounds)."""
    X, y, _ = load_adult_features()
    unit = (np.zeros(X.shape[1]), np.ones(X.shape[1]))
    cancer = load_breast_cancer()
    diabetes = load_diabetes()
    return {
        "adult": (X, y, unit, None),
        "adult-numeric": (X[:, :5], y, (np.zeros(5), np.ones(5)), None),
        "breast-cancer": (
            cancer.data,
            cancer.target,
            (cancer.data.min(0), cancer.data.max(0)),
            None,
        ),
        # Regression: age (scaled to [0, 1]) from the other Adult features.
        "adult-age": (X[:, 1:], X[:, 0], (unit[0][1:], unit[1][1:]), (0.0, 1.0)),
        "diabetes": (
            diabetes.data,
            diabetes.target,
            (diabetes.data.min(0), diabetes.data.max(0)),
            (25.0, 350.0),
        ),
    }


Maker = Callable[[float, int, Any, Any], Any]

OURS: dict[str, Maker] = {
    "LogisticRegression": lambda e, s, b, by: dp.learn.LogisticRegression(
        epsilon=e, bounds=b, rng=seeded(s)
    ),
    "GaussianNB": lambda e, s, b, by: dp.learn.GaussianNB(
        epsilon=e, bounds=b, classes=[0, 1], rng=seeded(s)
    ),
    "LinearRegression": lambda e, s, b, by: dp.learn.LinearRegression(
        epsilon=e, bounds=b, bounds_y=by, rng=seeded(s)
    ),
}
THEIRS: dict[str, Maker] = {
    "LogisticRegression": lambda e, s, b, by: dpl.LogisticRegression(
        epsilon=e, data_norm=np.sqrt(11), random_state=s
    ),
    "GaussianNB": lambda e, s, b, by: dpl.GaussianNB(epsilon=e, bounds=b, random_state=s),
    "LinearRegression": lambda e, s, b, by: dpl.LinearRegression(
        epsilon=e, bounds_X=b, bounds_y=by, random_state=s
    ),
}
CASES = [
    ("LogisticRegression", "adult", 0.005),
    ("GaussianNB", "adult-numeric", 0.005),
    ("GaussianNB", "breast-cancer", 0.005),
    ("LinearRegression", "adult-age", 0.01),
    ("LinearRegression", "diabetes", 0.01),
]


def split(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(rows)  # a public split, not noise
    cut = int(0.8 * rows)
    return order[:cut], order[cut:]


# One BLAS/OpenMP thread per process. The costly case is Logistic regression on Adult:
# 40 fits (20 seeds x 2 libraries) on 26,048 x 49 training rows, dpkit's being 100
# full-batch noisy gradient steps. Each pytest-xdist worker starting one thread per core
# (2 workers x 2 threads on 2 cores) made diffprivlib's fit 5-8x slower (7-9 s against
# 1 s measured) and dpkit's 1.5-2x. Same fits, same seeds; only the order of BLAS's
# float additions may differ.
ONE_THREAD = 1


@cache
def library_scores(library: str, model: str, table: str, epsilon: float) -> np.ndarray:
    """The test scores of one library's model over the seeds (each fit seeded apart)."""
    X, y, bounds, bounds_y = tables()[table]
    make = {"dpkit": OURS, "diffprivlib": THEIRS}[library][model]
    scores = []
    with warnings.catch_warnings(), threadpool_limits(limits=ONE_THREAD):
        warnings.simplefilter("ignore")  # diffprivlib's PrivacyLeakWarning and friends
        for seed in range(SEEDS):
            train, test = split(len(y), seed)
            fitted = make(epsilon, seed, bounds, bounds_y).fit(X[train], y[train])
            scores.append(fitted.score(X[test], y[test]))
    return np.array(scores)


def paired_scores(model: str, table: str, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """(dpkit, diffprivlib) scores, paired by seed: the same split for both."""
    return (
        library_scores("dpkit", model, table, epsilon),
        library_scores("diffprivlib", model, table, epsilon),
    )


def _cases() -> list[Any]:
    # Epsilon 0.5 and 3 run with --runslow only: 22-40 s each on two busy workers, and
    # the default run must stay under 15 minutes on 2 cores; every model and table at
    # epsilon 1 runs by default.
    slow = [pytest.mark.slow]
    return [
        pytest.param(
            model,
            table,
            margin,
            epsilon,
            id=f"{model}-{table}-{epsilon}",
            marks=slow if epsilon != 1.0 else [],
        )
        for model, table, margin in CASES
        for epsilon in EPSILONS
    ]


@pytest.mark.parametrize(("model", "table", "margin", "epsilon"), _cases())
def test_no_worse_than_diffprivlib(model: str, table: str, margin: float, epsilon: float) -> None:
    ours, theirs = paired_scores(model, table, epsilon)
    if model == "LinearRegression":
        rejected, above = non_inferior_median(ours - theirs, margin)
        detail = f"{above} of {SEEDS} seeds within the margin"
    else:
        rejected, t = non_inferior(ours - theirs, margin)
        detail = f"t = {t:.2f}"
    assert rejected, (
        f"{model} on {table} at epsilon={epsilon}: dpkit median {np.median(ours):.4f} vs "
        f"diffprivlib {np.median(theirs):.4f}, {detail}"
    )
    if (model, table) == ("LogisticRegression", "adult"):
        # Power: the same test does not pass a constant (majority-class) classifier
        # against diffprivlib's scores. Checked here, on the scores just computed
        # (~25 s of fits that a separate test would repeat in another worker process).
        assert not majority_class_passes(theirs)


def majority_class_passes(theirs: np.ndarray) -> bool:
    """Whether the classifier test passes the majority class against ``theirs``."""
    _, y, _, _ = tables()["adult"]
    majority = []
    for seed in range(SEEDS):
        _, test = split(len(y), seed)
        majority.append(1.0 - y[test].mean())
    return non_inferior(np.array(majority) - theirs, 0.005)[0]


def test_power_the_sign_test_fails_a_weaker_regression() -> None:
    # The sign test does not pass dpkit's own regression at epsilon 0.05 against
    # epsilon 3 (a real, weaker model). (The classifier test's power check runs in
    # test_no_worse_than_diffprivlib, on Adult's logistic regressions.)
    # Only dpkit's fits: diffprivlib's at epsilon 3 are not needed here.
    strong = library_scores("dpkit", "LinearRegression", "adult-age", 3.0)
    weak = library_scores("dpkit", "LinearRegression", "adult-age", 0.05)
    assert not non_inferior_median(weak - strong, 0.01)[0]
