"""Per-group count and bounded sum with contribution bounding: the peers, end to end.

The workload of issue 6's speed target, run by each peer library as a whole process
(interpreter start-up, imports, reading Parquet, bounding, aggregation, noise) and
timed from outside with a subprocess, so every case pays what a user would pay:

* ``rows`` rows (default 10^7) of ``(user_id, grp, value)`` in one Parquet file:
  ``persons`` persons (10^5), ``groups`` groups (50), ``value`` in [0, 100].
  Each person has a few favourite groups (so about 8 of the 50), rows spread over
  them unevenly, and 100 rows on average (heavy-tailed: some persons have many).
* The query: per group, the count of rows and the sum of ``value`` clamped to
  [0, 100]; the groups are public (the keys 0..49); each person contributes to at most
  5 groups and at most 10 rows per group (extra groups and rows dropped); epsilon = 1
  over both statistics (0.5 each, pure DP with Laplace noise where the library allows
  it; the guarantee of each peer is stated in the table).

Cases (one function per peer, each returns the command to time):

* ``duckdb``: non-private ``GROUP BY`` in DuckDB, the floor: no bounding, no noise.
* ``polars``: the same non-private aggregation in Polars (lazy scan).
* ``opendp-polars``: OpenDP's ``dp.Context`` over a Polars LazyFrame with a privacy unit
  identified by ``user_id``, ``truncate_per_group(10)`` and
  ``truncate_num_groups(5, keep='first')`` (the default ``keep='sample'`` fails in
  OpenDP 0.16 with Polars 1.36.1: "multiple fields with name 'grp' found"; keeping a
  person's first groups is also a rule that depends only on that person's rows).
* ``tumult-spark``: Tumult Analytics (local Spark) with ``AddRowsWithID("user_id")``,
  ``MaxGroupsPerID(5)`` and ``MaxRowsPerGroupPerID(10)``, a public KeySet.
* ``pipelinedp-local``: PipelineDP's LocalBackend (pure Python), with public partitions.
* ``pipelinedp-spark``: PipelineDP's SparkRDDBackend on local Spark (``--spark-pipelinedp``).
* ``dpkit``: dpkit's Session (``Session.from_path`` over the Parquet file, privacy unit
  ``user_id``, ``.bound(max_groups=5, max_rows=10)``, public keys, ``PureDP(1.0)``),
  in the interpreter running this script.

Each case runs ``--repeat`` times (default 3) and the median wall time is reported,
with its ratio to the DuckDB floor. Results go to ``benchmarks/results/session_peers.md``.

Peer environments
-----------------
Tumult Analytics 0.21 pins pandas < 2 and NumPy 1.26, and OpenDP 0.16's Polars
support pins ``polars==1.36.1``, so the peers live in virtual environments of their
own, outside the repository (the dpkit venv is left as it is)::

    python3.11 -m venv /tmp/peer-venvs/tumult
    /tmp/peer-venvs/tumult/bin/pip install 'tmlt.analytics==0.21.*' 'pipeline-dp==0.3.*' \\
        pyspark duckdb
    python3.11 -m venv /tmp/peer-venvs/opendp
    /tmp/peer-venvs/opendp/bin/pip install 'opendp[polars]==0.16.*' 'pipeline-dp==0.3.*' pyarrow

Spark needs Java 17 (``/usr/bin/java``). The DuckDB floor runs in the interpreter
running this script (dpkit's venv); Polars, OpenDP and PipelineDP local in the
``opendp`` venv; Tumult and PipelineDP-on-Spark in the ``tumult`` venv. Set
``PEER_VENVS`` to move the folder.

Run: ``python benchmarks/bench_session_peers.py --rows 100000`` to try it (seconds),
``python benchmarks/bench_session_peers.py`` for the real run (10^7 rows; about 10
minutes on 2 cores, most of it the Spark and PipelineDP cases).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

CACHE = Path(os.environ.get("DPKIT_BENCH_CACHE", Path.home() / ".cache" / "dpkit-bench"))
VENVS = Path(os.environ.get("PEER_VENVS", "/tmp/peer-venvs"))
RESULTS = Path(__file__).resolve().parent / "results" / "session_peers.md"

MAX_GROUPS = 5
MAX_ROWS_PER_GROUP = 10
EPSILON = 1.0
LOW, HIGH = 0.0, 100.0


@dataclass(frozen=True)
class Workload:
    rows: int
    persons: int
    groups: int

    @property
    def path(self) -> Path:
        return CACHE / f"sessions_{self.rows}_{self.persons}_{self.groups}.parquet"


@dataclass(frozen=True)
class Case:
    """A command to time, the interpreter it runs under, and what it guarantees."""

    name: str
    python: Path
    code: str
    guarantee: str


def make_parquet(work: Workload, *, seed: int = 6) -> Path:
    """Write the workload's Parquet file once (cached); return its path."""
    if work.path.exists():
        return work.path
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Synthetic benchmark data; NumPy's PCG64 is fine outside dpkit's library code.
    rng = np.random.Generator(np.random.PCG64(seed))
    # Heavy-tailed rows per person, rescaled to the requested total.
    weight = rng.lognormal(0.0, 1.0, work.persons)
    person = rng.choice(work.persons, size=work.rows, p=weight / weight.sum())
    # A person's rows fall in a few favourite groups: a person-specific start and a
    # geometric offset (mean about 2), so most persons touch 5 to 10 of the groups.
    start = rng.integers(0, work.groups, work.persons)
    offset = rng.geometric(0.35, work.rows) - 1
    grp = (start[person] + offset) % work.groups
    value = np.round(rng.gamma(2.0, 15.0, work.rows), 2)  # some above the bound 100
    table = pa.table(
        {
            "user_id": person.astype(np.int64),
            "grp": grp.astype(np.int64),
            "value": value.astype(np.float64),
        }
    )
    work.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = work.path.with_suffix(".tmp")
    pq.write_table(table, tmp, row_group_size=1 << 20)
    tmp.rename(work.path)
    return work.path


