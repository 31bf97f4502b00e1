"""Session benchmark: per-group count and bounded sum with contribution bounding.

Workload (issue 6): N rows (default 10^7), 10^5 persons, 50 groups; per-group count and
sum of ``amount`` clamped to [0, 100], at most 5 groups per person and 10 rows per
person and group, epsilon = 1, end to end from Parquet. Each contender runs as a fresh
``python -c ...`` subprocess, so the times include interpreter start-up and imports;
peak memory is the subprocess's maximum RSS (``os.wait4``).

Contenders are functions returning the Python source they run (``CONTENDERS``); a peer
library is one more function. The Parquet file is generated once into a cache
directory (``$DPKIT_BENCH_CACHE`` or ``~/.cache/dpkit-bench``), never into git.

Two modes, both with contenders interleaved (round 1 runs each once, then round 2...),
so a change in the machine's load hits them alike; the load average is printed:

- whole process (default): each contender a fresh ``python -c``;
- ``--in-process`` (issue 34's measure): in one process, the Session's ``evaluate``
  against the fastest hand-written bounding SQL for the same bounding semantics (one
  window pass over the (person, group) pairs, DuckDB's own ``hash`` with a salt; with
  DuckDB's rewrite of that window into a top-n aggregate on and off, the faster one is
  the floor), on the same Parquet file. ``--string-keys`` makes the group a string
  (``'region_' || grp``), where dpkit's keyed hash reads md5.

Usage::

    python benchmarks/bench_session.py [--rows 1e7] [--repeat 3] [--only NAME ...]
    python benchmarks/bench_session.py --in-process [--rows 1e6|1e7|1e8] [--string-keys]
    python benchmarks/bench_session.py --rows 1e8   # peak-memory run (issue 6: < 2 GB)

From 5e7 rows each contender runs once with no warm-up (``--repeat`` overrides).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
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


def string_keyed(path: Path) -> Path:
    """The same rows with the group as a string ``'region_<grp>'`` (cached beside)."""
    out = path.with_name(path.stem + "_str.parquet")
    if not out.exists():
        import duckdb

        tmp = out.with_suffix(".tmp")
        duckdb.sql(
            f"COPY (SELECT user_id, 'region_' || grp AS grp, amount FROM read_parquet('{path}'))"
            f" TO '{tmp}' (FORMAT parquet)"
        )
        tmp.rename(out)
    return out


def hand_written_sql(source: str, keys: list[object], salt: int = 12345) -> str:
    """The fastest correct bounding SQL we found for dpkit's semantics, written by hand:
    one aggregation into (person, group) pairs over the public keys, a pair with more
    than m rows scaled to m rows' worth, and each person's k groups of smallest
    ``hash(person, group, salt)`` kept by one window pass. Sums are of the clamped
    values on a fixed-point grid (2^10 steps per unit), as exact integers."""
    listed = ", ".join(repr(k) for k in keys)
    value = "CAST(round(least(greatest(amount, 0.0), 100.0) * 1024) AS BIGINT)"
    return f"""SELECT grp, sum(c), sum(s) FROM (
  SELECT user_id, grp, least(count(*), {MAX_ROWS}) AS c,
         CASE WHEN count(*) <= {MAX_ROWS} THEN sum({value})
              ELSE sum({value}) * {MAX_ROWS} // count(*) END AS s
  FROM {source} WHERE user_id IS NOT NULL AND grp IN ({listed})
  GROUP BY user_id, grp
  QUALIFY row_number() OVER (PARTITION BY user_id ORDER BY hash(user_id, grp, {salt}))
    <= {MAX_GROUPS}
) GROUP BY grp"""


def duckdb_hand_written(path: Path) -> str:
    sql = hand_written_sql(f"read_parquet('{path}')", list(range(GROUPS)))
    return f"""
import duckdb
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
rows = con.execute({sql!r}).fetchall()
assert len(rows) == {GROUPS}
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
    "duckdb (hand-written bounding, one window pass)": duckdb_hand_written,
    "duckdb (dpkit's bounding SQL, no noise)": duckdb_bounded,
    "dpkit Session": dpkit_session,
    "dpkit Session (median + private-bounds mean)": dpkit_session_order,
    "(import dpkit only)": import_dpkit,
}


def run(code: str) -> tuple[float, float]:
    return run_process(code)


