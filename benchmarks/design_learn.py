"""Optimised noise in DP models: naive Bayes and sparse logistic regression (issue 18 item 4).

Selvi, Liu & Wiesemann (arXiv 2304.12681, Tables 2-3) compare Gaussian, truncated
Laplace and LP-optimised noise in DP naive Bayes and DP proximal coordinate descent at
(epsilon, delta) = (1, 0.1). This script reruns that comparison with dpkit.learn's
``noise=`` option, with the privacy accounting done for the *whole* fit (the paper's
code gives every scalar statistic (1, 0.1) on its own; see the notes written to the
results file):

* models: ``GaussianNB`` (counts, sums and sums of squares per class; 1 + 2d scalar
  statistics per class) and ``SparseLogisticRegression`` (DP-CD: a noisy count and
  ``epochs (d + 1)`` noisy coordinate-gradient sums);
* noises: Laplace (pure epsilon-DP, so (epsilon, delta)-DP too), analytic Gaussian,
  truncated Laplace, ``"optimal"`` (dpkit.design, l2 loss), each at the same
  (epsilon, delta) for the whole fit;
* data: UCI Adult (``dpkit.data.load_adult_features``; 49 features), Wisconsin breast
  cancer (scikit-learn; 30 features, bounds = the ranges published in the data set's
  documentation), and handwritten digits (scikit-learn; 64 pixels in [0, 16]; naive
  Bayes over the 10 digits, logistic regression for "digit >= 5");
* reference: the same model with negligible noise (epsilon = 10^6), and scikit-learn's
  non-private counterpart.

Each cell: mean test error (%) over seeds (a fresh 70/30 split and fresh noise per
seed) with its standard error. Writes ``results/design_learn.md`` and
``results/design_learn.png``.

Run: ``python benchmarks/design_learn.py [--seeds 10] [--quick]``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import dpkit as dp
from dpkit.data import load_adult_features
from dpkit.errors import InsecureRandomWarning
from dpkit.testing import seeded

RESULTS = Path(__file__).parent / "results"
NOISES = ("laplace", "gaussian", "truncated_laplace", "optimal")
LABELS = {
    "laplace": "Laplace",
    "gaussian": "Gaussian (analytic)",
    "truncated_laplace": "truncated Laplace",
    "optimal": "optimised (LP, l2)",
}
SETTINGS = ((1.0, 0.1), (4.0, 1e-3))
#: DP-CD hyperparameters: fixed in advance for every data set (public choices).
CD_PARAMS = {"alpha": 0.005, "epochs": 2, "step_size": 4.0}


def breast_cancer() -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Features, labels and the public bounds: the min/max table of the data's DESCR."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    table = re.findall(r"^[a-z ]+\([a-z ]+\):\s+([0-9.]+)\s+([0-9.]+)\s*$", data.DESCR, re.M)
    bounds = np.array(table, dtype=float)
    assert bounds.shape == (30, 2)
    return data.data, data.target, (bounds[:, 0], bounds[:, 1])


def digits() -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
    from sklearn.datasets import load_digits

    data = load_digits()
    return data.data, data.target, (0.0, 16.0)


def datasets() -> dict[str, tuple[np.ndarray, np.ndarray, object]]:
    X, y, _ = load_adult_features()
    cancer = breast_cancer()
    pixels = digits()
    return {
        "Adult": (X, y, (0.0, 1.0)),
        "breast cancer": cancer,
        "digits": pixels,
    }


def split(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(1000 + seed).permutation(rows)  # the split, not noise
    cut = int(0.7 * rows)
    return order[:cut], order[cut:]


def nb_error(X, y, bounds, train, test, noise: str, eps: float, delta: float, seed: int):
    classes = np.unique(y)  # the public label set of each data set (documented)
    model = dp.learn.GaussianNB(
        epsilon=eps,
        noise=noise,
        delta=0.0 if noise == "laplace" else delta,
        bounds=bounds,
        classes=classes,
        rng=seeded(seed),
    )
    model.fit(X[train], y[train])
    return 1.0 - model.score(X[test], y[test])


def cd_error(X, y, bounds, train, test, noise: str, eps: float, delta: float, seed: int):
    binary = (y >= 5).astype(int) if y.max() > 1 else y
    model = dp.learn.SparseLogisticRegression(
        epsilon=eps,
        noise=noise,
        delta=0.0 if noise == "laplace" else delta,
        bounds=bounds,
        rng=seeded(seed),
        **CD_PARAMS,
    )
    model.fit(X[train], binary[train])
    return 1.0 - model.score(X[test], binary[test])


def references(X, y, bounds, seeds: int) -> dict[str, tuple[float, float, float]]:
    """Test errors of the same models with negligible noise, and scikit-learn's."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB

    out = {"nb": [], "cd": [], "sk_nb": [], "sk_lr": []}
    binary = (y >= 5).astype(int) if y.max() > 1 else y
    for seed in range(seeds):
        train, test = split(len(y), seed)
        out["nb"].append(nb_error(X, y, bounds, train, test, "laplace", 1e6, 0.0, seed))
        out["cd"].append(cd_error(X, y, bounds, train, test, "laplace", 1e6, 0.0, seed))
        out["sk_nb"].append(1 - GaussianNB().fit(X[train], y[train]).score(X[test], y[test]))
        scaled = np.clip(X, *bounds)
        logistic = LogisticRegression(penalty="l1", solver="liblinear", max_iter=1000)
        logistic.fit(scaled[train], binary[train])
        out["sk_lr"].append(1 - logistic.score(scaled[test], binary[test]))
    return {
        key: (float(np.mean(v)), float(np.std(v) / np.sqrt(len(v))), 0.0) for key, v in out.items()
    }