# --- the cases: each returns the code to run in a fresh interpreter ------------------


def case_duckdb(path: Path, work: Workload) -> Case:
    code = f"""
        import duckdb
        rows = duckdb.sql('''
            SELECT grp, count(*) AS n, sum(least(greatest(value, {LOW}), {HIGH})) AS s
            FROM read_parquet('{path}') GROUP BY grp ORDER BY grp
        ''').fetchall()
        assert len(rows) == {work.groups}
    """
    return Case("duckdb (non-private floor)", Path(sys.executable), code, "none")


def case_polars(path: Path, work: Workload) -> Case:
    code = f"""
        import polars as pl
        out = (
            pl.scan_parquet('{path}')
            .group_by('grp')
            .agg(pl.len().alias('n'), pl.col('value').clip({LOW}, {HIGH}).sum().alias('s'))
            .collect()
        )
        assert out.height == {work.groups}
    """
    return Case("polars (non-private)", VENVS / "opendp/bin/python", code, "none")


def case_opendp(path: Path, work: Workload) -> Case:
    # The privacy unit is a user_id; OpenDP bounds contributions by truncation. Each
    # statistic gets epsilon/2 (split_evenly_over=2); Laplace noise (pure DP).
    code = f"""
        import polars as pl
        import opendp.prelude as dp
        dp.enable_features('contrib')
        keys = pl.LazyFrame({{'grp': list(range({work.groups}))}})
        context = dp.Context.compositor(
            data=pl.scan_parquet('{path}'),
            privacy_unit=dp.unit_of(contributions=[
                dp.polars.Bound(per_group={MAX_ROWS_PER_GROUP}),
                dp.polars.Bound(by=['grp'], num_groups={MAX_GROUPS}),
            ], identifier='user_id'),
            privacy_loss=dp.loss_of(epsilon={EPSILON}),
            split_evenly_over=2,
            # A public bound on a group's size (here: the table's row count), which
            # OpenDP's bounded sum needs.
            margins=[dp.polars.Margin(by=['grp'], max_length={work.rows})],
        )
        def query(agg):
            return (
                context.query()
                .truncate_per_group({MAX_ROWS_PER_GROUP}, by=['grp'])
                .truncate_num_groups({MAX_GROUPS}, by=['grp'], keep='first')
                .group_by('grp')
                .agg(agg)
                .with_keys(keys)
            )
        counts = query(dp.len()).release().collect()
        sums = query(
            pl.col('value').fill_null(0.0).dp.sum(({LOW}, {HIGH}))
        ).release().collect()
        assert counts.height == sums.height == {work.groups}
    """
    return Case("opendp + polars", VENVS / "opendp/bin/python", code, "ε = 1 (pure DP)")


