"""The Session's fixed cost per query on a small table, and ``describe`` on small tables.

On small tables a query's time is the engine's parsing, binding and planning of
dpkit's statements, not reading rows. This script times, in one process and for the
dpkit that Python imports:

* an ungrouped count, and a count + sum + median grouped by privately selected keys,
  on a 300-row table with a privacy unit (30 queries each, after 3 untimed);
* ``describe`` (the Python API) of three scikit-learn tables (best of 2).

To compare two versions, run it once per version with ``PYTHONPATH`` pointing at each
checkout's ``src`` (``git worktree add /tmp/before <commit>``), interleaved:
``PYTHONPATH=/tmp/before/src python benchmarks/bench_session_small.py before``.
Results are recorded in ``benchmarks/results/session.md``.
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
import pandas as pd


def main(label: str) -> None:
    warnings.simplefilter("ignore")  # seeded generators warn; the timing is the point
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits

    import dpkit as dp
    from dpkit.analytics import Query
    from dpkit.analytics.describe import describe

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "uid": rng.integers(0, 100, 300),
            "g": rng.choice(["a", "b", "c"], 300),
            "x": rng.normal(size=300),
        }
    )
    session = dp.Session.from_pandas(
        frame, privacy_unit="uid", budget=dp.ApproxDP(1e6, 0.5), rng=np.random.default_rng(1)
    )
    grouped = (
        Query()
        .group_by("g", keys="private")
        .bound(max_groups=2, max_rows=5)
        .count()
        .sum("x", bounds=(-1, 1))
        .median("x", bounds=(-3, 3))
    )
    queries = {
        "ungrouped count": Query().bound(max_rows=5).count(),
        "count + sum + median by private keys": grouped,
    }
    lines = [label]
    for name, query in queries.items():
        for _ in range(3):
            session.evaluate(query, budget=dp.ApproxDP(1.0, 1e-6))
        start = time.perf_counter()
        for _ in range(30):
            session.evaluate(query, budget=dp.ApproxDP(1.0, 1e-6))
        lines.append(f"  {name}: {(time.perf_counter() - start) / 30 * 1000:.1f} ms per query")
    loaders = {
        "diabetes": load_diabetes,
        "breast_cancer": load_breast_cancer,
        "digits": load_digits,
    }
    for name, loader in loaders.items():
        table = loader(as_frame=True).frame
        times = []
        for seed in range(2):
            described = dp.Session.from_pandas(
                table, budget=dp.ApproxDP(1.0, 1e-6), rng=np.random.default_rng(seed)
            )
            start = time.perf_counter()
            describe(described)
            times.append(time.perf_counter() - start)
        lines.append(f"  describe {name}: {min(times):.2f} s")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "dpkit")
