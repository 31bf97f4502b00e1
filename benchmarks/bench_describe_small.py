"""``dpkit describe`` on small real tables: DuckDB against Spark, in one process.

Issue 34 asks for describe on Spark within 3x of describe on DuckDB for small tables
(job overhead batched). This script measures that ratio: the same command
(``dpkit describe FILE --engine E --seed 5 --epsilon 1 --delta 1e-6 --json ...``) on
tables shipped inside installed packages, written once as Parquet, run in this
process through the command line's ``app`` (Spark's JVM started once, by an untimed
warm-up run of each engine), engines interleaved round by round. Reported: the median
seconds per engine and table, and Spark / DuckDB.

Run: ``python benchmarks/bench_describe_small.py [--repeat 3]``; results are recorded
in ``benchmarks/results/describe.md``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd


def tables() -> dict[str, Callable[[], pd.DataFrame]]:
    from sklearn.datasets import load_diabetes, load_digits
    from statsmodels.datasets import fair

    return {
        "diabetes (442 x 11)": lambda: load_diabetes(as_frame=True).frame,
        "fair (6,366 x 9)": lambda: fair.load_pandas().data,
        "digits (1,797 x 65)": lambda: load_digits(as_frame=True).frame,
    }


def describe_seconds(path: Path, engine: str, out: Path) -> float:
    from typer.testing import CliRunner

    from dpkit.cli.main import app

    arguments = ["describe", str(path), "--engine", engine, "--seed", "5", "--epsilon", "1"]
    arguments += ["--delta", "1e-6", "--json", str(out)]
    start = time.perf_counter()
    result = CliRunner().invoke(app, arguments)
    seconds = time.perf_counter() - start
    if result.exit_code != 0:
        raise RuntimeError(f"describe --engine {engine} failed: {result.output[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    engines = ("duckdb", "spark")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        paths = {}
        for i, (name, load) in enumerate(tables().items()):
            paths[name] = folder / f"table{i}.parquet"
            load().to_parquet(paths[name])
        first = next(iter(paths.values()))
        for engine in engines:  # untimed: imports, Spark's JVM and session
            describe_seconds(first, engine, folder / "warm.json")
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeat):
            for name, path in paths.items():
                for engine in engines:
                    seconds = describe_seconds(path, engine, folder / "out.json")
                    times.setdefault((name, engine), []).append(seconds)
    print("| table | DuckDB s | Spark s | Spark / DuckDB |")
    print("|---|---:|---:|---:|")
    for name in paths:
        duck = statistics.median(times[(name, "duckdb")])
        spark = statistics.median(times[(name, "spark")])
        print(f"| {name} | {duck:.2f} | {spark:.2f} | {spark / duck:.1f} |")


if __name__ == "__main__":
    main()