_SPARK_SETUP = """
        import os
        os.environ.setdefault('PYSPARK_PYTHON', __import__('sys').executable)
        from pyspark.sql import SparkSession
        spark = (
            SparkSession.builder.master('local[*]')
            .config('spark.driver.memory', '6g')
            .config('spark.sql.shuffle.partitions', '8')
            .config('spark.ui.enabled', 'false')
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel('ERROR')
"""


def case_tumult(path: Path, work: Workload) -> Case:
    code = (
        _SPARK_SETUP
        + f"""
        from tmlt.analytics import (
            AddRowsWithID, KeySet, MaxGroupsPerID, MaxRowsPerGroupPerID, PureDPBudget,
            QueryBuilder, Session,
        )
        df = spark.read.parquet('{path}')
        session = Session.from_dataframe(
            privacy_budget=PureDPBudget({EPSILON}),
            source_id='data',
            dataframe=df,
            protected_change=AddRowsWithID('user_id'),
        )
        keys = KeySet.from_dict({{'grp': list(range({work.groups}))}})
        def query(agg):
            base = (
                QueryBuilder('data')
                .enforce(MaxGroupsPerID('grp', {MAX_GROUPS}))
                .enforce(MaxRowsPerGroupPerID('grp', {MAX_ROWS_PER_GROUP}))
                .groupby(keys)
            )
            return agg(base)
        counts = session.evaluate(query(lambda q: q.count()), PureDPBudget({EPSILON / 2}))
        sums = session.evaluate(
            query(lambda q: q.sum('value', {LOW}, {HIGH})), PureDPBudget({EPSILON / 2})
        )
        assert counts.count() == sums.count() == {work.groups}
    """
    )
    return Case(
        "tumult analytics (local spark)", VENVS / "tumult/bin/python", code, "ε = 1 (pure DP)"
    )


_PIPELINEDP_QUERY = f"""
        import pipeline_dp
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon={EPSILON}, total_delta=0)
        engine = pipeline_dp.DPEngine(accountant, backend)
        params = pipeline_dp.AggregateParams(
            noise_kind=pipeline_dp.NoiseKind.LAPLACE,
            metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM],
            max_partitions_contributed={MAX_GROUPS},
            max_contributions_per_partition={MAX_ROWS_PER_GROUP},
            min_value={LOW},
            max_value={HIGH},
        )
        extractors = pipeline_dp.DataExtractors(
            privacy_id_extractor=lambda r: r[0],
            partition_extractor=lambda r: r[1],
            value_extractor=lambda r: r[2],
        )
"""


def case_pipelinedp_local(path: Path, work: Workload) -> Case:
    code = (
        f"""
        import pyarrow.parquet as pq
        table = pq.read_table('{path}')
        rows = zip(*(table.column(c).to_pylist() for c in ('user_id', 'grp', 'value')))
        import pipeline_dp
        backend = pipeline_dp.LocalBackend()
    """
        + _PIPELINEDP_QUERY
        + f"""
        result = engine.aggregate(rows, params, extractors,
                                  public_partitions=list(range({work.groups})))
        accountant.compute_budgets()
        assert len(list(result)) == {work.groups}
    """
    )
    return Case("pipelinedp (local)", VENVS / "opendp/bin/python", code, "ε = 1 (pure DP)")


