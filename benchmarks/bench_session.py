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

    python benchmarks/bench_session.py [--rows 1e7] [--repeat 3] [--only NAME ...]
    python benchmarks/bench_session.py --rows 1e8   # peak-memory run (issue 6: < 2 GB)

From 5e7 rows each contender runs once with no warm-up (``--repeat`` overrides).
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from pathlib import Path

from _harness import run_process

PERSONS = 100_000
GROUPS = 50
MAX_GROUPS, MAX_ROWS = 5, 10
CHUNK = 10_000_000


def dataset(rows: int) -> Path:
    """The cached Parquet file of ``rows`` rows, written in chunks of 10^7 rows.

    Each chunk is computed by DuckDB over ``range(start, stop)`` (a pure function of the
    row number, so the file does not depend on the chunking) and appended with
    pyarrow's ``ParquetWriter``: at most one chunk (~240 MB as Arrow) is ever in memory,
    so 10^8 rows (~1.1 GB of Parquet) can be written on a laptop.
    """
    cache = Path(os.environ.get("DPKIT_BENCH_CACHE", Path.home() / ".cache" / "dpkit-bench"))
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"session_{rows}.parquet"
    if not path.exists():
        import duckdb
        import pyarrow.parquet as pq

        tmp = path.with_suffix(".tmp")
        con = duckdb.connect()
        writer = None
        try:
            for start in range(0, rows, CHUNK):
                stop = min(rows, start + CHUNK)
                table = con.sql(
                    f"""SELECT (hash(i, 1) % {PERSONS})::BIGINT AS user_id,
                           (hash(i, 2) % {GROUPS})::INTEGER AS grp,
                           ((hash(i, 3) % 1000000) / 10000.0)::DOUBLE AS amount
                    FROM range({start}, {stop}) t(i)"""
                ).to_arrow_table()
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema, compression="snappy")
                writer.write_table(table, row_group_size=1 << 20)
                del table
        finally:
            if writer is not None:
                writer.close()
        tmp.rename(path)
    return path


def duckdb_plain(path: Path) -> str:
    return f"""
import duckdb
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
rows = con.execute(
    "SELECT grp, count(*), sum(least(greatest(amount, 0), 100)) "
    "FROM read_parquet('{path}') GROUP BY grp"
).fetchall()
assert len(rows) == {GROUPS}
"""


def duckdb_pairs(path: Path) -> str:
    # The floor of any correct bounding: one aggregation per (person, group) pair.
    return f"""
import duckdb
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
rows = con.execute(
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
    # The Session reads its file once into a private table; DuckDB alone reads the
    # Parquet file in place, so the plan is compiled against that relation.
    import duckdb

    from dpkit.analytics.engines import DuckDBEngine

    engine = DuckDBEngine(duckdb.connect(), f"read_parquet('{path}')")
    sql, params = engine.compile(session._compile(query, 1.0, salt=1).plan)
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


def dpkit_session_order(path: Path) -> str:
    # Not the workload: a median and a mean with privately found bounds, whose
    # quantile histograms keep real rows (each pair's m values of smallest keyed hash).
    return f"""
import dpkit as dp
from dpkit.analytics import KeySet, Query
session = dp.Session.from_path('{path}', privacy_unit='user_id', budget=dp.PureDP(1.0))
query = (Query().group_by('grp', keys=KeySet.from_values(grp=range({GROUPS})))
         .bound(max_groups={MAX_GROUPS}, max_rows={MAX_ROWS})
         .median('amount', bounds=(0.0, 100.0))
         .mean('amount', bounds='private', search_range=(-1000.0, 1000.0)))
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
    "dpkit Session (median + private-bounds mean)": dpkit_session_order,
    "(import dpkit only)": import_dpkit,
}


def run(code: str) -> tuple[float, float]:
    return run_process(code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda text: int(float(text)), default=10**7)
    parser.add_argument("--repeat", type=int, default=None, help="default 3 (1 from 5e7 rows)")
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    big = args.rows >= 5 * 10**7
    if args.repeat is None:
        args.repeat = 1 if big else 3
    path = dataset(args.rows)
    print(f"{args.rows:,} rows, {PERSONS:,} persons, {GROUPS} groups, file {path.name}")
    results = {}
    for name, make in CONTENDERS.items():
        if args.only and name not in args.only:
            continue
        code = make(path)
        if not big:  # at 10^8 rows one run each (minutes); the memory peak is the point
            run(code)  # warm the file cache and the interpreter's .pyc
        times, peaks = zip(*(run(code) for _ in range(args.repeat)), strict=True)
        results[name] = (statistics.median(times), max(peaks))
    floor = results.get("duckdb (no privacy, no bounding)", (float("nan"), 0.0))[0]
    print(f"{'contender':<46} {'median s':>9} {'ratio':>7} {'peak MiB':>9}")
    for name, (seconds, peak) in results.items():
        print(f"{name:<46} {seconds:>9.2f} {seconds / floor:>7.2f} {peak:>9.0f}")


if __name__ == "__main__":
    main()
