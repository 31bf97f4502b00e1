"""Joins in a Session over several tables: dpkit against Tumult Analytics (issue 29).

Accuracy and speed, side by side, of the two kinds of join a DP Session offers, on the
same synthetic tables, with the same bounds, keys and pure-DP budget:

* ``visits`` (private): ``uid``, ``region_id``, ``duration`` (integer seconds),
  ``rows`` rows, ``rows / 10`` persons (10 visits per person on average, heavy-tailed:
  log-normal weights), each person's visits in a few favourite region ids.
* ``people`` (private): one row per ``uid`` (every person, visits or not), with an
  ``age_group`` (5 groups).
* ``regions`` (public): 50 region ids in 10 regions (5 ids each); 5 ids appear twice,
  the second time in the next region, so a visit there joins twice (the public join's
  fan-out ``M`` is 2).

The privacy unit is the person (``uid``) in both tables: neighbours differ by one
person with all their rows (Tumult: ``AddRowsWithID("uid")`` on both tables, one ID
space). Two queries, each with ``ε = EPSILON`` (pure DP), split evenly between a count
and a sum of ``duration`` clamped to ``[0, 3600]``:

* **public join**: ``visits ⋈ regions`` on ``region_id``, per ``region`` (the 10 region
  names, public keys), each person in at most ``PUBLIC_GROUPS`` regions and with at most
  ``PUBLIC_ROWS`` rows per region (bounds applied after the join in both libraries).
* **private join**: ``visits ⋈ people`` on ``uid``, per ``age_group`` (5 public keys),
  at most 1 group and ``PRIVATE_ROWS`` rows per person. dpkit requires ``truncate=1``
  on ``people`` (each person keeps at most one row of it before the join: drops nothing
  here, ``people`` has one row per person). Tumult 0.21 joins tables with
  ``AddRowsWithID`` on the ID **without** truncation: it ignores
  ``TruncationStrategy.DropExcess``/``DropNonUnique`` there (with a warning), so none
  is passed; truncation strategies only apply to row-level protected changes
  (``AddMaxRows``), a different privacy unit, not measured here.

Cases, run interleaved (each round: every case creates its Session, then runs the
public and the private query), the dpkit ones in this process and Tumult in a worker
process of its own venv (one Spark started once, timed separately):

* ``dpkit duckdb``: ``dp.Session.from_tables(..., engine="duckdb")`` over the Parquet
  files (the baseline of the time ratios);
* ``dpkit spark``: the same on a local Spark ``local[2]`` (``--spark``);
* ``tumult``: Tumult Analytics 0.21 on local Spark ``local[2]``, Session built from
  ``spark.read.parquet``; its count and sum are two ``evaluate`` calls (ε/2 each), the
  query time is their sum (dpkit releases both from one ``evaluate``).

Time: wall seconds of the Session's creation and of each query (``evaluate`` to a pandas
result), median over the rounds. Error: the releases of every round (one repetition per
round) against the **exact answer without contribution bounds and without clamping**
(plain SQL over the joined tables). The exact answer *under* each library's bounding is
not the same for both (which groups and rows a person keeps is chosen by a different
rule in each), so the unbounded truth is the common reference: the error includes the
bias of bounding, which is the same kind in both. Per (case, query, statistic): the
median over groups and rounds of the relative error ``|release - truth| / truth``, of
the absolute error, and the noise spread (median over groups of the standard deviation
of the releases across rounds: the noise alone, without the bias).

Tumult's venv (see ``bench_session_peers.py``)::

    python3.11 -m venv /tmp/peer-venvs/tumult
    /tmp/peer-venvs/tumult/bin/pip install 'tmlt.analytics==0.21.*' 'pyspark==3.5.*'

Run: ``python benchmarks/joins_vs_tumult.py --quick`` (10^5 rows, 1 round, under a
minute), ``python benchmarks/joins_vs_tumult.py --rows 1000000`` (one size), or without
``--rows`` for 10^6 and 10^7. Results: ``benchmarks/results/joins.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import queue
import signal
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("DPKIT_BENCH_CACHE", Path.home() / ".cache" / "dpkit-bench"))
VENVS = Path(os.environ.get("PEER_VENVS", "/tmp/peer-venvs"))
RESULTS = Path(__file__).resolve().parent / "results" / "joins.md"

EPSILON = 1.0  # per query, split evenly between the count and the sum
LOW, HIGH = 0, 3600
# Chosen from the data: 99% of persons visit at most 3 regions; the caps keep about 85%
# (public) and 88% (private) of the joined rows (10^5 rows; the tail is heavy).
PUBLIC_GROUPS, PUBLIC_ROWS = 3, 20
PRIVATE_GROUPS, PRIVATE_ROWS = 1, 30
REGION_IDS, REGIONS, DUPLICATED = 50, 10, (4, 14, 24, 34, 44)
AGE_GROUPS = ("0-17", "18-34", "35-54", "55-74", "75+")
QUERIES = ("public", "private")
STATS = ("count", "sum")


@dataclass(frozen=True)
class Data:
    rows: int

    @property
    def folder(self) -> Path:
        return CACHE / f"joins_{self.rows}"

    def path(self, table: str) -> Path:
        return self.folder / f"{table}.parquet"


def region_name(index: int) -> str:
    return f"region_{index:02d}"


def make_data(data: Data, *, seed: int = 29) -> Data:
    """Write the three Parquet files once (cached)."""
    if all(data.path(t).exists() for t in ("visits", "people", "regions")):
        return data
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Synthetic benchmark data; NumPy's PCG64 is fine outside dpkit's library code.
    rng = np.random.Generator(np.random.PCG64(seed))
    persons = max(data.rows // 10, 1)
    weight = rng.lognormal(0.0, 1.0, persons)
    uid = rng.choice(persons, size=data.rows, p=weight / weight.sum())
    # A person's visits fall in a few favourite region ids: a start and a geometric offset.
    start = rng.integers(0, REGION_IDS, persons)
    region_id = (start[uid] + rng.geometric(0.5, data.rows) - 1) % REGION_IDS
    duration = np.rint(rng.lognormal(6.0, 1.0, data.rows)).astype(np.int64)  # ~1.4% > 3600
    visits = pa.table(
        {
            "uid": uid.astype(np.int64),
            "region_id": region_id.astype(np.int64),
            "duration": duration,
        }
    )
    age = rng.choice(len(AGE_GROUPS), size=persons, p=[0.2, 0.3, 0.25, 0.15, 0.1])
    people = pa.table(
        {
            "uid": np.arange(persons, dtype=np.int64),
            "age_group": [AGE_GROUPS[a] for a in age],
        }
    )
    ids = list(range(REGION_IDS)) + list(DUPLICATED)
    names = [region_name(i // 5) for i in range(REGION_IDS)]
    names += [region_name((i // 5 + 1) % REGIONS) for i in DUPLICATED]
    regions = pa.table({"region_id": pa.array(ids, pa.int64()), "region": names})
    data.folder.mkdir(parents=True, exist_ok=True)
    for name, table in (("visits", visits), ("people", people), ("regions", regions)):
        tmp = data.path(name).with_suffix(".tmp")
        pq.write_table(table, tmp, row_group_size=1 << 20)
        tmp.rename(data.path(name))
    return data


def exact_answers(data: Data) -> dict[str, dict[str, dict[str, float]]]:
    """query -> group -> {count, sum}: plain SQL, no contribution bounds, no clamping."""
    import duckdb

    con = duckdb.connect()
    v, p, r = (f"read_parquet('{data.path(t)}')" for t in ("visits", "people", "regions"))
    sql = {
        "public": f"SELECT region, count(*), sum(duration) FROM {v} JOIN {r} USING (region_id) "
        "GROUP BY region",
        "private": f"SELECT age_group, count(*), sum(duration) FROM {v} JOIN {p} USING (uid) "
        "GROUP BY age_group",
    }
    out: dict[str, dict[str, dict[str, float]]] = {}
    for query, statement in sql.items():
        rows = con.sql(statement).fetchall()
        out[query] = {str(g): {"count": float(c), "sum": float(s)} for g, c, s in rows}
    con.close()
    return out


# --- the cases ---------------------------------------------------------------------------


Releases = dict[str, dict[str, float]]  # group -> {count, sum}


class Contender:
    """One library: start once, then per round a Session and the two queries."""

    name: str
    guarantee: str
    started_in: float = 0.0

    def start(self) -> None: ...

    def session(self, epsilon: float) -> float:
        raise NotImplementedError

    def query(self, which: str, epsilon: float) -> tuple[float, Releases]:
        raise NotImplementedError

    def close(self) -> None: ...


class Dpkit(Contender):
    def __init__(self, data: Data, engine: str) -> None:
        self.data = data
        self.engine = engine
        self.name = f"dpkit {engine}"
        self.guarantee = "ε-DP (pure), person"
        self._session: Any = None
        self._spark: Any = None

    def start(self) -> None:
        begin = time.perf_counter()
        import dpkit  # noqa: F401

        if self.engine == "spark":
            from pyspark.sql import SparkSession

            self._spark = (
                SparkSession.builder.master("local[2]")
                .config("spark.driver.memory", "4g")
                .config("spark.sql.shuffle.partitions", "8")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .getOrCreate()
            )
            self._spark.sparkContext.setLogLevel("ERROR")
        self.started_in = time.perf_counter() - begin

    def session(self, epsilon: float) -> float:
        import dpkit as dp

        self._session = None  # the previous round's Session (it has no close())
        begin = time.perf_counter()
        self._session = dp.Session.from_tables(
            {"visits": str(self.data.path("visits")), "people": str(self.data.path("people"))},
            privacy_unit="uid",
            public={"regions": str(self.data.path("regions"))},
            budget=dp.PureDP(epsilon),
            engine=self.engine,
        )
        return time.perf_counter() - begin

    def queries(self) -> dict[str, Any]:
        from dpkit.analytics import KeySet, Query

        public = (
            Query.from_table("visits")
            .join("regions", on="region_id", how="inner")
            .group_by("region", keys=KeySet.from_table("regions", "region"))
            .bound(max_groups=PUBLIC_GROUPS, max_rows=PUBLIC_ROWS)
            .count()
            .sum("duration", bounds=(LOW, HIGH))
        )
        private = (
            Query.from_table("visits")
            .join("people", on="uid", truncate=1)
            .group_by("age_group", keys=KeySet.from_values(age_group=AGE_GROUPS))
            .bound(max_groups=PRIVATE_GROUPS, max_rows=PRIVATE_ROWS)
            .count()
            .sum("duration", bounds=(LOW, HIGH))
        )
        return {"public": (public, "region"), "private": (private, "age_group")}

    def query(self, which: str, epsilon: float) -> tuple[float, Releases]:
        import dpkit as dp

        query, key = self.queries()[which]
        begin = time.perf_counter()
        frame = self._session.evaluate(query, budget=dp.PureDP(epsilon)).dataframe
        elapsed = time.perf_counter() - begin
        releases = {
            str(row[key]): {"count": float(row["count"]), "sum": float(row["sum_duration"])}
            for _, row in frame.iterrows()
        }
        return elapsed, releases

    def explain(self, epsilon: float) -> str:
        import dpkit as dp

        return "\n\n".join(
            str(self._session.explain(q, budget=dp.PureDP(epsilon)))
            for q, _ in self.queries().values()
        )

    def close(self) -> None:
        if self._spark is not None:
            self._spark.stop()


# The Tumult worker: runs in Tumult's venv, reads one JSON command a line on stdin and
# answers one line starting with "@@" on stdout (Spark's chatter goes to stderr).
_TUMULT_WORKER = """
    import json, os, sys, time, warnings
    warnings.filterwarnings("ignore")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    visits, people, regions = sys.argv[1:4]
    groups = json.loads(sys.argv[4])
    begin = time.perf_counter()
    from pyspark.sql import SparkSession
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from tmlt.analytics import (
        AddRowsWithID, KeySet, MaxGroupsPerID, MaxRowsPerGroupPerID, PureDPBudget,
        QueryBuilder, Session,
    )
    def reply(**kw):
        print("@@" + json.dumps(kw), flush=True)
    reply(seconds=time.perf_counter() - begin)
    session = None
    bounds = groups["bounds"]
    for line in sys.stdin:
        cmd = json.loads(line)
        begin = time.perf_counter()
        if cmd["op"] == "session":
            session = (
                Session.Builder()
                .with_privacy_budget(PureDPBudget(cmd["epsilon"]))
                .with_id_space("uid")
                .with_private_dataframe(
                    "visits", spark.read.parquet(visits),
                    protected_change=AddRowsWithID("uid", "uid"))
                .with_private_dataframe(
                    "people", spark.read.parquet(people),
                    protected_change=AddRowsWithID("uid", "uid"))
                .with_public_dataframe("regions", spark.read.parquet(regions))
                .build()
            )
            reply(seconds=time.perf_counter() - begin)
        elif cmd["op"] == "query":
            which = cmd["query"]
            key, max_groups, max_rows = bounds[which]
            base = QueryBuilder("visits")
            if which == "public":
                base = base.join_public("regions", join_columns=["region_id"])
            else:
                # AddRowsWithID on both tables: Tumult joins on the ID without
                # truncation (truncation strategies would be ignored, with a warning).
                base = base.join_private("people", join_columns=["uid"])
            base = (
                base.enforce(MaxGroupsPerID(key, max_groups))
                .enforce(MaxRowsPerGroupPerID(key, max_rows))
                .groupby(KeySet.from_dict({key: groups[which]}))
            )
            half = PureDPBudget(cmd["epsilon"] / 2)
            counts = session.evaluate(base.count(), half).toPandas()
            sums = session.evaluate(
                base.sum("duration", cmd["low"], cmd["high"]), half
            ).toPandas()
            elapsed = time.perf_counter() - begin
            out = {str(g): {"count": float(c)} for g, c in zip(counts[key], counts["count"])}
            for g, s in zip(sums[key], sums["duration_sum"]):
                out[str(g)]["sum"] = float(s)
            reply(seconds=elapsed, releases=out)
        elif cmd["op"] == "versions":
            import importlib.metadata as m
            names = ["tmlt.analytics", "tmlt.core", "pyspark", "pandas", "numpy"]
            reply(text=", ".join(f"{n} {m.version(n)}" for n in names)
                  + f", python {sys.version.split()[0]}")