def case_pipelinedp_spark(path: Path, work: Workload) -> Case:
    code = (
        _SPARK_SETUP
        + f"""
        import pipeline_dp
        rdd = spark.read.parquet('{path}').rdd.map(lambda r: (r[0], r[1], r[2]))
        backend = pipeline_dp.SparkRDDBackend(spark.sparkContext)
    """
        + _PIPELINEDP_QUERY
        + f"""
        result = engine.aggregate(rdd, params, extractors,
                                  public_partitions=list(range({work.groups})))
        accountant.compute_budgets()
        assert len(result.collect()) == {work.groups}
    """
    )
    return Case("pipelinedp (local spark)", VENVS / "tumult/bin/python", code, "ε = 1 (pure DP)")


def case_dpkit(path: Path, work: Workload) -> Case:
    """dpkit's Session over the Parquet file: the same bounds, public keys, pure DP."""
    code = f"""
        import warnings
        import dpkit as dp
        from dpkit.analytics import KeySet, Query
        session = dp.Session.from_path('{path}', privacy_unit='user_id',
                                       budget=dp.PureDP(1.0))
        query = (
            Query()
            .group_by('grp', keys=KeySet.from_values(grp=list(range({work.groups}))))
            .bound(max_groups=5, max_rows=10)
            .count()
            .sum('value', bounds=({LOW}, {HIGH}))
        )
        result = session.evaluate(query, budget=dp.PureDP(1.0))
        assert len(result.dataframe) == {work.groups}
    """
    return Case("dpkit Session", Path(sys.executable), code, "ε = 1 (pure DP, add/remove person)")


def case_dpkit_spark(path: Path, work: Workload) -> Case:
    """dpkit's Session on the same local Spark as Tumult's case (issue 34: at least 5x
    faster than Tumult on Spark, in the same run)."""
    code = (
        _SPARK_SETUP
        + f"""
        import dpkit as dp
        from dpkit.analytics import KeySet, Query
        df = spark.read.parquet('{path}')
        session = dp.Session.from_spark(df, privacy_unit='user_id', budget=dp.PureDP(1.0))
        query = (
            Query()
            .group_by('grp', keys=KeySet.from_values(grp=list(range({work.groups}))))
            .bound(max_groups={MAX_GROUPS}, max_rows={MAX_ROWS_PER_GROUP})
            .count()
            .sum('value', bounds=({LOW}, {HIGH}))
        )
        result = session.evaluate(query, budget=dp.PureDP(1.0))
        assert len(result.dataframe) == {work.groups}
    """
    )
    return Case(
        "dpkit Session on Spark (local spark)",
        Path(sys.executable),
        code,
        "ε = 1 (pure DP, add/remove person)",
    )


CASES: dict[str, Callable[[Path, Workload], Case | str]] = {
    "duckdb": case_duckdb,
    "polars": case_polars,
    "opendp": case_opendp,
    "tumult": case_tumult,
    "pipelinedp-local": case_pipelinedp_local,
    "pipelinedp-spark": case_pipelinedp_spark,
    "dpkit": case_dpkit,
    "dpkit-spark": case_dpkit_spark,
}


# --- timing and reporting ------------------------------------------------------------


