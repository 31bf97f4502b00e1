"""dp.max with many rows per person against a plain group-max of the same data.

Workload: ``n`` rows from ``P`` persons (ids uniform in ``0 .. P-1``, int64), values
lognormal(3, 1) (session lengths in minutes). Cases, timed in one process with
``_harness.compare``:

* pandas ``DataFrame.groupby("id")["v"].max()`` -- the reference (baseline);
* NumPy group-max: ``np.maximum.at`` on dense ids (the fastest plain NumPy way);
* ``dp.max(values, privacy_unit=ids, bounds=(0, 1e6), epsilon=1)`` -- per-person max,
  histogram over the ~2,800-point geometric grid, noisy binary search;
* the same with string-like (sparse, 10^12-spaced) int ids, which take the sort-based
  factorisation path (pandas.factorize when installed, else np.unique) instead of the dense one.

Requirement (issue 4): dp.max within 3x of the pandas group-max.
``--memory`` measures the peak traced memory of dp.max relative to the input arrays.

Run: ``python benchmarks/bench_max.py [--rows 10000000 --persons 1000000]``.
"""

from __future__ import annotations

import argparse
import tracemalloc
import warnings

import numpy as np
import pandas as pd

import dpkit as dp
from _harness import compare, print_table
from dpkit.errors import InsecureRandomWarning


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--persons", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--memory", action="store_true")
    args = parser.parse_args()
    data_rng = np.random.default_rng(0)
    ids = data_rng.integers(0, args.persons, args.rows)
    values = data_rng.lognormal(3.0, 1.0, args.rows)
    sparse = ids * 10**12
    frame = pd.DataFrame({"id": ids, "v": values})

    def numpy_group_max() -> np.ndarray:
        out = np.full(args.persons, -np.inf)
        np.maximum.at(out, ids, values)
        return out

    warnings.simplefilter("ignore", InsecureRandomWarning)
    rng = dp.random.as_random(1)
    results = compare(
        {
            "pandas groupby().max()": lambda: frame.groupby("id")["v"].max(),
            "numpy maximum.at (dense ids)": numpy_group_max,
            "dp.max (dense ids)": lambda: dp.max(
                values, privacy_unit=ids, bounds=(0, 1e6), epsilon=1.0, rng=rng
            ),
            "dp.max (sparse ids, factorize)": lambda: dp.max(
                values, privacy_unit=sparse, bounds=(0, 1e6), epsilon=1.0, rng=rng
            ),
        },
        baseline="pandas groupby().max()",
        items=args.rows,
        repeat=args.repeat,
    )
    print_table(
        results, title=f"max over {args.rows:,} rows from {args.persons:,} persons", unit="rows"
    )
    release = dp.max(values, privacy_unit=ids, bounds=(0, 1e6), epsilon=1.0, rng=rng)
    print(f"\ntrue max {values.max():.1f}; dp.max {release.value:.1f}; {release.error}")
    if args.memory:
        tracemalloc.start()
        dp.max(values, privacy_unit=ids, bounds=(0, 1e6), epsilon=1.0, rng=rng)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        size = values.nbytes + ids.nbytes
        print(
            f"peak traced memory of dp.max: {peak / 2**20:.0f} MiB = {peak / size:.2f}x the input"
        )


if __name__ == "__main__":
    main()