def budgets(data: dict) -> list[str]:
    """Per-statistic budget of the dominant statistic and each noise's expected squared
    error there (units of the sensitivity): why the columns differ, or do not."""
    from dpkit.design import baselines
    from dpkit.learn._noise import optimal_design

    lines = [
        "| model | data set | (eps, delta) | statistic | (eps_i, delta_i) | Laplace "
        "| Gaussian | truncated Laplace | optimised | optimised / truncated Laplace |",
        "|---" * 10 + "|",
    ]
    for name, (X, _, _) in data.items():
        d = X.shape[1]
        for eps, delta in SETTINGS:
            nb = dp.learn.GaussianNB(epsilon=eps, delta=delta, classes=[0, 1])
            cd = dp.learn.SparseLogisticRegression(epsilon=eps, delta=delta, **CD_PARAMS)
            for model, what, (e_i, d_i) in (
                ("naive Bayes", "a sum", nb.statistic_budgets(d)[1]),
                ("DP-CD", "an update", cd.update_budget(d)),
            ):
                design = optimal_design(e_i, d_i)
                losses = (
                    baselines.laplace_loss(epsilon=e_i, loss="l2"),
                    baselines.gaussian_loss(epsilon=e_i, delta=d_i, loss="l2"),
                    baselines.truncated_laplace_loss(epsilon=e_i, delta=d_i, loss="l2"),
                    design.expected_loss / design.sensitivity**2,
                )
                cells = " | ".join(f"{v:.4g}" for v in losses)
                lines.append(
                    f"| {model} | {name} | ({eps:g}, {delta:g}) | {what} | "
                    f"({e_i:.3g}, {d_i:.3g}) | {cells} | {losses[3] / losses[2]:.4f} |"
                )
    return lines


def paired(data: dict, seeds: int) -> list[str]:
    """Optimised minus truncated Laplace on the same splits: is there a difference?"""
    X, y, bounds = data["breast cancer"]
    eps, delta = SETTINGS[0]
    lines = []
    for model, error in (("naive Bayes", nb_error), ("DP-CD", cd_error)):
        differences = []
        for seed in range(seeds):
            train, test = split(len(y), seed)
            args = (X, y, bounds, train, test)
            optimised = error(*args, "optimal", eps, delta, seed)
            truncated = error(*args, "truncated_laplace", eps, delta, seed)
            differences.append(optimised - truncated)
        mean = 100 * float(np.mean(differences))
        se = 100 * float(np.std(differences) / np.sqrt(seeds))
        lines.append(
            f"* {model}, breast cancer, (eps, delta) = ({eps:g}, {delta:g}), {seeds} paired "
            f"seeds: optimised minus truncated Laplace = {mean:+.2f} ± {se:.2f} points."
        )
    return lines


