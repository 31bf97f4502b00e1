"""An attacker's view of reading files: rows that make the engine fail, or talk.

The threat model (DESIGN.md, "Threat model of the Session"): the analyst is trusted
with the schema and public parameters, never with row values. The attack: whoever can
put one row in the data (a form field, a log line) writes a value DuckDB cannot parse,
placed past the 20,480 rows its CSV sniffer samples, with a secret next to it. Before
the fix, ``Session.from_path`` kept a view of ``read_csv`` with sniffed types, so the
first query reaching that line failed -- after earlier queries of ``dpkit describe``
had spent two thirds of the budget -- and DuckDB's message printed the whole line
(``Original Line: ...``), secret included. Whether a query fails then tells the
analyst that such a row exists (neighbouring datasets answer differently), and the
message hands over a row outright.

Every test below writes real files and reads them through the public API, capturing
what is printed, logged and raised. Noisy counts are compared with tolerances whose
false-failure probability is stated (discrete Laplace: P(|X| >= k) = 2 e^(-eps k) /
(1 + e^(-eps))); the generators are seeded, so the runs are deterministic anyway.

On the code before the fix (commit 3d1b02b) every test here fails but two cases of
(c): (a), (b) and (d) because a query or the CLI raised with the marker in its message,
(e) and the in-sample cases of (c) because ``schema=`` did not exist, the other cases of
(c) -- past the sample -- because DuckDB raised on the line, except a NUL byte and an
unterminated quote in a file whose sample has no quote (DuckDB then reads no quote
character), which it read without error even then; the ``from_pandas`` test because
DuckDB's "Could not convert string '...'" was in the DataError, and the truncated
Parquet file raised an EngineError carrying DuckDB's message instead of a DataError.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.cli.main import app
from dpkit.errors import DataError, InvalidParameter

MARKER = "SECRET-MARKER-7f3a"
CITIES = ("north", "south", "east")
#: Rows before the planted lines: well past DuckDB's sniffer sample (20,480 rows).
PAST_SAMPLE = 60_000
#: Planted lines, so that "counted as missing" and "dropped" differ by more than the
#: noise tolerances below.
PLANTED = 50

runner = CliRunner()


def write_csv(
    path: Path,
    bad: Sequence[bytes] = (),
    *,
    before: int = PAST_SAMPLE,
    after: int = 100,
    quoted: bool = False,
) -> Path:
    """``person,age,city`` rows with the ``bad`` lines after the first ``before``."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def row(i: int) -> bytes:
        city = f'"{CITIES[i % 3]}"' if quoted else CITIES[i % 3]
        return f"{i},{20 + i % 50},{city}".encode()

    lines = [b"person,age,city"]
    lines += [row(i) for i in range(before)]
    lines += list(bad)
    lines += [row(i) for i in range(before, before + after)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def oops_lines(count: int = PLANTED) -> list[bytes]:
    """Lines whose ``age`` is not an integer, each carrying the marker."""
    return [f"{90_000 + i},oops {MARKER},north".encode() for i in range(count)]


def assert_silent(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    out, err = capsys.readouterr()
    assert MARKER not in out and MARKER not in err
    assert MARKER not in caplog.text


def value(result: dp.analytics.QueryResult, column: str) -> float:
    return float(result.dataframe[column].iloc[0])


# ---------------------------------------------------------------------------- (a)
def test_a_value_past_the_sniff_sample_counts_as_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    total = PAST_SAMPLE + PLANTED + 100
    path = write_csv(tmp_path / "visits.csv", oops_lines())
    session = dp.Session.from_path(path, budget=dp.PureDP(10.0), rng=1)

    count = session.evaluate(Query().count(), budget=dp.PureDP(1.0))
    mean = session.evaluate(Query().mean("age", bounds=(0.0, 100.0)), budget=dp.PureDP(2.0))
    missing = session.evaluate(Query().filter("age IS NULL").count(), budget=dp.PureDP(5.0))
    by_city = session.evaluate(
        Query().group_by("city", keys=KeySet.from_values(city=list(CITIES))).count(),
        budget=dp.PureDP(1.0),
    )

    # The planted rows are kept (count() counts rows whatever their values) and their
    # age is NULL. Tolerances: eps = 1, k = 15 -> 4.5e-7; eps = 5, k = 3 -> 6.1e-7.
    assert abs(value(count, "count") - total) < 15
    assert abs(value(missing, "count") - PLANTED) < 3
    assert 20.0 <= value(mean, "mean_age") <= 70.0
    assert len(by_city.dataframe) == 3
    assert session.remaining == dp.PureDP(1.0)
    assert_silent(capsys, caplog)


# ---------------------------------------------------------------------------- (b)
def test_b_describe_spends_its_whole_budget_and_prints_no_row(tmp_path: Path) -> None:
    total = PAST_SAMPLE + PLANTED + 100
    path = write_csv(tmp_path / "visits.csv", oops_lines())
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "summary.json"
    args = ["describe", str(path), "--epsilon", "2", "--seed", "3"]
    result = runner.invoke(app, [*args, "--ledger", str(ledger), "--json", str(out)])

    assert result.exit_code == 0, result.output
    assert MARKER not in result.output
    assert "Original Line" not in result.output
    payload = out.read_text()
    assert MARKER not in payload
    summary = json.loads(payload)
    assert {c["name"]: c["kind"] for c in summary["columns"]}["age"] == "numeric"
    assert math.isclose(sum(s["fraction"] for s in summary["budget_split"]), 1.0)
    # The rows are counted with eps = 2/3 of the total: k = 21 -> 8e-7.
    assert abs(summary["rows_estimate"]["estimate"] - total) < 21
    # The ledger agrees: everything was spent, nothing more can be.
    budget = dp.ApproxDP(2.0, 1e-6)
    remaining = dp.Session.from_path(path, budget=budget, ledger=ledger).remaining
    assert isinstance(remaining, dp.ZCDP) and remaining.rho <= 1e-9


def test_b_describe_with_a_schema_option(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "visits.csv", oops_lines(), before=100)  # in the sample
    args = ["describe", str(path), "--epsilon", "2", "--seed", "3", "--schema", "age=BIGINT"]
    out = tmp_path / "summary.json"
    result = runner.invoke(app, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert MARKER not in result.output
    kinds = {c["name"]: c["kind"] for c in json.loads(out.read_text())["columns"]}
    assert kinds["age"] == "numeric"


@pytest.mark.parametrize(
    ("schema", "message"),
    [("age", "COLUMN=TYPE"), ("age=NOPE", "'NOPE'"), ("nope=BIGINT", "Available columns")],
    ids=["no-type", "bad-type", "unknown-column"],
)
def test_b_describe_rejects_a_bad_schema_option(tmp_path: Path, schema: str, message: str) -> None:
    path = write_csv(tmp_path / "visits.csv", before=50, after=0)
    result = runner.invoke(app, ["describe", str(path), "--schema", schema])
    assert result.exit_code == 2, result.output
    assert message in result.output


# ---------------------------------------------------------------------------- (c)
MALFORMED = {
    "too-many-fields": f"60000,30,north,{MARKER},more".encode(),
    "too-few-fields": MARKER.encode(),
    "unterminated-quote": f'60000,30,"{MARKER}'.encode(),
    "invalid-utf8": f"60000,30,{MARKER}".encode() + b"\xff\xfe",
    "nul-byte": f"60000,30,{MARKER}".encode() + b"\x00",
    "stray-cr": f"60000,30,{MARKER}\r".encode(),
    "lone-quote-field": f'60000,"30,{MARKER}'.encode(),
}


TYPES = {"person": "BIGINT", "age": "BIGINT", "city": "VARCHAR"}


@pytest.mark.parametrize("quoted", [False, True], ids=["plain", "quoted"])
@pytest.mark.parametrize(
    ("before", "schema"),
    [(PAST_SAMPLE, None), (100, TYPES)],
    # In the sniffer's sample a line can change the sniffed types (documented; a
    # "30 makes age VARCHAR): schema= is the remedy, and with it nothing can fail.
    ids=["past-sample", "in-sample-with-schema"],
)
@pytest.mark.parametrize("kind", list(MALFORMED))
def test_c_malformed_lines_never_raise_or_show(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    kind: str,
    before: int,
    schema: dict[str, str] | None,
    quoted: bool,
) -> None:
    path = write_csv(tmp_path / "visits.csv", [MALFORMED[kind]], before=before, quoted=quoted)
    if kind == "invalid-utf8" and before < PAST_SAMPLE:
        # In the file's first 64 KiB, a byte that is not UTF-8 refuses the file at
        # creation, before anything is spent (tests/adversarial/test_csv_encoding.py).
        with pytest.raises(DataError, match="--encoding latin-1") as refused:
            dp.Session.from_path(path, budget=dp.PureDP(4.0), rng=2, schema=schema)
        assert MARKER not in str(refused.value)
        assert_silent(capsys, caplog)
        return
    if schema is None:  # as the code before the fix could be called
        session = dp.Session.from_path(path, budget=dp.PureDP(4.0), rng=2)
    else:
        session = dp.Session.from_path(path, budget=dp.PureDP(4.0), rng=2, schema=schema)
    count = session.evaluate(Query().count(), budget=dp.PureDP(1.0))
    session.evaluate(Query().mean("age", bounds=(0.0, 100.0)), budget=dp.PureDP(1.0))
    session.evaluate(
        Query().group_by("city", keys=KeySet.from_values(city=list(CITIES))).count(),
        budget=dp.PureDP(1.0),
    )
    # The line is kept or skipped, and an unterminated quote may swallow the 100 rows
    # after it; nothing else changes (eps = 1, k = 15 -> 4.5e-7).
    assert abs(value(count, "count") - (before + 100)) < 15 + 101
    assert_silent(capsys, caplog)


def test_c_an_overlong_line_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    line = f"60000,30,{MARKER}".encode() + b"x" * 3_000_000  # past max_line_size (2 MB)
    path = write_csv(tmp_path / "visits.csv", [line])
    session = dp.Session.from_path(path, budget=dp.PureDP(2.0), rng=2)
    count = session.evaluate(Query().count(), budget=dp.PureDP(1.0))
    session.evaluate(Query().mean("age", bounds=(0.0, 100.0)), budget=dp.PureDP(1.0))
    assert abs(value(count, "count") - (PAST_SAMPLE + 100)) < 15
    assert_silent(capsys, caplog)


# ---------------------------------------------------------------------------- (d)
def outcomes(session: dp.Session) -> list[str]:
    """What each query of a fixed loop does: 'ok', or the error's class and text."""
    keys = KeySet.from_values(city=list(CITIES))
    queries: list[Callable[[], Query]] = [
        lambda: Query().count(),
        lambda: Query().mean("age", bounds=(0.0, 100.0)),
        lambda: Query().sum("age", bounds=(0.0, 100.0)),
        lambda: Query().filter("age > 40").count(),
        lambda: Query().filter("CAST(age AS VARCHAR) = 'x'").count(),
        lambda: Query().group_by("city", keys=keys).mean("age", bounds=(0.0, 100.0)),
        lambda: Query().median("age", bounds=(0.0, 100.0)),
        lambda: Query().mean("city", bounds=(0.0, 100.0)),  # a string column: refused
        lambda: Query().mean("nope", bounds=(0.0, 100.0)),  # no such column: refused
        lambda: Query().filter("(SELECT 1) = 1").count(),  # a subquery: refused
        lambda: Query().mean("age", bounds=(100.0, 0.0)),  # empty bounds: refused
    ]
    seen = []
    for build in queries:
        try:
            session.evaluate(build(), budget=dp.PureDP(0.5))
            seen.append("ok")
        except dp.errors.DPError as err:
            seen.append(f"{type(err).__name__}: {err}")
    return seen


@pytest.mark.parametrize(
    "line",
    [
        f"60000,oops {MARKER},north".encode(),
        f"60000,30,north,{MARKER}".encode(),
        f"60000,30,{MARKER}".encode() + b"\xff",
        MARKER.encode(),
    ],
    ids=["cast", "too-many-fields", "invalid-utf8", "too-few-fields"],
)
def test_d_neighbours_succeed_and_fail_alike(tmp_path: Path, line: bytes) -> None:
    # Same file name in two folders, so no message can differ by the path.
    base = write_csv(tmp_path / "base" / "visits.csv")
    neighbour = write_csv(tmp_path / "neighbour" / "visits.csv", [line])
    seen = [
        outcomes(dp.Session.from_path(path, budget=dp.PureDP(10.0), rng=4))
        for path in (base, neighbour)
    ]
    assert seen[0] == seen[1]
    assert seen[0][:7] == ["ok"] * 7
    assert all(MARKER not in text for text in seen[1])


# ---------------------------------------------------------------------------- (e)
def test_e_schema_fixes_a_type_the_sample_would_change(tmp_path: Path) -> None:
    # Inside the sample, the planted values make the sniffer call age VARCHAR.
    path = write_csv(tmp_path / "visits.csv", oops_lines(), before=100)
    sniffed = dp.Session.from_path(path, budget=dp.PureDP(1.0))
    with pytest.raises(dp.errors.DPError) as refused:
        sniffed.evaluate(Query().mean("age", bounds=(0.0, 100.0)), budget=dp.PureDP(1.0))
    assert MARKER not in str(refused.value)

    session = dp.Session.from_path(path, budget=dp.PureDP(6.0), rng=5, schema={"age": "BIGINT"})
    missing = session.evaluate(Query().filter("age IS NULL").count(), budget=dp.PureDP(5.0))
    mean = session.evaluate(Query().mean("age", bounds=(0.0, 100.0)), budget=dp.PureDP(1.0))
    assert abs(value(missing, "count") - PLANTED) < 3  # eps = 5, k = 3 -> 6.1e-7
    assert 20.0 <= value(mean, "mean_age") <= 70.0


@pytest.mark.parametrize(
    "schema",
    [
        {"age": "NOPE"},
        {"age": "BIGINT); DROP TABLE x; --"},
        {"age": "INTEGER[]"},
        {"age": 5},
        [("age", "BIGINT")],
        "age=BIGINT",
    ],
    ids=["unknown-type", "injection", "nested-type", "not-a-string", "not-a-mapping", "str"],
)
def test_e_a_bad_schema_is_refused_before_the_file_is_touched(
    tmp_path: Path, schema: object
) -> None:
    # The path does not exist: the schema is checked first, so the error is about it.
    with pytest.raises(InvalidParameter, match="'schema'"):
        dp.Session.from_path(
            tmp_path / "absent.csv",
            budget=dp.PureDP(1.0),
            schema=schema,  # type: ignore[arg-type]
        )


def test_e_a_schema_column_must_exist(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "visits.csv", oops_lines(), before=100)
    with pytest.raises(DataError, match="Available columns") as refused:
        dp.Session.from_path(path, budget=dp.PureDP(1.0), schema={"Age": "BIGINT"})
    assert MARKER not in str(refused.value)


def test_e_schema_types_are_canonical_and_kept(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "visits.csv", before=50, after=0)
    session = dp.Session.from_path(
        path, budget=dp.PureDP(1.0), schema={"age": "decimal(5,1)", "person": "int"}
    )
    result = session.evaluate(Query().mean("age", bounds=(0.0, 100.0)), budget=dp.PureDP(1.0))
    assert 0.0 <= value(result, "mean_age") <= 100.0


# ----------------------------------------------------------------- other sources
def test_from_pandas_error_names_the_class_only() -> None:
    import uuid

    # DuckDB infers UUID from the first values, then fails on the string, quoting it.
    column = pd.Series([uuid.UUID(int=i) for i in range(3000)] + [MARKER], dtype=object)
    with pytest.raises(DataError) as refused:
        dp.Session.from_pandas(pd.DataFrame({"a": column}), budget=dp.PureDP(1.0))
    assert MARKER not in str(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_a_truncated_parquet_file_fails_at_creation_by_class(tmp_path: Path) -> None:
    path = tmp_path / "visits.parquet"
    pd.DataFrame({"city": [f"{MARKER}-{i}" for i in range(1000)]}).to_parquet(path)
    path.write_bytes(path.read_bytes()[:-100])  # the footer is gone
    with pytest.raises(DataError, match=r"visits\.parquet") as refused:
        dp.Session.from_path(path, budget=dp.PureDP(1.0))
    text = str(refused.value)
    assert MARKER not in text and "magic" not in text.lower()
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