def interleaved(
    contenders: dict[str, Callable[[], object]], rounds: int, warm: bool
) -> dict[str, list[object]]:
    """Each round runs every contender once, in order; one untimed round first if
    ``warm``. Returns each contender's results, one per round."""
    if warm:
        for call in contenders.values():
            call()
    out: dict[str, list[object]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, call in contenders.items():
            out[name].append(call())
    return out


def whole_process(path: Path, args: argparse.Namespace) -> None:
    chosen = {
        name: make(path) for name, make in CONTENDERS.items() if not args.only or name in args.only
    }
    big = args.rows >= 5 * 10**7  # at 10^8 rows one run each: the memory peak is the point
    runs = interleaved(
        {name: (lambda code=code: run(code)) for name, code in chosen.items()},
        args.repeat,
        warm=not big,
    )
    results = {}
    for name, timings in runs.items():
        times, peaks = zip(*timings, strict=True)  # type: ignore[arg-type]
        results[name] = (statistics.median(times), max(peaks))
    floor = results.get("duckdb (no privacy, no bounding)", (float("nan"), 0.0))[0]
    print(f"{'contender':<50} {'median s':>9} {'ratio':>7} {'peak MiB':>9}")
    for name, (seconds, peak) in results.items():
        print(f"{name:<50} {seconds:>9.2f} {seconds / floor:>7.2f} {peak:>9.0f}")


def in_process(path: Path, args: argparse.Namespace) -> None:
    import duckdb

    import dpkit as dp
    from dpkit.analytics import KeySet, Query

    keys: list[object] = list(range(GROUPS))
    if args.string_keys:
        path = string_keyed(path)
        keys = [f"region_{k}" for k in range(GROUPS)]
    session = dp.Session.from_path(path, privacy_unit="user_id", budget=dp.PureDP(1e9))
    query = (
        Query()
        .group_by("grp", keys=KeySet.from_values(grp=keys))
        .bound(max_groups=MAX_GROUPS, max_rows=MAX_ROWS)
        .count()
        .sum("amount", bounds=(0.0, 100.0))
    )
    hand = hand_written_sql(f"read_parquet('{path}')", keys)
    plain = (
        "SELECT grp, count(*), sum(least(greatest(amount, 0), 100)) "
        f"FROM read_parquet('{path}') GROUP BY grp"
    )
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")

    def timed(call: Callable[[], object]) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    def sql(text: str, rewrite: bool = True) -> Callable[[], float]:
        setting = "" if rewrite else "top_n_window_elimination"
        return lambda: timed(
            lambda: (
                con.execute(f"SET disabled_optimizers = '{setting}'"),
                con.execute(text).fetchall(),
            )
        )

    contenders: dict[str, Callable[[], object]] = {
        "duckdb (no privacy, no bounding)": sql(plain),
        "hand-written bounding (top-n rewrite on)": sql(hand),
        "hand-written bounding (top-n rewrite off)": sql(hand, rewrite=False),
        "dpkit Session.evaluate": lambda: timed(
            lambda: session.evaluate(query, budget=dp.PureDP(1.0))
        ),
    }
    load_before = os.getloadavg()
    runs = interleaved(contenders, args.repeat, warm=args.rows < 5 * 10**7)
    load_after = os.getloadavg()
    best = {name: min(t) for name, t in runs.items()}  # type: ignore[type-var]
    floor = min(
        best["hand-written bounding (top-n rewrite on)"],
        best["hand-written bounding (top-n rewrite off)"],
    )
    kind = "string" if args.string_keys else "integer"
    print(f"in one process, {kind} group keys, min of {args.repeat} interleaved rounds")
    print(f"{'contender':<46} {'min s':>7} {'median s':>9} {'/ floor':>8}")
    for name, timings in runs.items():
        median = statistics.median(timings)  # type: ignore[type-var]
        print(f"{name:<46} {best[name]:>7.3f} {median:>9.3f} {best[name] / floor:>8.2f}")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda text: int(float(text)), default=10**7)
    parser.add_argument("--repeat", type=int, default=None, help="default 3 (1 from 5e7 rows)")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--in-process", action="store_true", help="issue 34's floor measure")
    parser.add_argument("--string-keys", action="store_true", help="with --in-process")
    args = parser.parse_args()
    if args.repeat is None:
        args.repeat = 1 if args.rows >= 5 * 10**7 else 3
        if args.in_process:
            args.repeat = 3 if args.rows >= 5 * 10**7 else 5
    path = dataset(args.rows)
    print(f"{args.rows:,} rows, {PERSONS:,} persons, {GROUPS} groups, file {path.name}")
    if args.in_process:
        in_process(path, args)
    else:
        whole_process(path, args)


if __name__ == "__main__":
    main()
