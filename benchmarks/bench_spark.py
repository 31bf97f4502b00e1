"""The Session on Spark: dpkit's overhead over plain Spark SQL, and DuckDB for scale.

Workload: bench_session.py's (per-group count and bounded sum of ``amount`` clamped to
[0, 100], 10^5 persons, 50 groups, at most 5 groups per person and 10 rows per person
and group), default 10^6 rows, on a local Spark (``local[*]``) in one process, after a
warm-up. Contenders, all reading the same cached Parquet file:

* Spark SQL, no privacy: ``GROUP BY grp`` of the clamped values (the floor);
* Spark SQL, pairs only: ``GROUP BY person, grp`` then ``GROUP BY grp`` (the floor of
  any rule that bounds a person's rows per group);
* Spark SQL, bounded by hand: the same non-private bounded aggregation written
  directly (pairs, each pair capped at ``m`` rows' worth, each person's ``k`` groups of
  smallest ``xxhash64``, then ``GROUP BY grp``): the issue's baseline;
* dpkit Session on Spark (compile, bind, run, noise);
* dpkit Session on DuckDB, same query (for scale: one machine, no cluster).

Usage::

    python benchmarks/bench_spark.py [--rows 1e6] [--repeat 5] [--master local[2]]

Times are per query, median of ``repeat``; ratios are to the plain Spark query. At
10^8 rows use ``--repeat 1 --only "Spark SQL, bounded by hand" "dpkit Session on
Spark"`` (minutes per query; the plain query is always run, as the baseline).
"""

from __future__ import annotations

import argparse
import warnings

from _harness import compare, print_table
from bench_session import GROUPS, MAX_GROUPS, MAX_ROWS, dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda text: int(float(text)), default=10**6)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--only", nargs="*", default=None, help="contenders to run")
    parser.add_argument(
        "--driver-memory",
        default=None,
        help="spark.driver.memory (e.g. 6g; default: Spark's own, 1g). The Session's copy "
        "of the table lives in the block manager: at 10^7 rows 1g makes it spill",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # PySpark's pandas-version warning, seeded rngs

    from pyspark.sql import SparkSession

    import dpkit as dp
    from dpkit.analytics import KeySet, Query
    from dpkit.analytics.engines.spark import spark_session

    path = str(dataset(args.rows))
    builder = SparkSession.builder.master(args.master).config("spark.ui.enabled", "false")
    builder = builder.config("spark.sql.shuffle.partitions", "8")
    if args.driver_memory is not None:
        builder = builder.config("spark.driver.memory", args.driver_memory)
    builder.getOrCreate()
    spark = spark_session("bench_spark")  # the session just started
    spark.sparkContext.setLogLevel("ERROR")
    frame = spark.read.parquet(path)
    frame.createOrReplaceTempView("bench")
    query = (
        Query()
        .group_by("grp", keys=KeySet.from_values(grp=range(GROUPS)))
        .bound(max_groups=MAX_GROUPS, max_rows=MAX_ROWS)
        .count()
        .sum("amount", bounds=(0.0, 100.0))
    )
    budget = dp.PureDP(1e6)  # many queries on one Session; the budget is not the point
    on_spark = dp.Session.from_spark(frame, privacy_unit="user_id", budget=budget)
    on_duckdb = dp.Session.from_path(path, privacy_unit="user_id", budget=budget)
    clamped = "least(greatest(amount, 0.0), 100.0)"
    cases = {
        "Spark SQL, no privacy": lambda: spark.sql(
            f"SELECT grp, count(*), sum({clamped}) FROM bench GROUP BY grp"
        ).collect(),
        "Spark SQL, pairs only": lambda: spark.sql(
            f"SELECT grp, sum(c), sum(s) FROM (SELECT user_id, grp, count(*) AS c, "
            f"sum({clamped}) AS s FROM bench GROUP BY user_id, grp) GROUP BY grp"
        ).collect(),
        "Spark SQL, bounded by hand": lambda: spark.sql(
            f"SELECT grp, sum(c), sum(s) FROM (SELECT *, row_number() OVER (PARTITION BY "
            f"user_id ORDER BY xxhash64(user_id, grp, 7)) AS r FROM (SELECT user_id, grp, "
            f"least(count(*), {MAX_ROWS}) AS c, sum({clamped}) * least(count(*), {MAX_ROWS})"
            f" / count(*) AS s FROM bench GROUP BY user_id, grp)) WHERE r <= {MAX_GROUPS} "
            "GROUP BY grp"
        ).collect(),
        "dpkit Session on Spark": lambda: on_spark.evaluate(query, budget=dp.PureDP(1.0)),
        "dpkit Session on DuckDB": lambda: on_duckdb.evaluate(query, budget=dp.PureDP(1.0)),
    }
    if args.only:
        cases = {k: v for k, v in cases.items() if k in args.only or k == "Spark SQL, no privacy"}
    results = compare(cases, baseline="Spark SQL, no privacy", repeat=args.repeat, number=1)
    cores = spark.sparkContext.defaultParallelism
    print(f"{args.rows:,} rows, local Spark {spark.version}, {cores} cores")
    print_table(results, title="Session on Spark (one query)", unit="queries")


if __name__ == "__main__":
    main()