def time_once(case: Case, timeout: float) -> tuple[float | None, str]:
    """Wall-clock seconds of one run of the whole process, or an error."""
    if not case.python.exists():
        return None, f"interpreter {case.python} not found (see the docstring for the venvs)"
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [str(case.python), "-c", textwrap.dedent(case.code)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return None, "failed: " + " | ".join(tail)
    return elapsed, ""


def time_interleaved(
    cases: dict[str, Case], repeat: int, timeout: float
) -> dict[str, tuple[list[float], str]]:
    """Each round runs every case once, in order (a change in the machine's load hits
    them alike); a case that fails is not run again."""
    out: dict[str, tuple[list[float], str]] = {name: ([], "") for name in cases}
    for _ in range(repeat):
        for name, case in cases.items():
            times, error = out[name]
            if error:
                continue
            seconds, error = time_once(case, timeout)
            if seconds is not None:
                times.append(seconds)
            out[name] = (times, error)
    return out


def versions(python: Path, packages: list[str]) -> str:
    code = (
        "import importlib.metadata as m, sys\n"
        f"for p in {packages!r}:\n"
        "    try: print(p, m.version(p))\n"
        "    except m.PackageNotFoundError: pass\n"
        "print('python', sys.version.split()[0])\n"
    )
    try:
        out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    except OSError:
        return ""
    return ", ".join(line.replace(" ", " ") for line in out.stdout.strip().splitlines())


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return "not found"
    return out.stderr.strip().splitlines()[0] if out.stderr else "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--persons", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), help="run only these")
    parser.add_argument(
        "--spark-pipelinedp", action="store_true", help="include PipelineDP on Spark"
    )
    parser.add_argument("--no-write", action="store_true", help="do not write the results file")
    args = parser.parse_args()

    work = Workload(args.rows, min(args.persons, args.rows), args.groups)
    start = time.perf_counter()
    path = make_parquet(work)
    print(
        f"data: {path} ({path.stat().st_size / 1e6:.1f} MB; made or found in "
        f"{time.perf_counter() - start:.1f} s)",
        flush=True,
    )

    names = args.only or [n for n in CASES if n != "pipelinedp-spark" or args.spark_pipelinedp]
    rows: list[tuple[str, float | None, str, str]] = []
    cases: dict[str, Case] = {}
    for name in names:
        case = CASES[name](path, work)
        if isinstance(case, str):
            print(f"{name}: skipped: {case}", flush=True)
            rows.append((name, None, "", f"skipped: {case}"))
        else:
            cases[name] = case
    load_before = os.getloadavg()[0]
    # Every run is counted the same (a Spark case's runs each start a JVM).
    timed = time_interleaved(cases, args.repeat, args.timeout)
    print(f"load average (1 min) before {load_before:.2f}, after {os.getloadavg()[0]:.2f}")
    for name, case in cases.items():
        times, error = timed[name]
        median = statistics.median(times) if times and not error else None
        note = error or ", ".join(f"{t:.2f}" for t in times)
        shown = "" if median is None else f"{median:.2f} s"
        print(f"{case.name}: {shown} {note}", flush=True)
        rows.append((case.name, median, case.guarantee, note))

    floor = next((t for n, t, _, _ in rows if n.startswith("duckdb") and t), None)
    table = [
        "| case | guarantee | median s | × DuckDB | runs (s) |",
        "|---|---|---:|---:|---|",
    ]
    for name, median, guarantee, note in rows:
        ratio = f"{median / floor:.1f}" if median and floor else ""
        seconds = "" if median is None else f"{median:.2f}"
        table.append(f"| {name} | {guarantee} | {seconds} | {ratio} | {note} |")
    venv_info = [
        f"- runner: {versions(Path(sys.executable), ['duckdb', 'pyarrow', 'numpy'])}",
        "- opendp venv: "
        + versions(VENVS / "opendp/bin/python", ["opendp", "polars", "pipeline-dp", "numpy"]),
        "- tumult venv: "
        + versions(
            VENVS / "tumult/bin/python",
            ["tmlt.analytics", "tmlt.core", "pyspark", "pipeline-dp", "pandas", "numpy"],
        ),
        f"- java: {java_version()}",
    ]
    header = [
        "# Session peers: per-group count and bounded sum, end to end from Parquet",
        "",
        f"{datetime.now(tz=UTC):%Y-%m-%d %H:%M} UTC; {platform.platform()}; "
        f"{os.cpu_count()} CPUs. Produced by `python benchmarks/bench_session_peers.py "
        + " ".join(sys.argv[1:])
        + "`.",
        "",
        f"Workload: {work.rows:,} rows, {work.persons:,} persons, {work.groups} groups; "
        f"at most {MAX_GROUPS} groups per person and {MAX_ROWS_PER_GROUP} rows per person "
        f"per group; value clamped to [{LOW:g}, {HIGH:g}]; ε = {EPSILON:g} in total. Each "
        f"run is a whole process (start-up, imports, Parquet read, bounding, noise); "
        f"median of {args.repeat} runs. The machine was shared with other work, so "
        "absolute times are noisy; ratios are the result.",
        "",
        *table,
        "",
        "Versions:",
        "",
        *venv_info,
        "",
    ]
    text = "\n".join(header)
    print()
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text, encoding="utf-8")
        print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
