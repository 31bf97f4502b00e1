"""``dpkit describe`` against DuckDB ``SUMMARIZE``, and CSV against Parquet input.

Workload (issue 14): a table of N rows (default 10^7) and 10 columns of the kinds a real
table has: 4 floats (a normal, a heavy-tailed lognormal, a uniform rounded to cents with
2% missing, a normal rounded to one decimal), 2 integers (an age 18-90 and a small code
0-4), a 0/1 flag, a date (2000-2024), a string of 8 categories (skewed) and a person id
(N / 10 persons). ``dpkit describe`` runs with an ApproxDP budget (epsilon 1, delta
1e-6, so the string column's categories are selected), writing its JSON and HTML
report to a temporary directory; DuckDB ``SUMMARIZE`` (non-private: exact min, max,
quantiles, distinct counts) is the baseline. The same data is also read from CSV, by
both, for the goal that ``describe`` on CSV is within 1.5x of ``describe`` on Parquet.

Each contender runs as a fresh ``python -c ...`` subprocess, so the times include
interpreter start-up and imports; peak memory is the subprocess's maximum RSS
(``os.wait4``). The Parquet and CSV files are generated once into a cache directory
(``$DPKIT_BENCH_CACHE`` or ``~/.cache/dpkit-bench``), never into git.

Usage::

    python benchmarks/bench_describe.py [--rows 1e7] [--repeat 3] [--only NAME ...]
    python benchmarks/bench_describe.py --rows 1e6   # a quick run
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _harness import run_process

EPSILON, DELTA = 1.0, 1e-6
COLUMNS = 10
CATEGORIES = ("north", "south", "east", "west", "centre", "islands", "overseas", "unknown")


def _uniform(seed: int) -> str:
    """SQL for a uniform on (0, 1), a pure function of the row number ``i``."""
    return f"((hash(i, {seed}) % 1000000007) + 0.5) / 1000000007.0"


def _normal(seed: int) -> str:
    """SQL for a standard normal (Box-Muller on two hashed uniforms)."""
    return f"(sqrt(-2 * ln({_uniform(seed)})) * cos(2 * pi() * {_uniform(seed + 1)}))"


def table_sql(rows: int) -> str:
    persons = max(1, rows // 10)
    # Skewed categories: the k-th has weight proportional to 1/(k+1).
    weights = [1.0 / (k + 1) for k in range(len(CATEGORIES))]
    total = sum(weights)
    cuts, acc = [], 0.0
    for name, w in zip(CATEGORIES, weights, strict=True):
        acc += w / total
        cuts.append((acc, name))
    case = " ".join(f"WHEN u < {cut!r} THEN '{name}'" for cut, name in cuts[:-1])
    category = f"CASE {case} ELSE '{cuts[-1][1]}' END"
    return f"""
    SELECT
        (hash(i, 1) % {persons})::BIGINT AS person_id,
        (50 + 10 * {_normal(10)})::DOUBLE AS x_normal,
        exp(10 + {_normal(12)})::DOUBLE AS income,
        CASE WHEN hash(i, 14) % 50 = 0 THEN NULL
             ELSE round(100 * {_uniform(15)}, 2) END::DOUBLE AS price,
        round(15 + 8 * {_normal(16)}, 1)::DOUBLE AS temperature,
        (18 + hash(i, 18) % 73)::INTEGER AS age,
        (hash(i, 19) % 5)::INTEGER AS rating,
        (hash(i, 20) % 10 < 3)::INTEGER AS flag,
        (DATE '2000-01-01' + (hash(i, 21) % 9132)::INTEGER) AS event_date,
        {category} AS region
    FROM (SELECT i, {_uniform(22)} AS u FROM range({rows}) t(i))
    """


def dataset(rows: int) -> tuple[Path, Path]:
    """The cached Parquet and CSV files of ``rows`` rows (the same table in both).

    DuckDB computes the table over ``range(rows)`` and streams it to Parquet with
    ``COPY``; the CSV is then copied from the Parquet file, so the two hold the same
    values (the CSV's floats are DuckDB's shortest round-trip text).
    """
    cache = Path(os.environ.get("DPKIT_BENCH_CACHE", Path.home() / ".cache" / "dpkit-bench"))
    cache.mkdir(parents=True, exist_ok=True)
    parquet = cache / f"describe_{rows}.parquet"
    csv = cache / f"describe_{rows}.csv"
    if not parquet.exists():
        tmp = parquet.with_suffix(".tmp")
        _duckdb(f"COPY ({table_sql(rows)}) TO '{tmp}' (FORMAT parquet)")
        tmp.rename(parquet)
    if not csv.exists():
        tmp = csv.with_suffix(".tmp")
        _duckdb(f"COPY (SELECT * FROM read_parquet('{parquet}')) TO '{tmp}' (FORMAT csv, HEADER)")
        tmp.rename(csv)
    return parquet, csv


def _duckdb(sql: str) -> None:
    """Run ``sql`` in a DuckDB of a child process: the benchmark's own process stays
    small, since a child's peak RSS (``os.wait4``) starts from its parent's at the fork."""
    code = (
        "import duckdb; con = duckdb.connect(); con.execute('SET enable_progress_bar = false');"
        f" con.execute({sql!r})"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def warm(*paths: Path) -> None:
    """Read ``paths`` once, so that every contender finds them in the page cache."""
    for path in paths:
        with path.open("rb") as file:
            while file.read(1 << 24):
                pass


def _summarize(path: Path, reader: str) -> str:
    return f"""
