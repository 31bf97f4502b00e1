"""Tuning a DP model honestly: random stopping vs paying for every trial vs no tuning.

On UCI Adult (bundled), logistic regression (dpkit.learn, noisy gradient descent) over
20 hyperparameter settings (learning rate x number of steps). At the same total
budget (epsilon, delta = 1e-6) for the whole procedure:

* **random stopping** -- ``dp.tune``: a geometric number of trials (mean 10), each a
  random setting trained and scored privately, the best released (LT19 Alg. 2; the
  run's RDP by Papernot & Steinke 2022, Thm 2);
* **train all, pay composition** -- every one of the 20 settings trained and scored,
  the best noisy score kept; the budget is split by composing the 20 trials (RDP);
* **untuned default** -- ``LogisticRegression()`` with its default hyperparameters at
  the whole budget.

Each cell: mean test accuracy (held-out 20% of Adult) over paired seeds. Writes
``results/tuning.md`` and ``results/tuning.png``.

Run: ``python benchmarks/tuning.py [--seeds 8] [--quick]``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import dpkit as dp
from dpkit.accounting import ComposedEvent, LaplaceEvent, RDPAccountant, RepeatedEvent
from dpkit.data import load_adult_features
from dpkit.errors import InsecureRandomWarning
from dpkit.testing import seeded

RESULTS = Path(__file__).parent / "results"
DELTA = 1e-6
SPACE = {"learning_rate": [0.1, 0.5, 2.0, 8.0, 32.0], "max_iter": [10, 25, 50, 100]}
SCORE_SHARE = 0.1
COUNT_SHARE = 0.02


def settings() -> list[dict[str, float]]:
    return [
        {"learning_rate": lr, "max_iter": steps}
        for lr in SPACE["learning_rate"]
        for steps in SPACE["max_iter"]
    ]


def train_all(X, y, epsilon: float, rng: dp.Random) -> tuple[object, float]:
    """Every setting trained and scored once; composition of all trials within budget."""
    every = settings()
    count_epsilon = COUNT_SHARE * epsilon

    def total(model_epsilon: float) -> float:
        trial = ComposedEvent(
            (
                dp.learn.LogisticRegression(epsilon=model_epsilon, delta=DELTA).privacy_event(),
                LaplaceEvent(1 / (SCORE_SHARE * model_epsilon)),
            )
        )
        event = ComposedEvent((LaplaceEvent(1 / count_epsilon), RepeatedEvent(trial, len(every))))
        return RDPAccountant().compose(event).get_epsilon(DELTA)

    low, high = 0.0, epsilon
    for _ in range(50):  # bisection: the largest trial epsilon within budget
        middle = (low + high) / 2
        low, high = (middle, high) if total(middle) <= epsilon else (low, middle)
    model_epsilon = low
    validation = rng.uint64(len(y)) < np.uint64(2**64 // 5)
    best, best_score = None, -math.inf
    for setting in every:
        model = dp.learn.LogisticRegression(
            epsilon=model_epsilon, delta=DELTA, bounds=(0, 1), rng=rng, **setting
        ).fit(X[~validation], y[~validation])
        correct = float((model.predict(X[validation]) == y[validation]).sum())
        noisy = float(dp.noise.laplace(correct, scale=1 / (SCORE_SHARE * model_epsilon), rng=rng))
        if noisy > best_score:
            best, best_score = model, noisy
    return best, model_epsilon


def run(seeds: int, epsilons: list[float]) -> dict[str, dict[float, list[float]]]:
    X, y, _ = load_adult_features()
    methods = ("random stopping (dp.tune)", "train all, pay composition", "untuned default")
    accuracy: dict[str, dict[float, list[float]]] = {m: {e: [] for e in epsilons} for m in methods}
    for epsilon in epsilons:
        for seed in range(seeds):
            order = np.random.default_rng(seed).permutation(len(y))  # public split
            cut = int(0.8 * len(y))
            train, test = order[:cut], order[cut:]
            rng = seeded(1000 * seed + 7)
            start = time.perf_counter()
            tuned = dp.tune(
                dp.learn.LogisticRegression(bounds=(0, 1)),
                SPACE,
                X[train],
                y[train],
                budget=dp.ApproxDP(epsilon, DELTA),
                mean_trials=10.0,
                score_share=SCORE_SHARE,
                count_share=COUNT_SHARE,
                rng=rng,
            )
            accuracy[methods[0]][epsilon].append(tuned.model.score(X[test], y[test]))
            every, _ = train_all(X[train], y[train], epsilon, rng)
            accuracy[methods[1]][epsilon].append(every.score(X[test], y[test]))  # type: ignore[attr-defined]
            default = dp.learn.LogisticRegression(
                epsilon=epsilon, delta=DELTA, bounds=(0, 1), rng=rng
            )
            default.fit(X[train], y[train])
            accuracy[methods[2]][epsilon].append(default.score(X[test], y[test]))
            print(
                f"eps={epsilon} seed={seed}: "
                + ", ".join(f"{m.split(' ')[0]} {accuracy[m][epsilon][-1]:.4f}" for m in methods)
                + f" ({time.perf_counter() - start:.1f} s)",
                flush=True,
            )
    return accuracy


def report(accuracy: dict[str, dict[float, list[float]]], seeds: int) -> str:
    epsilons = sorted(next(iter(accuracy.values())))
    lines = [
        "# Tuning logistic regression on Adult at a fixed total budget",
        "",
        f"Mean test accuracy over {seeds} paired seeds (+- one standard error); delta = "
        f"{DELTA:g}; search space {len(settings())} settings (learning rate x steps). "
        "Produced by `python benchmarks/tuning.py`.",
        "",
        "| method | " + " | ".join(f"eps = {e:g}" for e in epsilons) + " |",
        "|---|" + "---:|" * len(epsilons),
    ]
    for method, cells in accuracy.items():
        row = []
        for e in epsilons:
            values = np.array(cells[e])
            error = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else 0.0
            row.append(f"{values.mean():.4f} +- {error:.4f}")
        lines.append(f"| {method} | " + " | ".join(row) + " |")
    lines.append(f"| majority class | {' | '.join(['0.7592'] * len(epsilons))} |")
    return "\n".join(lines) + "\n"


def plot(accuracy: dict[str, dict[float, list[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    for method, cells in accuracy.items():
        epsilons = sorted(cells)
        means = [np.mean(cells[e]) for e in epsilons]
        errors = [np.std(cells[e], ddof=1) / math.sqrt(len(cells[e])) for e in epsilons]
        axes.errorbar(epsilons, means, yerr=errors, marker="o", capsize=3, label=method)
    axes.axhline(0.7592, color="grey", linestyle=":", label="majority class")
    axes.set_xscale("log")
    axes.set_xlabel("total epsilon of the whole procedure (delta = 1e-6)")
    axes.set_ylabel("test accuracy (Adult)")
    axes.set_title("Tuning DP logistic regression over 20 settings")
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="2 seeds, 2 budgets")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", InsecureRandomWarning)
    seeds = 2 if args.quick else args.seeds
    epsilons = [0.3, 1.0] if args.quick else [0.1, 0.3, 1.0, 3.0]
    accuracy = run(seeds, epsilons)
    text = report(accuracy, seeds)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tuning.md").write_text(text)
    plot(accuracy, RESULTS / "tuning.png")


if __name__ == "__main__":
    main(sys.argv[1:])
