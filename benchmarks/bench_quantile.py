"""Private median: dpkit's inverse-sensitivity quantile against NumPy, OpenDP and diffprivlib.

Three parts, all in one process:

1. **Speed**: ``dp.median`` (default linear grid of 100,001 points over the bounds,
   refined to 2^20 fine points per cell, add/remove neighbours, secure generator)
   against ``numpy.median`` on the same 10^7 float64 array (goal: at most 1.5x).
   Also the coarse mechanism and the histogram step alone.
2. **Memory**: the peak of ``tracemalloc`` during ``dp.median`` on 10^7 values, as a
   multiple of the array's own size; the extra memory is O(grid + block), so it is
   extrapolated to 10^8 values (goal: data plus extra at most 2x the data).
3. **Accuracy against peers** (same data, same epsilon = 1, same bounds): median over
   repetitions of ``|release - true median|`` on normal, lognormal, bimodal and
   heavy-tailed (Student t, 2 degrees of freedom) data, n = 10^3 .. 10^6. Peers:
   OpenDP 0.16 ``make_private_quantile`` (exponential mechanism over candidates, here
   the same 100,001 grid points dpkit uses; symmetric distance = add/remove, scale
   calibrated with ``map(1)``), and diffprivlib 0.6.6 ``tools.quantile`` (Smith 2011:
   exponential mechanism over the gaps between sorted data, continuous output).
   dpkit runs under add/remove (its default) and, for reference, ``replace``.

Run: ``python benchmarks/bench_quantile.py [--quick]`` (about 3 minutes; --quick: 1).
"""

from __future__ import annotations

import argparse
import statistics
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


def _opendp_median(candidates: list[float]) -> Callable[[np.ndarray], float]:
    import opendp.prelude as odp

    odp.enable_features("contrib")
    space = (odp.vector_domain(odp.atom_domain(T=float, nan=False)), odp.symmetric_distance())
    unit = odp.m.make_private_quantile(*space, odp.max_divergence(), candidates, 0.5, 1.0)
    scale = unit.map(1) / EPSILON  # epsilon is proportional to 1 / scale
    measurement = odp.m.make_private_quantile(*space, odp.max_divergence(), candidates, 0.5, scale)
    assert abs(measurement.map(1) - EPSILON) < 1e-9
    return lambda x: float(measurement(x.tolist()))


def _diffprivlib_median(bounds: tuple[float, float]) -> Callable[[np.ndarray], float]:
    from diffprivlib.tools import quantile

    return lambda x: float(quantile(x, 0.5, epsilon=EPSILON, bounds=bounds))


def accuracy(sizes: list[int], reps: Callable[[int], int]) -> None:
    print(f"### Median absolute error of the private median (epsilon = {EPSILON})\n")
    print(
        "Median over repetitions of |release - true median|; ratio = dpkit ÷ peer "
        "(below 1: dpkit more accurate).\n"
    )
    print(
        "| data | n | reps | dpkit | dpkit (replace) | OpenDP | diffprivlib | "
        "÷ OpenDP | ÷ diffprivlib |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worse = []
    for name, (draw, bounds) in DATASETS.items():
        grid = dp.Grid.linear(*bounds, size=DEFAULT_GRID_SIZE)
        peers = {
            "opendp": _opendp_median(grid.points.tolist()),
            "diffprivlib": _diffprivlib_median(bounds),
        }
        for n in sizes:
            errors: dict[str, list[float]] = {k: [] for k in ("dpkit", "replace", *peers)}
            for rep in range(reps(n)):
                x = draw(np.random.default_rng(1000 * rep + n % 997), n)
                truth = float(np.median(x))
                errors["dpkit"].append(abs(dp.median(x, grid=grid, epsilon=EPSILON).value - truth))
                errors["replace"].append(
                    abs(
                        dp.median(x, grid=grid, epsilon=EPSILON, neighbouring="replace").value
                        - truth
                    )
                )
                for peer, run in peers.items():
                    errors[peer].append(abs(run(x) - truth))
            med = {k: statistics.median(v) for k, v in errors.items()}
            r_o, r_d = med["dpkit"] / med["opendp"], med["dpkit"] / med["diffprivlib"]
            if r_o > 1 or r_d > 1:
                worse.append(f"{name} n={n}")
            print(
                f"| {name} | {n:.0e} | {reps(n)} | {med['dpkit']:.3g} | {med['replace']:.3g} | "
                f"{med['opendp']:.3g} | {med['diffprivlib']:.3g} | {r_o:.2f} | {r_d:.2f} |"
            )
            sys.stdout.flush()
    print(f"\ndpkit worse than a peer on: {', '.join(worse) if worse else 'none'}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # diffprivlib's and dpkit's advisory warnings
    speed()
    memory()
    if args.quick:
        accuracy([10**3, 10**4], lambda n: 11)
    else:
        accuracy([10**3, 10**4, 10**5, 10**6], lambda n: {10**6: 11}.get(n, 31))


if __name__ == "__main__":
    main()
