"""``dpkit sql``: GoogleSQL's ``SELECT WITH DIFFERENTIAL_PRIVACY`` over files.

    dpkit sql --table visits=visits.parquet:uid --public regions=regions.csv \\
        --ledger budget.db --budget 1.0 "SELECT WITH DIFFERENTIAL_PRIVACY ..."

prints the released table (or writes ``--json``/``--csv``); ``--dry-run`` (or a
statement starting with ``EXPLAIN``) shows the plan, the noise and the accuracy and
spends nothing. Without a statement it reads statements from standard input, one per
``;`` (an interactive prompt on a terminal). The dialect is in docs/sql.md.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dpkit.cli._output import Output, check_writable
from dpkit.errors import DPError, InsecureRandomWarning, InvalidParameter

if TYPE_CHECKING:
    from dpkit.analytics.session import Session

__all__ = ["sql_command"]


def _tables(items: list[str], public: bool) -> dict[str, tuple[Path, str | None]]:
    """``NAME=PATH[:UNIT]`` options -> {name: (path, unit)}; checked before reading."""
    out: dict[str, tuple[Path, str | None]] = {}
    option = "--public" if public else "--table"
    for item in items:
        name, sep, rest = item.partition("=")
        if not sep or not name.strip() or not rest.strip():
            raise InvalidParameter(
                f"{option} takes NAME=PATH{'' if public else '[:UNIT]'}. Got {item!r}."
            )
        path, unit = rest, None
        head, colon, tail = rest.rpartition(":")
        if colon and tail.isidentifier() and not Path(rest).exists():
            path, unit = head, tail
        if public and unit is not None:
            raise InvalidParameter(f"{option} {item!r}: a public table has no privacy unit.")
        if name.strip() in out:
            raise InvalidParameter(f"{option}: the table {name.strip()!r} is given twice.")
        out[name.strip()] = (Path(path), unit)
    return out


def open_tables(
    private: dict[str, tuple[Path, str | None]],
    public: dict[str, tuple[Path, str | None]],
    *,
    budget: Any,
    ledger: Path | None,
    seed: int | None,
    engine: str,
) -> Session:
    """A Session over the tables: one file without public tables is a single-table
    Session (its unit optional); otherwise every private table names its unit."""
    from dpkit.analytics.session import Session

    for name, (path, _) in {**private, **public}.items():
        if not path.is_file():
            raise InvalidParameter(f"No file at {str(path)!r} (table {name!r}).")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomWarning)
        if len(private) == 1 and not public:
            path, unit = next(iter(private.values()))
            return Session.from_path(
                path, privacy_unit=unit, budget=budget, ledger=ledger, rng=seed, engine=engine
            )
        missing = [n for n, (_, u) in private.items() if u is None]
        if missing:
            raise InvalidParameter(
                f"--table {missing[0]}=PATH:UNIT: with several tables every private table "
                "names its privacy unit column."
            )
        return Session.from_tables(
            {n: p for n, (p, _) in private.items()},
            privacy_unit={n: str(u) for n, (_, u) in private.items()},
            public={n: p for n, (p, _) in public.items()},
            budget=budget,
            ledger=ledger,
            rng=seed,
            engine=engine,
        )


def _statements(text: str) -> list[str]:
    """Split on ``;`` outside quotes (SQLGlot's tokenizer knows the quoting rules)."""
    from sqlglot.dialects.bigquery import BigQuery

    try:
        tokens = BigQuery().tokenize(text)
    except Exception:
        return [text]
    out, start = [], 0
    for token in tokens:
        if token.text == ";":
            out.append(text[start : token.start])
            start = token.end + 1
    out.append(text[start:])
    return [s for s in out if s.strip()]


def _run(session: Session, statement: str, output: Output, dry_run: bool, csv: str | None) -> None:
    import pandas as pd  # type: ignore[import-untyped]

    from dpkit.analytics._release import Explanation

    if dry_run:
        result: Any = session.explain_sql(statement)
    else:
        result = session.sql(statement)
    if isinstance(result, Explanation):
        output.note(str(result))
        output.write_json(json.dumps({"explain": str(result)}))
        return
    frame = result if isinstance(result, pd.DataFrame) else result.dataframe
    if csv is not None:
        if csv == "-":
            typer.echo(frame.to_csv(index=False), nl=False)
        else:
            frame.to_csv(csv, index=False)
            output.note(f"CSV written to {csv}")
    elif not output.json_to_stdout:
        output.out.print(frame.to_string(index=False), highlight=False, markup=False)
    if output.json_target is not None:
        payload: dict[str, Any] = {"rows": json.loads(frame.to_json(orient="records"))}
        if not isinstance(result, pd.DataFrame):
            payload["notes"] = list(result.notes)
            payload["spent"] = repr(session.spent)
        output.write_json(json.dumps(payload))
    if not isinstance(result, pd.DataFrame):
        for note in result.notes:
            output.err.print(note, highlight=False, markup=False)
        output.err.print(f"Spent so far: {session.spent!r}", highlight=False, markup=False)


def sql_command(
    statement: Annotated[
        str | None,
        typer.Argument(help="The statement; '-' or none: read statements from standard input."),
    ] = None,
    table: Annotated[
        list[str] | None,
        typer.Option(help="A private table NAME=PATH:UNIT (repeatable).", metavar="SPEC"),
    ] = None,
    public: Annotated[
        list[str] | None,
        typer.Option(help="A public table NAME=PATH (repeatable).", metavar="SPEC"),
    ] = None,
    budget: Annotated[
        float | None, typer.Option(help="The Session's total epsilon (default 1.0).")
    ] = None,
    delta: Annotated[float, typer.Option(help="The Session's total delta (0: pure DP).")] = 0.0,
    rho: Annotated[float | None, typer.Option(help="A zCDP budget instead.")] = None,
    ledger: Annotated[
        Path | None, typer.Option(help="SQLite ledger file (persists the spent budget).")
    ] = None,
    engine: Annotated[str, typer.Option(help="duckdb (default) or spark.")] = "duckdb",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="EXPLAIN: the plan and its accuracy; spends nothing.")
    ] = False,
    json_out: Annotated[
        str | None,
        typer.Option("--json", metavar="PATH", help="Write JSON here; '-' for standard output."),
    ] = None,
    csv_out: Annotated[
        str | None,
        typer.Option("--csv", metavar="PATH", help="Write CSV here; '-' for standard output."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed: reproducible but NOT private output.")
    ] = None,
) -> None:
    """Run SELECT WITH DIFFERENTIAL_PRIVACY statements (GoogleSQL's syntax) over files.

    Every option and the statement are checked before anything is spent; a refused
    statement exits with code 2 naming its line and column.
    """
    from dpkit.cli.describe import budget_from_options

    output = Output(json_out)
    try:
        if engine not in ("duckdb", "spark"):
            raise InvalidParameter(f"--engine must be 'duckdb' or 'spark'. Got {engine!r}.")
        if json_out is not None and csv_out is not None and "-" in (json_out, csv_out):
            raise InvalidParameter("--json - and --csv cannot share standard output.")
        private = _tables(table or [], public=False)
        public_tables = _tables(public or [], public=True)
        if not private:
            raise InvalidParameter("Give at least one private table: --table NAME=PATH:UNIT.")
        check_writable(None if json_out in (None, "-") else Path(str(json_out)), "--json")
        check_writable(None if csv_out in (None, "-") else Path(str(csv_out)), "--csv")
        session = open_tables(
            private,
            public_tables,
            budget=budget_from_options(budget, delta, rho),
            ledger=ledger,
            seed=seed,
            engine=engine,
        )
        if statement not in (None, "-"):
            _run(session, str(statement), output, dry_run, csv_out)
            return
        interactive = sys.stdin.isatty()
        if not interactive:
            for text in _statements(sys.stdin.read()):
                _run(session, text, output, dry_run, csv_out)
            return
        _prompt(session, output, dry_run, csv_out)
    except DPError as err:
        output.fail(err)


def _prompt(session: Session, output: Output, dry_run: bool, csv: str | None) -> None:
    """An interactive prompt: statements end with ';'; an empty line on an empty
    statement, or end of input, quits. A refused statement is reported and the prompt
    goes on (nothing was spent)."""
    output.err.print(
        f"dpkit sql: tables {sorted(session.tables) or ['(one table)']}; "
        f"budget {session.budget!r}. End statements with ';'. Ctrl-D quits.",
        highlight=False,
        markup=False,
    )
    buffer = ""
    while True:
        try:
            line = input("dpkit> " if not buffer else "   ...> ")
        except EOFError:
            return
        buffer += line + "\n"
        if ";" not in line:
            continue
        for text in _statements(buffer):
            try:
                _run(session, text, output, dry_run, csv)
            except DPError as err:
                output.err.print(f"error: {err}", highlight=False, markup=False)
        buffer = ""
