"""What the clock still tells: the timing residual of issue 27, section 3.

The attack: a filter that gives the target's row an expensive value only if a secret
predicate holds (``regexp_matches(CASE WHEN name = 'alice' AND salary >= 45000 THEN
'<long literal>' ELSE 'x' END, '(a|b)*a(a|b){40}c')``), sent at PureDP(1e-9) on two
neighbouring tables of 10^5 rows: alice qualifies (salary 52,000) or does not (30,000).
The attacker times ``Session.evaluate`` over interleaved trials and guesses the table
with the best threshold on the time. This script reports, per case, the median times,
their difference and that classifier's accuracy over ``--trials`` trials per table (a
best threshold chosen on the same trials: with no signal it still scores ~0.55-0.6 at
50 + 50 trials, see the control rows).

Cases: the issue's 200 kB literal (run as raw SQL on DuckDB: dpkit now refuses it), the
largest literals and pattern dpkit still accepts (MAX_LITERAL_CHARS,
MAX_TOTAL_LITERAL_CHARS, MAX_PATTERN_STATES), a string concatenated from the row's own
name (MAX_CONCAT_WIDTH), a LIKE, an error caught by ``TRY`` (DuckDB re-evaluates the
row's vector of 2048 rows one by one), controls; and on Spark (local, if PySpark and Java are
there) the patterns Spark still accepts. ``--deadline S`` adds the DuckDB cases again
with ``Session.evaluate(..., deadline=S)``.

Run: ``python benchmarks/timing_residual.py [--trials 50] [--rows 100000] [--no-spark]``.
Results are recorded in benchmarks/README.md ("Timing residual").
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

import dpkit as dp
from dpkit.analytics import Query
from dpkit.analytics._expr import MAX_LITERAL_CHARS, MAX_TOTAL_LITERAL_CHARS
from dpkit.errors import InsecureRandomWarning

SECRET = "name = 'alice' AND salary >= 45000"
SLOW = "(a|b)*a(a|b){40}c"  # RE2's DFA gives up on it: ~5 ns per character and state
WIDE = "[ab]*a[ab]{122}c"  # 126 states, near MAX_PATTERN_STATES
TINY = dp.PureDP(1e-9)


def table(rows: int, qualifies: bool) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "name": [f"user{i:06d}" for i in range(rows)],
            "salary": rng.uniform(20_000, 90_000, rows).round(0),
        }
    )
    frame.loc[rows // 2, "name"] = "alice"
    frame.loc[rows // 2, "salary"] = 52_000.0 if qualifies else 30_000.0
    return frame


def ab_text(length: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("ab") for _ in range(length))


def literal_of(length: int) -> str:
    """SQL for a string of ``length`` random a/b characters, in literals of at most
    MAX_LITERAL_CHARS each."""
    text = ab_text(length, 1)
    pieces = [text[i : i + MAX_LITERAL_CHARS] for i in range(0, length, MAX_LITERAL_CHARS)]
    quoted = [f"'{p}'" for p in pieces]
    return quoted[0] if len(quoted) == 1 else f"concat({', '.join(quoted)})"


def gated(value: str) -> str:
    return f"CASE WHEN {SECRET} THEN {value} ELSE 'x' END"


#: The most literal characters an attack can still send with the issue's pattern (the
#: pattern, 'alice', '45000' and 'x' count too).
ROOM = MAX_TOTAL_LITERAL_CHARS - 60


def best_accuracy(yes: list[float], no: list[float]) -> float:
    """Accuracy of the best threshold classifier (either direction) on these times."""
    points = sorted([(t, 1) for t in yes] + [(t, 0) for t in no])
    total, positives = len(points), len(yes)
    best = max(positives, total - positives)
    below_pos = 0
    for i, (_, label) in enumerate(points, start=1):
        below_pos += label
        below_neg = i - below_pos
        # "yes above the threshold": correct = negatives below + positives above
        up = below_neg + (positives - below_pos)
        best = max(best, up, total - up)
    return best / total


def trials(run: Callable[[bool], None], count: int) -> tuple[list[float], list[float]]:
    """Interleaved timings of ``run(True)`` (target qualifies) and ``run(False)``."""
    for qualifies in (True, False, True, False):  # warm up both
        run(qualifies)
    rng = random.Random(0)
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(count):
        order = [True, False]
        rng.shuffle(order)
        for qualifies in order:
            start = time.perf_counter()
            run(qualifies)
            times[qualifies].append(time.perf_counter() - start)
    return times[True], times[False]


def row(case: str, yes: list[float], no: list[float]) -> str:
    med_yes, med_no = statistics.median(yes) * 1e3, statistics.median(no) * 1e3
    return (
        f"| {case} | {med_yes:.1f} | {med_no:.1f} | {med_yes - med_no:+.2f} | "
        f"{best_accuracy(yes, no):.2f} |"
    )


def dpkit_runner(
    sessions: dict[bool, dp.Session], expression: str, deadline: float | None = None
) -> Callable[[bool], None]:
    query = Query().filter(expression).count()

    def run(qualifies: bool) -> None:
        if deadline is None:
            sessions[qualifies].evaluate(query, budget=TINY)
        else:
            sessions[qualifies].evaluate(query, budget=TINY, deadline=deadline)

    return run


def duckdb_cases(rows: int) -> list[tuple[str, str]]:
    return [
        ("control: 'x' on both branches", f"regexp_matches({gated(repr('x'))}, '{SLOW}')"),
        (
            f"{MAX_LITERAL_CHARS:,}-char literal, issue pattern",
            f"regexp_matches({gated(literal_of(MAX_LITERAL_CHARS))}, '{SLOW}')",
        ),
        (
            f"{ROOM:,} chars (4 literals), issue pattern",
            f"regexp_matches({gated(literal_of(ROOM))}, '{SLOW}')",
        ),
        (
            f"{ROOM:,} chars, 126-state pattern",
            f"regexp_matches({gated(literal_of(ROOM - 20))}, '{WIDE}')",
        ),
        (
            "32 x the row's name, issue pattern",
            f"regexp_matches({gated('concat(' + ', '.join(['name'] * 32) + ')')}, '{SLOW}')",
        ),
        ("LIKE: 3,000 chars vs '%a...(900)b%'", f"{gated(literal_of(3000))} LIKE '%{'a' * 900}b%'"),
        (
            "no literal: an overflow caught by TRY on the row",
            f"CASE WHEN {SECRET} THEN CAST(salary AS BIGINT) * 9223372036854775807 ELSE 1 END = 1",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--spark-rows", type=int, default=100_000)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--deadline", type=float, default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore", InsecureRandomWarning)
    frames = {q: table(args.rows, q) for q in (True, False)}
    budget = dp.PureDP(1.0)
    lines = [
        f"Timing residual: {args.trials} interleaved trials per table, {args.rows:,} rows, "
        "target qualifies (yes) or not (no); times in ms (median of Session.evaluate).",
        "",
        "| case | yes | no | yes - no | best threshold accuracy |",
        "|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)

    # The attack, as raw SQL on DuckDB (dpkit refuses the 200 kB literal now).
    import duckdb

    cons = {}
    for q, frame in frames.items():
        con = duckdb.connect()
        con.register("t", frame)
        con.execute("CREATE TABLE staff AS SELECT * FROM t")
        cons[q] = con
    big = "'" + ab_text(200_000, 1) + "'"
    raw = f"SELECT count(*) FROM staff WHERE TRY(regexp_matches({gated(big)}, '{SLOW}'))"
    yes, no = trials(lambda q: cons[q].execute(raw).fetchall(), args.trials)
    print(row("issue: 200 kB literal, raw DuckDB SQL (refused by dpkit)", yes, no), flush=True)

    sessions = {q: dp.Session.from_pandas(f, budget=budget, rng=0) for q, f in frames.items()}
    for case, expression in duckdb_cases(args.rows):
        yes, no = trials(dpkit_runner(sessions, expression), args.trials)
        print(row(f"DuckDB: {case}", yes, no), flush=True)
    if args.deadline is not None:
        for case, expression in [duckdb_cases(args.rows)[i] for i in (0, 2)]:
            # Fresh Sessions: a missed deadline fails closed and locks the ledger.
            sessions = {
                q: dp.Session.from_pandas(f, budget=budget, rng=0) for q, f in frames.items()
            }
            run = dpkit_runner(sessions, expression, deadline=args.deadline)
            yes, no = trials(run, args.trials)
            print(row(f"DuckDB, deadline={args.deadline}: {case}", yes, no), flush=True)

    if args.no_spark:
        return
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("(no PySpark: Spark cases skipped)")
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("dpkit-timing")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_frames = {q: table(args.spark_rows, q) for q in (True, False)}
    sessions = {
        q: dp.Session.from_spark(spark.createDataFrame(f), budget=budget, rng=0)
        for q, f in spark_frames.items()
    }
    anchored = "^[ab]*x"  # one run, anchored: accepted on Spark (O(n m))
    spark_cases = [
        ("control: 'x' on both branches", f"regexp_matches({gated(repr('x'))}, '{anchored}')"),
        (
            f"{ROOM:,} chars, '{anchored}'",
            f"regexp_matches({gated(literal_of(ROOM))}, '{anchored}')",
        ),
        (
            f"{ROOM:,} chars, 'ba[ab]+' (run last)",
            f"regexp_matches({gated(literal_of(ROOM))}, 'ba[ab]+')",
        ),
        (
            f"LIKE: {ROOM - 100:,} chars, '%...%' contains",
            f"{gated(literal_of(ROOM - 100))} LIKE '%{'ab' * 45}c%'",
        ),
    ]
    print(f"\nSpark (local[2], {args.spark_rows:,} rows):\n", flush=True)
    print("| case | yes | no | yes - no | best threshold accuracy |\n|---|---|---|---|---|")
    for case, expression in spark_cases:
        yes, no = trials(dpkit_runner(sessions, expression), args.trials)
        print(row(f"Spark: {case}", yes, no), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
