"""Tree selection (noisy low-sensitivity queries) versus the exponential mechanism.

Measures the expected excess loss ``E[l(Y)] - min l`` of ``dp.select_by_tree`` (the
binary-tree algorithm of Steinke's 2025 open-problem post) and of dpkit's exact
``dp.exponential`` (scores ``-l``, sensitivity 1) at the same privacy, for
``|Y| = 2^4, 2^6, ..., 2^20``:

* Gaussian tree at 1/2-zCDP (noise variance k per query, the post's normalisation)
  versus the exponential mechanism at epsilon = 2, which is 1/2-zCDP too
  (epsilon-bounded range => epsilon^2/8-zCDP; Cesar & Rogers 2021);
* Laplace tree at epsilon = 1 (scale k per query) versus the exponential mechanism at
  epsilon = 1.

Loss families (both have sensitivity-1 semantics; only the values matter here). Each
is the worst case of one of the two mechanisms, so together they show the worst-case
growth of both, which a single i.i.d. family does not (on i.i.d. uniform losses
both mechanisms' excess stays O(1)):

* ``ladder`` -- l(y) = delta * (number of left turns on y's path); the minimum is the
  right-most leaf, and every query on every path has |q| = delta/2. With
  delta = 2 v* s (v* = 0.7518 Gaussian, 1 Laplace) each level costs the analysis's
  maximum, so the tree's excess equals its bound 0.34 s k (Gaussian) or k b / e
  (Laplace): Theta(k^{3/2}), resp. Theta(k^2). Hard for the tree.
* ``planted`` -- one candidate at 0 (the last, deep in the right-most branch), all
  others tied at the gap Delta that maximises the exponential mechanism's excess
  (n - 1) Delta w / (1 + (n - 1) w), w = exp(-epsilon Delta / 2): Theta(log |Y|).
  Hard for the exponential mechanism.

Every cell gives the exact expectation (both output distributions are explicit:
``TreeSelection.distribution`` and the softmax), and a seeded Monte Carlo mean of
the real samplers with its standard error. Timings: median time of one call.
Run ``python benchmarks/tree_selection.py`` (about 2-4 minutes on 2 cores); writes
``benchmarks/results/tree_selection.md`` and ``.png``.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import optimize, special

import dpkit as dp
from dpkit.selection.tree import TreeSelection
from dpkit.testing import seeded

RESULTS = Path(__file__).resolve().parent / "results"
EXPONENTS = list(range(4, 21, 2))
V_STAR = {
    "gaussian": float(optimize.minimize_scalar(lambda v: -v * special.ndtr(-v), (0.5, 1.0)).x),
    "laplace": 1.0,
}
SETTINGS = {  # name: (tree parameters, exponential-mechanism epsilon, label)
    "gaussian": ({"rho": 0.5}, 2.0, "Gaussian tree, 1/2-zCDP  vs  EM, eps = 2 (1/2-zCDP)"),
    "laplace": ({"epsilon": 1.0}, 1.0, "Laplace tree, eps = 1  vs  EM, eps = 1"),
}
TREE_REPS = 20_000


def em_reps(n: int) -> int:
    """Monte Carlo repetitions of the exponential mechanism (one O(n) call each)."""
    # The planted family's excess is gap * Bernoulli(~1/2): 400 runs give ~5% error.
    return 2000 if n <= 2**14 else {2**16: 1000, 2**18: 500}.get(n, 400)


def ladder(n: int, step: float) -> np.ndarray:
    out = np.zeros(n)
    stack = [(0, n, 0.0)]
    while stack:
        lo, hi, value = stack.pop()
        if hi - lo == 1:
            out[lo] = value
            continue
        middle = lo + (hi - lo + 1) // 2
        stack += [(lo, middle, value + step), (middle, hi, value)]
    return out


def em_worst_gap(n: int, epsilon: float) -> float:
    c = epsilon / 2

    def excess(gap: float) -> float:
        w = (n - 1) * math.exp(-c * gap)
        return gap * w / (1 + w)

    result = optimize.minimize_scalar(lambda g: -excess(g), bounds=(0.0, 4 * math.log(n) / c + 10))
    return float(result.x)


def em_exact(losses: np.ndarray, epsilon: float) -> float:
    log_w = -(epsilon / 2) * (losses - losses.min())
    p = np.exp(log_w - special.logsumexp(log_w))
    return float(p @ (losses - losses.min()))


def mean_se(values: np.ndarray) -> tuple[float, float]:
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))


def run_cell(oracle: str, n: int, family: str) -> dict[str, float]:
    tree_kwargs, em_epsilon, _ = SETTINGS[oracle]
    mechanism = TreeSelection(n, **tree_kwargs)
    if family == "ladder":
        losses = ladder(n, 2 * V_STAR[oracle] * mechanism.scale)
    else:
        losses = np.full(n, em_worst_gap(n, em_epsilon))
        losses[-1] = 0.0
    excess = losses - losses.min()
    out = {
        "tree_exact": float(mechanism.distribution(losses) @ excess),
        "em_exact": em_exact(losses, em_epsilon),
        "bound": mechanism.expected_excess_bound(),
    }
    seed = 1000 * n + (0 if family == "ladder" else 1) + (0 if oracle == "gaussian" else 2)
    out["tree_mc"], out["tree_se"] = mean_se(
        excess[mechanism.sample_many(losses, TREE_REPS, rng=seeded(seed))]
    )
    rng = seeded(seed + 7)
    times, picks = [], []
    for _ in range(em_reps(n)):
        start = time.perf_counter()
        picks.append(dp.exponential(-losses, epsilon=em_epsilon, rng=rng).value)
        times.append(time.perf_counter() - start)
    out["em_mc"], out["em_se"] = mean_se(excess[np.array(picks)])
    out["em_ms"] = 1e3 * statistics.median(times)
    tree_times = []
    for _ in range(5):
        start = time.perf_counter()
        dp.select_by_tree(losses, rng=rng, **tree_kwargs)
        tree_times.append(time.perf_counter() - start)
    out["tree_ms"] = 1e3 * statistics.median(tree_times)
    return out


def cell(exact: float, mc: float, se: float) -> str:
    return f"{exact:.3g} ({mc:.3g} ± {se:.2g})"


def table(oracle: str, rows: dict[tuple[int, str], dict[str, float]]) -> list[str]:
    label = SETTINGS[oracle][2]
    growth = "k^{3/2}" if oracle == "gaussian" else "k^2"
    bound_name = "0.34 k^{3/2}" if oracle == "gaussian" else "k^2/e"
    lines = [
        f"### {label}",
        "",
        f"| \\|Y\\| | k | tree: ladder | tree: planted | EM: ladder | EM: planted | "
        f"tree worst / {growth} | EM worst / ln\\|Y\\| | bound {bound_name} | "
        "tree ms/call | EM ms/call |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in EXPONENTS:
        n = 2**e
        lad, pla = rows[(n, "ladder")], rows[(n, "planted")]
        tree_worst = max(lad["tree_exact"], pla["tree_exact"])
        em_worst = max(lad["em_exact"], pla["em_exact"])
        power = 1.5 if oracle == "gaussian" else 2.0
        lines.append(
            f"| 2^{e} | {e} | {cell(lad['tree_exact'], lad['tree_mc'], lad['tree_se'])} | "
            f"{cell(pla['tree_exact'], pla['tree_mc'], pla['tree_se'])} | "
            f"{cell(lad['em_exact'], lad['em_mc'], lad['em_se'])} | "
            f"{cell(pla['em_exact'], pla['em_mc'], pla['em_se'])} | "
            f"{tree_worst / e**power:.3f} | {em_worst / math.log(n):.3f} | "
            f"{lad['bound']:.3g} | {statistics.median([lad['tree_ms'], pla['tree_ms']]):.2f} | "
            f"{statistics.median([lad['em_ms'], pla['em_ms']]):.2f} |"
        )
    return lines


def plot(rows: dict[str, dict[tuple[int, str], dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    ns = np.array([2**e for e in EXPONENTS])
    ks = np.array(EXPONENTS, dtype=float)
    for ax, oracle in zip(axes, SETTINGS, strict=True):
        data = rows[oracle]
        _, em_epsilon, label = SETTINGS[oracle]
        styles = {
            ("tree", "ladder"): ("C0", "o-"),
            ("tree", "planted"): ("C0", "s--"),
            ("em", "ladder"): ("C3", "o-"),
            ("em", "planted"): ("C3", "s--"),
        }
        for (who, family), (color, style) in styles.items():
            exact = [data[(n, family)][f"{who}_exact"] for n in ns]
            mc = [data[(n, family)][f"{who}_mc"] for n in ns]
            se = [data[(n, family)][f"{who}_se"] for n in ns]
            name = "tree" if who == "tree" else "exponential mech."
            ax.plot(ns, exact, style, color=color, label=f"{name}, {family} (exact)")
            ax.errorbar(ns, mc, yerr=se, fmt="none", ecolor="k", capsize=2, lw=0.8)
        if oracle == "gaussian":
            ax.plot(ns, 0.34 * ks**1.5, "k:", lw=2, zorder=5, label=r"tree bound $0.34\,k^{3/2}$")
        else:
            ax.plot(ns, ks**2 / math.e, "k:", lw=2, zorder=5, label=r"tree bound $k^2/e$")
        ax.plot(
            ns,
            (np.log(ns) + 1) / (em_epsilon / 2),
            ":",
            color="C3",
            label=r"EM bound $(\ln|Y|+1)\cdot 2/\varepsilon$",
        )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("|Y| (number of candidates)")
        ax.set_ylabel("expected excess loss")
        ax.set_title(label, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Selection via noisy sensitivity-1 queries (binary tree) vs exponential mechanism")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    warnings.simplefilter("ignore", dp.InsecureRandomWarning)
    start = time.perf_counter()
    rows: dict[str, dict[tuple[int, str], dict[str, float]]] = {o: {} for o in SETTINGS}
    for e in EXPONENTS:
        for oracle in SETTINGS:
            for family in ("ladder", "planted"):
                rows[oracle][(2**e, family)] = run_cell(oracle, 2**e, family)
        print(f"|Y| = 2^{e} done ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    lines = [
        "# Tree selection vs the exponential mechanism (benchmarks/tree_selection.py)",
        "",
        "Expected excess loss E[l(Y)] - min l. Each cell: exact expectation (Monte Carlo "
        f"mean ± standard error; tree {TREE_REPS} runs, EM 2000 runs up to 2^14, then "
        "1000, 500, 400 at 2^16, 2^18, 2^20; the EM's `ladder` cells are near 0, so "
        "their relative error is large but their absolute error tiny). "
        "`ladder`: the tree's worst case; `planted`: the exponential mechanism's "
        "worst case (see the script's docstring). "
        "Time per call: median wall time of one `select_by_tree` / `exponential` call.",
        "",
    ]
    for oracle in SETTINGS:
        lines += [*table(oracle, rows[oracle]), ""]
    lines.append(f"Total run time: {time.perf_counter() - start:.0f} s.")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tree_selection.md").write_text("\n".join(lines) + "\n")
    plot(rows, RESULTS / "tree_selection.png")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
