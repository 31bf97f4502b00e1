"""Session benchmark: per-group count and bounded sum with contribution bounding.

Workload (issue 6): N rows (default 10^7), 10^5 persons, 50 groups; per-group count and
sum of ``amount`` clamped to [0, 100], at most 5 groups per person and 10 rows per
person and group, epsilon = 1, end to end from Parquet. Each contender runs as a fresh
``python -c ...`` subprocess, so the times include interpreter start-up and imports;
peak memory is the subprocess's maximum RSS (``os.wait4``).

Contenders are functions returning the Python source they run (``CONTENDERS``); a peer
library is one more function. The Parquet file is generated once into a cache
directory (``$DPKIT_BENCH_CACHE`` or ``~/.cache/dpkit-bench``), never into git.

Usage::

    python benchmarks/bench_session.py [--rows 10000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

PERSONS = 100_000
GROUPS = 50
MAX_GROUPS, MAX_ROWS = 5, 10


def dataset(rows: int) -> Path:
    cache = Path(os.environ.get("DPKIT_BENCH_CACHE", Path.home() / ".cache" / "dpkit-bench"))
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"session_{rows}.parquet"
    if not path.exists():
        import duckdb

        tmp = path.with_suffix(".tmp")
        duckdb.connect().execute(
            f"""COPY (SELECT (hash(i, 1) % {PERSONS})::BIGINT AS user_id,
                       (hash(i, 2) % {GROUPS})::INTEGER AS grp,
                       ((hash(i, 3) % 1000000) / 10000.0)::DOUBLE AS amount
                FROM range({rows}) t(i)) TO '{tmp}' (FORMAT parquet)"""
        )
        tmp.rename(path)
    return path


def duckdb_plain(path: Path) -> str:
    return f"""
import duckdb
rows = duckdb.connect().execute(
    "SELECT grp, count(*), sum(least(greatest(amount, 0), 100)) "
    "FROM read_parquet('{path}') GROUP BY grp"
).fetchall()
assert len(rows) == {GROUPS}
"""


def duckdb_pairs(path: Path) -> str:
    # The floor of any correct bounding: one aggregation per (person, group) pair.
    return f"""
import duckdb
rows = duckdb.connect().execute(
    "SELECT count(*) FROM (SELECT user_id, grp, count(*), "
    "sum(least(greatest(amount, 0), 100)) FROM read_parquet('{path}') GROUP BY user_id, grp)"
).fetchall()
"""


def duckdb_bounded(path: Path) -> str:
    # The SQL dpkit generates for this query (compiled here, in the parent), run by
    # DuckDB alone: no dpkit import, no noise, no ledger.
    import dpkit as dp
    from dpkit.analytics import KeySet, Query

    session = dp.Session.from_path(path, privacy_unit="user_id", budget=dp.PureDP(1.0))
    query = (
        Query()
        .group_by("grp", keys=KeySet.from_values(grp=range(GROUPS)))
        .bound(max_groups=MAX_GROUPS, max_rows=MAX_ROWS)
        .count()
        .sum("amount", bounds=(0.0, 100.0))
    )
    sql, params = session._engine.compile(session._compile(query, 1.0, salt=1).plan)
    return f"""
import duckdb
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
rows = con.execute({sql!r}, {params!r}).fetchall()
assert len(rows) == {GROUPS}
"""


def dpkit_session(path: Path) -> str:
    return f"""
import dpkit as dp
from dpkit.analytics import KeySet, Query
session = dp.Session.from_path('{path}', privacy_unit='user_id', budget=dp.PureDP(1.0))
query = (Query().group_by('grp', keys=KeySet.from_values(grp=range({GROUPS})))
         .bound(max_groups={MAX_GROUPS}, max_rows={MAX_ROWS})
         .count().sum('amount', bounds=(0.0, 100.0)))
result = session.evaluate(query, budget=dp.PureDP(1.0))
assert len(result.columns['grp']) == {GROUPS}
"""


def import_dpkit(path: Path) -> str:
    return "import dpkit"


CONTENDERS: dict[str, Callable[[Path], str]] = {
    "duckdb (no privacy, no bounding)": duckdb_plain,
    "duckdb (pairs only: GROUP BY person, group)": duckdb_pairs,
    "duckdb (dpkit's bounding SQL, no noise)": duckdb_bounded,
    "dpkit Session": dpkit_session,
    "(import dpkit only)": import_dpkit,
}


def run(code: str) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code])
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"contender failed with status {status}")
    return elapsed, usage.ru_maxrss / 1024.0  # MiB (Linux reports KiB)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    path = dataset(args.rows)
    print(f"{args.rows:,} rows, {PERSONS:,} persons, {GROUPS} groups, file {path.name}")
    results = {}
    for name, make in CONTENDERS.items():
        if args.only and name not in args.only:
            continue
        code = make(path)
        run(code)  # warm the file cache and the interpreter's .pyc
        times, peaks = zip(*(run(code) for _ in range(args.repeat)), strict=True)
        results[name] = (statistics.median(times), max(peaks))
    floor = results.get("duckdb (no privacy, no bounding)", (float("nan"), 0.0))[0]
    print(f"{'contender':<46} {'median s':>9} {'ratio':>7} {'peak MiB':>9}")
    for name, (seconds, peak) in results.items():
        print(f"{name:<46} {seconds:>9.2f} {seconds / floor:>7.2f} {peak:>9.0f}")


if __name__ == "__main__":
    main()