import duckdb
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
rows = con.execute("SUMMARIZE SELECT * FROM {reader}('{path}')").fetchall()
assert len(rows) == {COLUMNS}, rows
"""


def duckdb_parquet(parquet: Path, csv: Path, out: Path) -> str:
    return _summarize(parquet, "read_parquet")


def duckdb_csv(parquet: Path, csv: Path, out: Path) -> str:
    return _summarize(csv, "read_csv")


def _describe(path: Path, out: Path, *extra: str, src: str | None = None) -> str:
    args = [
        "dpkit",
        "describe",
        str(path),
        "--epsilon",
        str(EPSILON),
        "--delta",
        str(DELTA),
        "--json",
        str(out / "describe.json"),
        "--report",
        str(out / "describe.html"),
        *extra,
    ]
    first = "" if src is None else f"sys.path.insert(0, {src!r})"
    return f"""
import json, sys
{first}
from dpkit.cli.main import app
sys.argv = {args!r}
try:
    app(prog_name="dpkit")
except SystemExit as exit:
    if exit.code not in (0, None):
        raise
summary = json.load(open({str(out / "describe.json")!r}))
"""


def dpkit_parquet(parquet: Path, csv: Path, out: Path) -> str:
    return _describe(parquet, out)


def dpkit_csv(parquet: Path, csv: Path, out: Path) -> str:
    return _describe(csv, out)


def dpkit_parquet_unit(parquet: Path, csv: Path, out: Path) -> str:
    return _describe(parquet, out, "--privacy-unit", "person_id")


def baseline_unit(src: str) -> Callable[[Path, Path, Path], str]:
    """The ``--privacy-unit`` run of another checkout's ``src`` (``--baseline-src``):
    before and after a change, interleaved in one run."""

    def make(parquet: Path, csv: Path, out: Path) -> str:
        return _describe(parquet, out, "--privacy-unit", "person_id", src=src)

    return make


def import_dpkit(parquet: Path, csv: Path, out: Path) -> str:
    return "import dpkit"


BASELINE = "duckdb SUMMARIZE (parquet)"
BASELINE_UNIT = "dpkit describe --privacy-unit person_id (parquet), --baseline-src"
CONTENDERS: dict[str, Callable[[Path, Path, Path], str]] = {
    BASELINE: duckdb_parquet,
    "dpkit describe (parquet)": dpkit_parquet,
    "dpkit describe (csv)": dpkit_csv,
    "dpkit describe --privacy-unit person_id (parquet)": dpkit_parquet_unit,
    "duckdb SUMMARIZE (csv)": duckdb_csv,
    "(import dpkit only)": import_dpkit,
}


def run(code: str) -> tuple[float, float]:
    return run_process(code, quiet=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda text: int(float(text)), default=10**7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument(
        "--baseline-src",
        default=None,
        help="another checkout's src/ (e.g. `git archive HEAD src | tar -x -C DIR`): its"
        " --privacy-unit run is added as a contender, interleaved with this one's",
    )
    parser.add_argument(
        "--warmup",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="an untimed first run of each contender (default: below 5e6 rows; the files"
        " are read once into the page cache in any case)",
    )
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = args.rows < 5 * 10**6
    start = time.perf_counter()
    parquet, csv = dataset(args.rows)
    made = time.perf_counter() - start
    warm(parquet, csv)
    run("import dpkit, duckdb")  # compile the .pyc files, if not done yet
    if args.baseline_src:
        src = str(Path(args.baseline_src).resolve())
        run(f"import sys; sys.path.insert(0, {src!r}); import dpkit.cli.main, dpkit.report")
    mib = 1 << 20
    print(
        f"{args.rows:,} rows, {COLUMNS} columns; {parquet.name} {parquet.stat().st_size / mib:.0f}"
        f" MiB, {csv.name} {csv.stat().st_size / mib:.0f} MiB (ready in {made:.1f} s);"
        f" ApproxDP({EPSILON:g}, {DELTA:g}); median of {args.repeat}"
        + (" after a warm-up run" if args.warmup else ", no warm-up run"),
        flush=True,
    )
    results: dict[str, tuple[float, float, list[float]]] = {}
    out = Path(tempfile.mkdtemp(prefix="dpkit-bench-describe-"))
    load_before = os.getloadavg()[0]
    try:
        contenders = dict(CONTENDERS)
        if args.baseline_src:
            contenders[BASELINE_UNIT] = baseline_unit(str(Path(args.baseline_src).resolve()))
        codes = {
            name: make(parquet, csv, out)
            for name, make in contenders.items()
            if not args.only or name in args.only or name == BASELINE_UNIT
        }
        if args.warmup:
            for code in codes.values():
                run(code)  # warm the file cache and the interpreter's .pyc
        # Interleaved: round r runs every contender once, so a change in the machine's
        # load (other jobs) hits all of them alike.
        timings: dict[str, list[tuple[float, float]]] = {name: [] for name in codes}
        for _ in range(args.repeat):
            for name, code in codes.items():
                timings[name].append(run(code))
        for name, runs in timings.items():
            times, peaks = zip(*runs, strict=True)
            results[name] = (statistics.median(times), max(peaks), list(times))
            print(f"  {name}: {', '.join(f'{t:.2f}' for t in times)} s", flush=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"load average (1 min) before {load_before:.2f}, after {os.getloadavg()[0]:.2f}")
    base = results.get(BASELINE, (float("nan"), 0.0, []))[0]
    print()
    print("| contender | median s | ratio to SUMMARIZE (parquet) | peak MiB |")
    print("|---|---:|---:|---:|")
    for name, (seconds, peak, _) in results.items():
        print(f"| {name} | {seconds:.2f} | {seconds / base:.2f} | {peak:.0f} |")
    if "dpkit describe (csv)" in results and "dpkit describe (parquet)" in results:
        ratio = results["dpkit describe (csv)"][0] / results["dpkit describe (parquet)"][0]
        verdict = "met" if ratio <= 1.5 else "NOT met"
        print(f"\ndescribe CSV / Parquet: {ratio:.2f} (goal <= 1.5: {verdict})")
    if "duckdb SUMMARIZE (csv)" in results and BASELINE in results:
        ratio = results["duckdb SUMMARIZE (csv)"][0] / base
        print(f"SUMMARIZE CSV / Parquet: {ratio:.2f}")


if __name__ == "__main__":
    main()