"""


class TumultTimeout(Exception):
    pass


class Tumult(Contender):
    def __init__(self, data: Data, timeout: float) -> None:
        self.data = data
        self.timeout = timeout
        self.name = "tumult"
        self.guarantee = "ε-DP (pure), person"
        self.python = VENVS / "tumult" / "bin" / "python"
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._log = data.folder / "tumult-worker.log"

    def available(self) -> str:
        return "" if self.python.exists() else f"{self.python} not found (see the docstring)"

    def start(self) -> None:
        groups = {
            "public": [region_name(i) for i in range(REGIONS)],
            "private": list(AGE_GROUPS),
            "bounds": {
                "public": ["region", PUBLIC_GROUPS, PUBLIC_ROWS],
                "private": ["age_group", PRIVATE_GROUPS, PRIVATE_ROWS],
            },
        }
        args = [str(self.data.path(t)) for t in ("visits", "people", "regions")]
        log = self._log.open("w")
        self._proc = subprocess.Popen(
            [str(self.python), "-c", textwrap.dedent(_TUMULT_WORKER), *args, json.dumps(groups)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            start_new_session=True,  # its own process group: Spark's JVM goes with it
        )
        stdout = self._proc.stdout
        assert stdout is not None

        def pump() -> None:
            for line in stdout:
                if line.startswith("@@"):
                    self._lines.put(line[2:])
            self._lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        self.started_in = self._ask(None)["seconds"]

    def _ask(self, command: dict[str, Any] | None) -> dict[str, Any]:
        if self._proc is None:
            raise TumultTimeout("the worker is not running")
        if command is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(command) + "\n")
            self._proc.stdin.flush()
        try:
            line = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise TumultTimeout(f"no answer within {self.timeout:.0f} s") from None
        if line is None:
            self.close()
            tail = self._log.read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError("the Tumult worker died: " + " | ".join(tail))
        return json.loads(line)

    def session(self, epsilon: float) -> float:
        return float(self._ask({"op": "session", "epsilon": epsilon})["seconds"])

    def query(self, which: str, epsilon: float) -> tuple[float, Releases]:
        answer = self._ask(
            {"op": "query", "query": which, "epsilon": epsilon, "low": LOW, "high": HIGH}
        )
        return float(answer["seconds"]), answer["releases"]

    def versions(self) -> str:
        return str(self._ask({"op": "versions"})["text"])

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker's own group (start_new_session)
            proc.wait()


# --- running and reporting ---------------------------------------------------------------


@dataclass
class Record:
    """Everything measured for one contender at one size."""

    name: str
    guarantee: str
    started_in: float = math.nan
    session: list[float] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=lambda: {q: [] for q in QUERIES})
    releases: dict[str, list[Releases]] = field(default_factory=lambda: {q: [] for q in QUERIES})
    note: str = ""


def run_size(
    rows: int, contenders: list[Callable[[Data], Contender]], rounds: int, log: Callable[..., None]
) -> tuple[Data, list[Record], dict[str, Any]]:
    data = Data(rows)
    begin = time.perf_counter()
    make_data(data)
    log(f"\n== {rows:,} rows: data in {data.folder} ({time.perf_counter() - begin:.1f} s)")
    truth = exact_answers(data)
    made = [factory(data) for factory in contenders]
    records = [Record(c.name, c.guarantee) for c in made]
    extra: dict[str, Any] = {}
    for contender, record in zip(made, records, strict=True):
        missing = contender.available() if isinstance(contender, Tumult) else ""
        if missing:
            record.note = f"skipped: {missing}"
            log(f"{contender.name}: {record.note}")
            continue
        try:
            contender.start()
        except Exception as err:  # reported in the table
            record.note = f"failed to start: {err}"
            log(f"{contender.name}: {record.note}")
            continue
        record.started_in = contender.started_in
        log(f"{contender.name}: started in {contender.started_in:.1f} s")
        if isinstance(contender, Tumult):
            extra["tumult_versions"] = contender.versions()
    live = [(c, r) for c, r in zip(made, records, strict=True) if not r.note]
    for index in range(rounds):
        for contender, record in live:
            if record.note:
                continue
            try:
                record.session.append(contender.session(EPSILON * len(QUERIES)))
                if index == 0 and isinstance(contender, Dpkit) and contender.engine == "duckdb":
                    extra["explain"] = contender.explain(EPSILON)
                for which in QUERIES:
                    seconds, releases = contender.query(which, EPSILON)
                    record.times[which].append(seconds)
                    record.releases[which].append(releases)
            except TumultTimeout as err:
                record.note = f"stopped in round {index + 1}: {err}"
            except Exception as err:  # reported in the table
                record.note = f"failed in round {index + 1}: {type(err).__name__}: {err}"
            shown = ", ".join(
                f"{q} {record.times[q][-1]:.2f} s"
                for q in QUERIES
                if len(record.times[q]) == index + 1
            )
            log(
                f"round {index + 1}: {contender.name}: session "
                f"{record.session[-1] if record.session else math.nan:.2f} s, {shown}"
                + (f" [{record.note}]" if record.note else "")
            )
    for contender in made:
        contender.close()
    extra["truth"] = truth
    return data, records, extra


def error_stats(
    releases: list[Releases], truth: dict[str, dict[str, float]], stat: str
) -> tuple[float, float, float]:
    """(median relative error, median absolute error, median per-group sd across rounds)."""
    rel, absolute, spread = [], [], []
    for group, exact in truth.items():
        values = [r[group][stat] for r in releases if group in r]
        for value in values:
            absolute.append(abs(value - exact[stat]))
            rel.append(abs(value - exact[stat]) / abs(exact[stat]))
        if len(values) > 1:
            spread.append(statistics.stdev(values))
    if not rel:
        return math.nan, math.nan, math.nan
    sd = statistics.median(spread) if spread else math.nan
    return statistics.median(rel), statistics.median(absolute), sd


def _fmt(value: float, digits: int = 3) -> str:
    return "" if math.isnan(value) else f"{value:.{digits}g}"


def tables(rows: int, records: list[Record], truth: dict[str, Any], rounds: int) -> list[str]:
    base = next((r for r in records if r.name == "dpkit duckdb"), None)

    def median(values: list[float]) -> float:
        return statistics.median(values) if values else math.nan

    out = [
        f"### {rows:,} rows",
        "",
        "Time (median over rounds; `×` = time ÷ dpkit DuckDB's for the same step):",
        "",
        "| case | start (once) s | Session s | public join s | × | private join s | × | "
        "rounds | note |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in records:
        cells = [r.name, _fmt(r.started_in), _fmt(median(r.session))]
        for q in QUERIES:
            t = median(r.times[q])
            ratio = t / median(base.times[q]) if base and base.times[q] else math.nan
            cells += [_fmt(t), _fmt(ratio)]
        cells += [str(len(r.times["private"])), r.note]
        out.append("| " + " | ".join(cells) + " |")
    out += [
        "",
        f"Error against the exact unbounded, unclamped answer (over groups × {rounds} "
        "round(s); noise sd: median over groups of the releases' standard deviation "
        "across rounds):",
        "",
        "| query | statistic | case | median relative error | median absolute error | noise sd |",
        "|---|---|---|---:|---:|---:|",
    ]
    for q in QUERIES:
        for stat in STATS:
            for r in records:
                if not r.releases[q]:
                    continue
                rel, ab, sd = error_stats(r.releases[q], truth[q], stat)
                out.append(
                    f"| {q} join | {stat} | {r.name} | {rel:.4f} | {_fmt(ab)} | {_fmt(sd)} |"
                )
    return out


def machine_load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (repetitions) per size")
    parser.add_argument(
        "--large-rounds", type=int, default=2, help="rounds at sizes above 10^6 (Tumult is slow)"
    )
    parser.add_argument(
        "--spark", action="store_true", help="also dpkit on Spark (at sizes up to 10^6)"
    )
    parser.add_argument("--no-tumult", action="store_true", help="dpkit only")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for one Tumult step")
    parser.add_argument("--quick", action="store_true", help="10^5 rows, 1 round, no file")
    parser.add_argument("--no-write", action="store_true", help="do not write the results")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.rounds, args.no_write = [100_000], 1, True

    def log(*parts: object) -> None:
        print(*parts, flush=True)

    load_before = machine_load()
    log(f"load: {load_before}")
    sections: list[str] = []
    explain = ""
    tumult_versions = ""
    for rows in args.rows:
        factories: list[Callable[[Data], Contender]] = [lambda d: Dpkit(d, "duckdb")]
        if args.spark and rows <= 1_000_000:
            factories.append(lambda d: Dpkit(d, "spark"))
        if not args.no_tumult:
            factories.append(lambda d: Tumult(d, args.timeout))
        rounds = args.rounds if rows <= 1_000_000 else min(args.rounds, args.large_rounds)
        _, records, extra = run_size(rows, factories, rounds, log)
        explain = explain or extra.get("explain", "")
        tumult_versions = tumult_versions or extra.get("tumult_versions", "")
        section = tables(rows, records, extra["truth"], rounds)
        log("\n" + "\n".join(section))
        sections += [*section, ""]
    load_after = machine_load()

    import dpkit

    runner = ", ".join(
        f"{m.__name__} {m.__version__}"
        for m in (__import__("duckdb"), __import__("pyarrow"), __import__("numpy"))
    )
    header = [
        "# Joins: dpkit against Tumult Analytics (issue 29)",
        "",
        f"{datetime.now(tz=UTC):%Y-%m-%d %H:%M} UTC; {platform.platform()}; "
        f"{os.cpu_count()} CPUs. Produced by `python benchmarks/joins_vs_tumult.py "
        + " ".join(sys.argv[1:])
        + "`.",
        "",
        f"Load: before `{load_before}`; after `{load_after}`.",
        "",
        f"Workload (see the script's docstring): `visits` of N rows (N/10 persons, "
        f"heavy-tailed), `people` (one row per person, {len(AGE_GROUPS)} age groups), public "
        f"`regions` ({REGION_IDS} ids in {REGIONS} regions, {len(DUPLICATED)} ids twice). "
        f"Each query: ε = {EPSILON:g} (pure DP), half for the count, half for the sum of "
        f"`duration` clamped to [{LOW}, {HIGH}]. Public join: ≤ {PUBLIC_GROUPS} regions and "
        f"≤ {PUBLIC_ROWS} rows per region per person; private join: ≤ {PRIVATE_GROUPS} "
        f"age group and ≤ {PRIVATE_ROWS} rows per person (dpkit `truncate=1` on `people`; "
        "Tumult joins ID tables without truncation). Bounds after the join in both. "
        "Interleaved rounds (the count per size is in its table); each round a new "
        "Session per case. "
        "Tumult's count and sum are two `evaluate` calls (its query time is both); "
        "dpkit's one.",
        "",
        *sections,
        "Versions:",
        "",
        f"- dpkit {getattr(dpkit, '__version__', '?')}; runner: {runner}",
        f"- tumult venv: {tumult_versions or 'not run'}",
        "",
    ]
    if explain:
        header += [
            "dpkit's `explain` of the two queries (10^6-row data or the first size):",
            "",
            "```text",
            explain,
            "```",
            "",
        ]
    text = "\n".join(header)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text, encoding="utf-8")
        log(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