def run(seeds: int) -> dict:
    data = datasets()
    results: dict = {"cells": {}, "references": {}, "seconds": {}, "budgets": budgets(data)}
    results["paired"] = paired(data, 5 * seeds)
    for name, (X, y, bounds) in data.items():
        results["references"][name] = references(X, y, bounds, seeds)
        for eps, delta in SETTINGS:
            for model, error in (("nb", nb_error), ("cd", cd_error)):
                for noise in NOISES:
                    start = time.perf_counter()
                    errors = []
                    for seed in range(seeds):
                        train, test = split(len(y), seed)
                        errors.append(error(X, y, bounds, train, test, noise, eps, delta, seed))
                    key = (name, model, eps, delta, noise)
                    results["cells"][key] = (
                        float(np.mean(errors)),
                        float(np.std(errors) / np.sqrt(seeds)),
                    )
                    results["seconds"][key] = time.perf_counter() - start
                    mean, se = results["cells"][key]
                    print(f"{name:14s} {model} eps={eps:g} delta={delta:g} {noise:18s} "
                          f"{100 * mean:6.2f}% +- {100 * se:.2f}", flush=True)  # fmt: skip
    return results


def table(results: dict, model: str, seeds: int) -> list[str]:
    names = list(results["references"])
    head = "| data set | (eps, delta) | " + " | ".join(LABELS[n] for n in NOISES)
    reference = "same model, eps=1e6" if model == "nb" else "same algorithm, eps=1e6"
    sk = "scikit-learn GaussianNB" if model == "nb" else "scikit-learn L1 logistic"
    lines = [head + f" | {reference} | {sk} |", "|---" * (len(NOISES) + 4) + "|"]
    for name in names:
        ref = results["references"][name]
        own, other = ref[model], ref["sk_nb" if model == "nb" else "sk_lr"]
        for eps, delta in SETTINGS:
            cells = [results["cells"][(name, model, eps, delta, n)] for n in NOISES]
            private = [c[0] for c in cells[1:]]  # best among the (eps, delta) noises
            row = []
            for noise, (mean, se) in zip(NOISES, cells, strict=True):
                text = f"{100 * mean:.2f} ± {100 * se:.2f}"
                if noise != "laplace" and mean == min(private):
                    text = f"**{text}**"
                row.append(text)
            lines.append(
                f"| {name} | ({eps:g}, {delta:g}) | " + " | ".join(row)
                + f" | {100 * own[0]:.2f} | {100 * other[0]:.2f} |"
            )  # fmt: skip
    lines.append("")
    lines.append(f"Test error in %, mean ± standard error over {seeds} seeds (split and noise).")
    return lines


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["references"])
    fig, axes = plt.subplots(2, len(SETTINGS), figsize=(11, 7), sharey="row")
    width = 0.8 / len(NOISES)
    for row, model in enumerate(("nb", "cd")):
        for col, (eps, delta) in enumerate(SETTINGS):
            ax = axes[row][col]
            for k, noise in enumerate(NOISES):
                cells = [results["cells"][(n, model, eps, delta, noise)] for n in names]
                ax.bar(
                    np.arange(len(names)) + (k - 1.5) * width,
                    [100 * c[0] for c in cells],
                    width,
                    yerr=[100 * c[1] for c in cells],
                    label=LABELS[noise],
                )
            refs = [100 * results["references"][n][model][0] for n in names]
            ax.scatter(np.arange(len(names)), refs, marker="_", s=900, color="black",
                       zorder=3, label="same model, eps = 1e6")  # fmt: skip
            ax.set_xticks(np.arange(len(names)), names)
            title = "Gaussian naive Bayes" if model == "nb" else "sparse logistic (DP-CD)"
            ax.set_title(f"{title}, (eps, delta) = ({eps:g}, {delta:g})", fontsize=10)
            ax.set_ylabel("test error (%)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


NOTES = """
## What differs from the paper, and why

* **The budget is for the whole fit.** The authors' code (`ML Algorithms Julia/
  sensitivities.jl`, `PCD_functions.jl` in `selvi-aras/DP-via-DRO`) adds (1, 0.1)-noise
  to *each* scalar statistic (every count, mean and standard deviation; every
  coordinate-gradient sum) with no composition, so their fits are (k, 0.1 k)-DP for
  k statistics (k = 1 + 2d per class for naive Bayes, T K updates for DP-CD). dpkit
  splits (eps, delta) over the statistics by basic composition, so every noise here is
  calibrated to a far smaller per-statistic (eps_i, delta_i): on Adult naive Bayes,
  eps_i = 0.45/49 = 0.009 for a sum. At such eps_i the optimal noise and truncated
  Laplace have almost the same loss (l2: 7599.26 vs 7599.10 at (0.0092, 0.00092) in
  units of the sensitivity: the LP's grid costs more than the optimum gains), which is
  why the columns agree within noise at (1, 0.1).
* **The paper's per-statistic delta composes past 1.** With 1 + 2d = 99 statistics per
  class on Adult, (1, 0.1) each is, by basic composition, (99, 9.9): no guarantee at
  all (any composition theorem leaves delta >= 1 - 0.9^99 > 0.9999). Honest whole-fit
  budgets put every statistic in the high-privacy regime where truncated Laplace is
  already near-optimal (the paper's own Figure 3 finding): the table above shows
  optimised / truncated Laplace = 1.0000-1.0003 in expected squared error, so the
  model errors of the two columns differ only by sampling noise. The LP pays off for
  statistics with a larger eps_i: at (eps_i, delta_i) = (1, 0.1) the l2-optimal noise
  has expected squared error 0.818 against 0.879 for truncated Laplace (-7%) and 1.18
  for the analytic Gaussian (dpkit.design, beta = 0.05).
* **Sensitivities and bounds are public.** The authors' code measures feature ranges
  and class counts on the data to set the sensitivities; dpkit uses public bounds
  (Adult: the documented ranges behind `load_adult_features`; breast cancer: the
  min/max table of the data set's own documentation; digits: [0, 16]) and noisy counts.
* **Model.** dpkit's GaussianNB models every feature (one-hot columns included) as
  Gaussian; the paper's model uses categorical counts for categorical features. The
  variance floor at the noise level makes the DP model *better* than the same model
  without noise on Adult (one-hot columns get near-zero variances otherwise).
* **The paper's Gaussian column** uses the classic calibration sigma = sqrt(2 ln(1.25/delta))/eps,
  valid only for eps < 1 (Dwork & Roth Thm A.1); at eps = 1 it is not a valid (1, 0.1)
  guarantee. dpkit uses the analytic calibration (Balle & Wang 2018) only.
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seeds = 2 if args.quick else args.seeds
    warnings.simplefilter("ignore", InsecureRandomWarning)
    # the references run at eps = 1e6 on purpose
    warnings.simplefilter("ignore", dp.errors.WeakGuaranteeWarning)
    start = time.perf_counter()
    results = run(seeds)
    elapsed = time.perf_counter() - start
    RESULTS.mkdir(exist_ok=True)
    lines = [
        "# Optimised noise in DP models (benchmarks/design_learn.py)",
        "",
        "Test error (%) of dpkit.learn models with each `noise=` at the same (eps, delta) "
        "for the whole fit (add/remove one row). Bold: the best of the three (eps, delta) "
        "noises (Laplace is pure eps-DP). References: the same model with negligible noise "
        "(eps = 10^6) and scikit-learn's non-private model.",
        "",
        "## Gaussian naive Bayes (`dp.learn.GaussianNB`)",
        "",
        *table(results, "nb", seeds),
        "",
        "## Sparse logistic regression by DP proximal coordinate descent "
        "(`dp.learn.SparseLogisticRegression`)",
        "",
        f"Hyperparameters fixed in advance for every data set: {CD_PARAMS}.",
        "",
        *table(results, "cd", seeds),
        "",
        "## Why: the per-statistic budgets",
        "",
        "Expected squared error of each noise (units of the statistic's sensitivity) at "
        "the per-statistic (eps_i, delta_i) that basic composition leaves to one sum "
        "(naive Bayes) or one coordinate update (DP-CD).",
        "",
        *results["budgets"],
        "",
        "Paired comparison (the same splits for both noises, test error in points):",
        "",
        *results["paired"],
        NOTES,
        f"Run time: {elapsed:.0f} s on this machine ({seeds} seeds; the optimal designs "
        "are solved once per (eps_i, delta_i) and cached).",
        "",
        "![design_learn](design_learn.png)",
        "",
    ]
    (RESULTS / "design_learn.md").write_text("\n".join(lines))
    plot(results, RESULTS / "design_learn.png")
    print(f"wrote {RESULTS / 'design_learn.md'} in {elapsed:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
