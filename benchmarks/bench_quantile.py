"""Private median: dpkit's inverse-sensitivity quantile against NumPy, OpenDP and diffprivlib.

Three parts, all in one process:

1. **Speed**: ``dp.median`` (default linear grid of 100,001 points over the bounds,
   refined to 2^20 fine points per cell, add/remove neighbours, secure generator)
   against ``numpy.median`` on the same 10^7 float64 array (goal: at most 1.5x).
   Also the coarse mechanism and the histogram step alone.
2. **Memory**: the peak of ``tracemalloc`` during ``dp.median`` on 10^7 values, as a
   multiple of the array's own size; the extra memory is O(grid + block), so it is
   extrapolated to 10^8 values (goal: data plus extra at most 2x the data).
3. **Accuracy against peers**, paired (every repetition draws one dataset and runs
   every variant on it), epsilon = 1, same bounds: median over repetitions of
   ``|release - numpy.median(x)|`` on normal, lognormal, bimodal and heavy-tailed
   (Student t, 2 degrees of freedom) data, n = 10^3 .. 10^6, with a 95% paired
   bootstrap interval for the ratio dpkit ÷ peer and an exact sign test on the paired
   errors. Two apples-to-apples tables, one per neighbouring relation:

   * add/remove: dpkit (default), OpenDP 0.16 ``make_private_quantile`` with
     ``map(1) = epsilon`` (symmetric distance 1), diffprivlib 0.6.6
     ``tools.quantile`` at ``2 epsilon`` (its utility ``-|i - n/2|`` has sensitivity
     1/2 under add/remove, so that is epsilon-DP for the median);
   * replace-one: dpkit ``neighbouring="replace"``, OpenDP with ``map(2) = epsilon``
     (a replacement is symmetric distance 2), diffprivlib at ``epsilon`` (Smith 2011's
     replace-one analysis).

   OpenDP scores the same 100,001 grid points dpkit uses (``|#below - #above|``,
   exponential mechanism by Gumbel noise); diffprivlib samples the gaps between
   sorted data (continuous output). dpkit runs refined (default) and coarse
   (``refine=False``). A diagnostic table measures the add/remove errors from the
   lower median, dpkit's target for even n.

Run: ``python benchmarks/bench_quantile.py [--quick] [--accuracy-only]`` (about 10 minutes
on a busy 2-core machine; --quick: about 1).
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
import warnings
from collections.abc import Callable

import numpy as np

import dpkit as dp
from _harness import compare, print_table
from dpkit.estimators.quantiles import DEFAULT_GRID_SIZE

N_SPEED = 10**7
EPSILON = 1.0
GOAL_SPEED = 1.5
GOAL_MEMORY = 2.0

Dataset = tuple[Callable[[np.random.Generator, int], np.ndarray], tuple[float, float]]
DATASETS: dict[str, Dataset] = {
    "normal": (lambda rng, n: rng.normal(size=n), (-10.0, 10.0)),
    "lognormal": (lambda rng, n: rng.lognormal(size=n), (0.0, 100.0)),
    "bimodal": (
        lambda rng, n: np.where(rng.uniform(size=n) < 0.5, -3.0, 3.0) + rng.normal(size=n),
        (-10.0, 10.0),
    ),
    "heavy-tailed": (lambda rng, n: rng.standard_t(2, size=n), (-100.0, 100.0)),
}


def speed() -> None:
    x = np.random.default_rng(0).normal(size=N_SPEED)
    grid = dp.Grid.linear(-10.0, 10.0, size=DEFAULT_GRID_SIZE)
    results = compare(
        {
            "numpy.median": lambda: np.median(x),
            "dp.median (refined, default)": lambda: dp.median(
                x, bounds=(-10.0, 10.0), epsilon=EPSILON
            ),
            "dp.median refine=False (coarse grid)": lambda: dp.median(
                x, bounds=(-10.0, 10.0), epsilon=EPSILON, refine=False
            ),
            "Grid.histogram alone": lambda: grid.histogram(x),
        },
        baseline="numpy.median",
        items=N_SPEED,
        repeat=5,
        min_time=0.5,
    )
    print_table(results, title=f"Median of {N_SPEED:.0e} float64 values", unit="values")
    ratio = results[1].ratio
    print(
        f"dp.median / numpy.median = {ratio:.2f} (goal <= {GOAL_SPEED}): "
        f"{'met' if ratio <= GOAL_SPEED else 'NOT met'}\n"
    )


def memory() -> None:
    x = np.random.default_rng(0).normal(size=N_SPEED)
    tracemalloc.start()
    tracemalloc.reset_peak()
    dp.median(x, bounds=(-10.0, 10.0), epsilon=EPSILON)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    extra = peak / x.nbytes
    at_1e8 = 1.0 + peak / (10 * x.nbytes)  # the extra memory does not grow with n
    print("### Memory of dp.median (tracemalloc peak beyond the input array)\n")
    print("| n | input | peak extra | extra ÷ input | total ÷ input at 10^8 (extrapolated) |")
    print("|---:|---:|---:|---:|---:|")
    print(
        f"| {N_SPEED:.0e} | {x.nbytes / 2**20:.0f} MiB | {peak / 2**20:.1f} MiB | "
        f"{extra:.3f} | {at_1e8:.3f} (goal <= {GOAL_MEMORY}) |\n"
    )


def _opendp_median(candidates: list[float], distance: int) -> Callable[[list[float]], float]:
    """OpenDP's quantile calibrated so that ``map(distance) == EPSILON``.

    ``distance`` is in OpenDP's symmetric distance: 1 = one record added or removed,
    2 = one record replaced (a removal plus an addition).
    """
    import opendp.prelude as odp

    odp.enable_features("contrib")
    space = (odp.vector_domain(odp.atom_domain(T=float, nan=False)), odp.symmetric_distance())
    unit = odp.m.make_private_quantile(*space, odp.max_divergence(), candidates, 0.5, 1.0)
    scale = unit.map(distance) / EPSILON  # epsilon is proportional to 1 / scale
    measurement = odp.m.make_private_quantile(*space, odp.max_divergence(), candidates, 0.5, scale)
    assert abs(measurement.map(distance) - EPSILON) < 1e-9
    return lambda values: float(measurement(values))


def _diffprivlib_median(
    bounds: tuple[float, float], epsilon: float
) -> Callable[[np.ndarray], float]:
    from diffprivlib.tools import quantile

    return lambda x: float(quantile(x, 0.5, epsilon=epsilon, bounds=bounds))


# Variants run on every dataset draw (paired design). Keys: (relation, name).
# diffprivlib's utility -|i - n/2| has sensitivity 1 under replacement and 1/2 under
# add/remove (for the median), and it samples prop. to exp(eps u / 2): its epsilon is a
# replace-one epsilon, and diffprivlib at 2 eps is eps-DP under add/remove.
VARIANTS = (
    ("add_remove", "dpkit"),
    ("add_remove", "dpkit coarse"),
    ("add_remove", "OpenDP"),
    ("add_remove", "diffprivlib"),
    ("replace", "dpkit"),
    ("replace", "dpkit coarse"),
    ("replace", "OpenDP"),
    ("replace", "diffprivlib"),
)
COMPARISONS = (("dpkit", "OpenDP"), ("dpkit coarse", "OpenDP"), ("dpkit", "diffprivlib"))
BOOTSTRAP = 2000


def _sign_test(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """P[a < b] among untied pairs and the exact two-sided binomial p-value."""
    from scipy.stats import binomtest

    wins, losses = int((a < b).sum()), int((a > b).sum())
    if wins + losses == 0:
        return float("nan"), 1.0
    return wins / (wins + losses), float(binomtest(wins, wins + losses).pvalue)


def _ratio_ci(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> tuple[float, float, float]:
    """median(a) / median(b) and its 95% paired percentile bootstrap interval."""
    idx = rng.integers(0, a.size, size=(BOOTSTRAP, a.size))
    ratios = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    low, high = np.quantile(ratios, [0.025, 0.975])
    return float(np.median(a) / np.median(b)), float(low), float(high)


def _verdict(low: float, high: float, p: float) -> str:
    """Significant only when the ratio's interval excludes 1 and the sign test agrees."""
    if low > 1 and p < 0.05:
        return " **worse**"
    if high < 1 and p < 0.05:
        return " better"
    return ""


