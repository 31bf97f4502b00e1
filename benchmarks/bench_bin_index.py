"""The bin index of describe's magnitude bins in DuckDB: nested CASEs against arithmetic.

``describe``'s range step groups each column by 166 power-of-two bins. Their index was
a binary search written as nested CASEs (``_bin_search``: the column named ~240 times);
it is now ``floor(log2 |x|)`` corrected by two exact comparisons with the edges
(``SqlEngine._ladder_index``). This script checks the two give the same index on every
row, then times both in one process, interleaved: planning (``EXPLAIN``, which the
Session runs once before the charge) and a ``GROUP BY`` of the index, on random
magnitudes.

Run: ``python benchmarks/bench_bin_index.py [--rows 10000000] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import duckdb
import numpy as np

from dpkit.analytics._describe_scales import _magnitude_edges
from dpkit.analytics.engines._sql import _bin_search, _literal, power_ladder
from dpkit.analytics.engines.duckdb import DuckDBEngine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    values = rng.standard_cauchy(args.rows) * 10.0 ** rng.integers(-8, 12, args.rows)
    connection = duckdb.connect()
    connection.execute("CREATE TABLE t AS SELECT * FROM (SELECT unnest(?) AS x)", [values])
    engine = DuckDBEngine(connection, "t")
    interior = _magnitude_edges()[1:-1]
    ladder = power_ladder(interior)
    assert ladder is not None
    forms = {
        "nested CASEs": _bin_search('"x"', [_literal(e) for e in interior]),
        "log2 + correction": engine._ladder_index('"x"', interior, *ladder),
    }
    queries = {
        name: f"SELECT {sql} AS i, count(*) FROM t GROUP BY i" for name, sql in forms.items()
    }
    answers = [sorted(engine._execute(q)) for q in queries.values()]
    assert answers[0] == answers[1], "the two forms disagree"
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        for name, query in queries.items():
            for step, sql in (("plan", "EXPLAIN " + query), ("run", query)):
                start = time.perf_counter()
                engine._execute(sql)
                times.setdefault((name, step), []).append(time.perf_counter() - start)
    print(f"| form ({args.rows:,} rows) | plan (ms) | plan+run (ms) | statement (chars) |")
    print("|---|---|---|---|")
    for name, query in queries.items():
        plan = statistics.median(times[(name, "plan")]) * 1e3
        run = statistics.median(times[(name, "run")]) * 1e3
        print(f"| {name} | {plan:.1f} | {run:.1f} | {len(query):,} |")


if __name__ == "__main__":
    main()
