"""Rows left on disk by a killed process: the attacker reads the temporary folder.

A Session copies the curator's rows into a DuckDB database in a private folder
(``dpkit.analytics._sources.private_database``). The promise (its module docstring): on
POSIX the copy lasts no longer than the process, even a killed one -- the database file
is unlinked as soon as it is written. An attacker with access to the machine's
temporary folder (another job of the same user, a core dump collector, a backup of
/tmp) waits for the analyst's process to be killed (OOM killer, a timeout, Ctrl-\\) and
reads what is left.

Found in /tmp on the development machine: DuckDB's write-ahead log, a second file
(``data.duckdb.wal``) which DuckDB names beside the database and which holds every
table written since the last checkpoint -- all of a table smaller than 16 MB of log.
``from_tables`` of DataFrames and copied Parquet files left the rows in it in plain
text. Each case below opens a Session the way a user would, runs one query, and is
killed with SIGKILL; nothing the Session wrote may still hold a row.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    os.name != "posix", reason="an open file can be unlinked on POSIX only"
)

#: A value in every row, which the attacker greps for in what the killed process left.
MARKER = "ALICESECRET"

_PRELUDE = f"""
import os, signal, duckdb, pandas as pd
import dpkit as dp
from dpkit.analytics import Query, Session

frame = pd.DataFrame({{
    "person": ["{MARKER}" + str(i) for i in range(300)],
    "amount": [float(i) for i in range(300)],
    "region": ["{MARKER}-r" + str(i % 3) for i in range(300)],
}})
regions = pd.DataFrame({{"region": ["{MARKER}-r" + str(i) for i in range(3)]}})
frame.to_csv("data.csv", index=False)
frame.to_parquet("data.parquet")
regions.to_parquet("regions.parquet")
budget = dp.PureDP(1.0)
"""

#: How each Session is opened: every way rows are copied into the private database.
OPENERS = {
    "csv file": 'Session.from_path("data.csv", privacy_unit="person", budget=budget)',
    "parquet file": 'Session.from_path("data.parquet", privacy_unit="person", budget=budget)',
    "tables of DataFrames": (
        'Session.from_tables({"t": frame}, privacy_unit="person", '
        'public={"regions": regions}, budget=budget)'
    ),
    "tables of files (a public Parquet copied)": (
        'Session.from_tables({"t": "data.parquet"}, privacy_unit="person", '
        'public={"regions": "regions.parquet"}, budget=budget)'
    ),
    "a DuckDB table": (
        'Session.from_duckdb(duckdb_source(), "t", privacy_unit="person", budget=budget)'
    ),
    "DuckDB tables": (
        'Session.from_duckdb(duckdb_source(), ["t"], privacy_unit="person", '
        'public=["regions"], budget=budget)'
    ),
}

_SOURCE = """
def duckdb_source():
    connection = duckdb.connect()
    connection.register("f", frame)
    connection.register("r", regions)
    connection.execute("CREATE TABLE t AS SELECT * FROM f")
    connection.execute("CREATE TABLE regions AS SELECT * FROM r")
    return connection
"""


def _killed_after_opening(opener: str, work: Path, temporary: Path) -> None:
    """Run a process that opens a Session with ``opener``, runs a query, and SIGKILLs
    itself; its temporary folder is ``temporary``."""
    script = (
        textwrap.dedent(_PRELUDE)
        + textwrap.dedent(_SOURCE)
        + textwrap.dedent(f"""
        session = {opener}
        session.evaluate(Query().bound(max_rows=1).count(), budget=dp.PureDP(0.1))
        print("opened", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    )
    environment = {**os.environ, "TMPDIR": str(temporary)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=work,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "opened" in done.stdout, done.stderr
    assert done.returncode == -9, (done.returncode, done.stderr)


@pytest.mark.parametrize("case", sorted(OPENERS))
def test_a_killed_session_leaves_no_row_in_the_temporary_folder(case: str, tmp_path: Path) -> None:
    work, temporary = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    temporary.mkdir()
    _killed_after_opening(OPENERS[case], work, temporary)

    # The attacker's view: every file the killed process left in the temporary folder.
    left = [p for p in temporary.rglob("*") if p.is_file()]
    holding_rows = [p.name for p in left if MARKER.encode() in p.read_bytes()]
    assert holding_rows == [], f"{case}: rows left in {holding_rows}"
    # Stronger than the marker (DuckDB may compress it): no file at all, only the empty
    # private folder, if the Session made one (removed at a normal exit, which SIGKILL
    # skips; a DuckDB base table is read in place, without one).
    assert [p.relative_to(temporary).as_posix() for p in left] == []
    assert all(p.name.startswith("dpkit-") for p in temporary.iterdir())