def accuracy(reps: dict[int, int]) -> None:
    boot = np.random.default_rng(12345)
    print(f"### Median absolute error of the private median (epsilon = {EPSILON})\n")
    print(
        "Paired design: each repetition draws one dataset and runs every variant on it; the "
        "error is |release - numpy.median(x)|. Cells: median error over repetitions. Ratio "
        "columns: median error of dpkit ÷ that of the peer, with a 95% paired bootstrap "
        f"interval ({BOOTSTRAP} resamples of the repetitions), then P[dpkit error < peer "
        "error] over untied pairs with the exact sign-test p-value. **worse** / better: the "
        "interval excludes 1 and p < 0.05 (16 cells per column: expect about one p < 0.05 "
        "by chance; p < 0.003 survives a Bonferroni correction).\n"
    )
    errors: dict[tuple[str, int], dict[tuple[str, str], np.ndarray]] = {}
    for name, (draw, bounds) in DATASETS.items():
        grid = dp.Grid.linear(*bounds, size=DEFAULT_GRID_SIZE)
        candidates = grid.points.tolist()  # OpenDP scores the same 100,001 points
        odp_ar, odp_rep = _opendp_median(candidates, 1), _opendp_median(candidates, 2)
        dpl_ar, dpl_rep = (
            _diffprivlib_median(bounds, 2 * EPSILON),
            _diffprivlib_median(bounds, EPSILON),
        )
        for n, count in reps.items():
            runs: dict[tuple[str, str], list[float]] = {v: [] for v in VARIANTS}
            for rep in range(count):
                x = draw(np.random.default_rng([rep, n, len(name)]), n)
                truth = float(np.median(x))
                values = x.tolist()
                out = {
                    ("add_remove", "dpkit"): dp.median(x, grid=grid, epsilon=EPSILON).value,
                    ("add_remove", "dpkit coarse"): dp.median(
                        x, grid=grid, epsilon=EPSILON, refine=False
                    ).value,
                    ("add_remove", "OpenDP"): odp_ar(values),
                    ("add_remove", "diffprivlib"): dpl_ar(x),
                    ("replace", "dpkit"): dp.median(
                        x, grid=grid, epsilon=EPSILON, neighbouring="replace"
                    ).value,
                    ("replace", "dpkit coarse"): dp.median(
                        x, grid=grid, epsilon=EPSILON, neighbouring="replace", refine=False
                    ).value,
                    ("replace", "OpenDP"): odp_rep(values),
                    ("replace", "diffprivlib"): dpl_rep(x),
                }
                for key, value in out.items():
                    runs[key].append(abs(value - truth))
            errors[name, n] = {k: np.asarray(v) for k, v in runs.items()}
            print(f"  done: {name} n={n} ({count} repetitions)", file=sys.stderr, flush=True)

    titles = {
        "add_remove": "Add/remove neighbours (dpkit's default), epsilon = 1: dpkit "
        '`neighbouring="add_remove"`; OpenDP calibrated with `map(1) = 1` (symmetric '
        "distance 1); diffprivlib at its epsilon = 2, which is 1-DP under add/remove for "
        "the median.",
        "replace": "Replace-one neighbours (bounded DP), epsilon = 1: dpkit "
        '`neighbouring="replace"`; OpenDP with `map(2) = 1` (a replacement is symmetric '
        "distance 2); diffprivlib at its epsilon = 1.",
    }
    for relation, title in titles.items():
        print(f"#### {title}\n")
        print(
            "| data | n | reps | dpkit | dpkit coarse | OpenDP | diffprivlib | "
            "dpkit ÷ OpenDP | coarse ÷ OpenDP | dpkit ÷ diffprivlib |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---|---|---|")
        for (name, n), runs in errors.items():
            cells = [
                f"{np.median(runs[relation, v]):.3g}"
                for v in ("dpkit", "dpkit coarse", "OpenDP", "diffprivlib")
            ]
            ratios = []
            for mine, peer in COMPARISONS:
                a, b = runs[relation, mine], runs[relation, peer]
                ratio, low, high = _ratio_ci(a, b, boot)
                share, p = _sign_test(a, b)
                ratios.append(
                    f"{ratio:.2f} [{low:.2f}, {high:.2f}] P={share:.2f} p={p:.1g}"
                    f"{_verdict(low, high, p)}"
                )
            print(f"| {name} | {n:.0e} | {a.size} | {' | '.join(cells)} | {' | '.join(ratios)} |")
        print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    parser.add_argument("--accuracy-only", action="store_true", help="skip speed and memory")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # diffprivlib's and dpkit's advisory warnings
    if not args.accuracy_only:
        speed()
        memory()
    if args.quick:
        accuracy({10**3: 21, 10**4: 21})
    else:
        accuracy({10**3: 201, 10**4: 201, 10**5: 15, 10**6: 5})


if __name__ == "__main__":
    main()
