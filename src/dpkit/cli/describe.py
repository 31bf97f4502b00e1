"""``dpkit describe DATA``: a private summary of every column of a table, with a report.

The main job of the command line. It opens a :class:`~dpkit.Session` on a CSV or
Parquet file (a CSV is copied once into a private DuckDB table, with the ``--encoding``,
``--delimiter`` and ``--na-values`` given, see :mod:`dpkit.analytics._sources`), spends
the given budget on the plan of :func:`dpkit.analytics.describe.describe`, prints the
summary as a terminal table and, on request, writes a self-contained HTML report (inline
SVG plots) and JSON. ``--dry-run`` prints the plan, budget split and
expected accuracy instead, and spends nothing. Every option is checked before the file
is read; errors exit with code 2 and spend nothing (stream and JSON conventions:
:mod:`dpkit.cli._output`). No message of the engine is printed: DuckDB's can quote rows.
``--types`` fixes column types that would otherwise be sniffed from the file.

Help texts are plain text: Typer prints the command's docstring and the options' help
as they are, so they hold no reStructuredText.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dpkit.cli._output import Output, check_browser, check_writable, write_outputs
from dpkit.errors import DataError, DPError, InsecureRandomWarning, InvalidParameter

if TYPE_CHECKING:
    from dpkit.accounting.guarantees import Guarantee
    from dpkit.analytics._sources import CsvOptions
    from dpkit.analytics.session import Session
    from dpkit.report.model import DatasetSummary

__all__ = [
    "budget_from_options",
    "describe_command",
    "open_session",
    "schema_from_options",
    "select_columns",
    "summarise",
    "write_outputs",
]


def budget_from_options(epsilon: float | None, delta: float, rho: float | None) -> Guarantee:
    """The Session budget the options ask for: ``--rho`` gives zCDP, else (epsilon, delta)."""
    from dpkit.accounting.guarantees import ZCDP, ApproxDP, PureDP

    if rho is not None:
        if epsilon is not None:
            raise InvalidParameter("Give either --rho (zCDP) or --epsilon/--delta, not both.")
        return ZCDP(rho)
    eps = 1.0 if epsilon is None else epsilon
    return PureDP(eps) if delta == 0.0 else ApproxDP(eps, delta)


def schema_from_options(items: list[str] | None) -> dict[str, str] | None:
    """Column types from ``--types COL=TYPE`` options (alias ``--schema``), checked
    (canonical DuckDB names) before the file is touched."""
    from dpkit.analytics._sources import check_schema

    if not items:
        return None
    schema: dict[str, str] = {}
    for item in items:
        column, sep, type_name = item.rpartition("=")
        if not sep or not column.strip() or not type_name.strip():
            raise InvalidParameter(f"--types takes COLUMN=TYPE (e.g. age=BIGINT). Got {item!r}.")
        schema[column.strip()] = type_name.strip()
    return check_schema(schema, "--types")


def open_session(
    data: Path,
    *,
    budget: Guarantee,
    privacy_unit: str | None,
    ledger: Path | None,
    seed: int | None,
    schema: Mapping[str, str] | None = None,
    csv: CsvOptions | None = None,
    engine: str = "duckdb",
) -> Session:
    """A Session over ``data``, as :meth:`~dpkit.Session.from_path` opens it, with the
    CSV reading options of the command line (the same ``source``, so a ledger written
    by one is resumed by the other)."""
    from dpkit.analytics._sources import open_file
    from dpkit.analytics.engines import DuckDBEngine, Engine
    from dpkit.analytics.session import Session

    if not data.is_file():
        raise InvalidParameter(f"No file at {str(data)!r}.")
    chosen: Engine
    if engine == "spark":
        from dpkit.analytics.engines.spark import SparkEngine, read_path, spark_session

        owner = "dpkit describe --engine spark"
        frame = read_path(spark_session(owner), str(data.resolve()), schema, owner, csv)
        chosen = SparkEngine(frame)
    else:
        opened = open_file(data, schema=schema, owner="dpkit describe", csv=csv)
        chosen = DuckDBEngine(opened.connection, opened.relation)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomWarning)
        return Session(
            chosen,
            source=f"file:{data.resolve()}",
            privacy_unit=privacy_unit,
            budget=budget,
            ledger=ledger,
            rng=seed,
        )


def select_columns(
    session: Session, columns: Sequence[str] | None, exclude: Sequence[str]
) -> list[str] | None:
    """The columns to summarise: ``--columns`` (default all) without ``--exclude``."""
    if not exclude:
        return list(columns) if columns is not None else None
    schema = session.columns
    unknown = [c for c in exclude if c not in schema]
    if unknown:
        raise DataError(
            f"--exclude names column(s) {unknown} that the table does not have. "
            f"Available columns: {sorted(schema)}."
        )
    wanted = list(columns) if columns is not None else list(schema)
    return [c for c in wanted if c not in set(exclude)]


def summarise(
    session: Session,
    *,
    columns: list[str] | None,
    max_rows: int | None,
    top: int,
    console: Console,
    source: str | None = None,
    weights: Mapping[str, float] | None = None,
    date_range: tuple[date, date] | None = None,
) -> DatasetSummary:
    """Run :func:`dpkit.analytics.describe.describe` on ``session``, with a progress bar
    on ``console`` when it is a terminal (one step per column)."""
    from dpkit.analytics.describe import describe, plan_describe

    plan = plan_describe(
        session, columns=columns, max_rows=max_rows, date_range=date_range, weights=weights
    )
    progress = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} columns"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        # Piped or redirected: no bar at all, not even its last frame.
        disable=not console.is_terminal,
    )
    # describe() reports "rows", then each column's name (and labels within a column).
    steps = ["rows", *(name for name, _ in plan.columns)]
    with progress, warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomWarning)
        task = progress.add_task("summarising", total=len(steps) - 1)
        done = 0

        def advance(label: str) -> None:
            nonlocal done
            if label in steps[done + 1 :]:
                done = steps.index(label, done + 1)
                progress.update(task, completed=done - 1)
            progress.update(task, description=f"summarising {label}")

        summary = describe(
            session,
            columns=columns,
            max_rows=max_rows,
            top=top,
            source=source,
            progress=advance,
            date_range=date_range,
            weights=weights,
        )
        progress.update(task, completed=len(steps) - 1)
    return summary


def describe_command(
    data: Annotated[Path, typer.Argument(help="A CSV (.csv, .csv.gz, .tsv) or Parquet file.")],
    epsilon: Annotated[
        float | None, typer.Option(help="Total epsilon (default 1.0 unless --rho).")
    ] = None,
    delta: Annotated[
        float, typer.Option(help="Total delta; 0 gives pure DP (no category selection).")
    ] = 1e-6,
    rho: Annotated[
        float | None, typer.Option(help="A zCDP budget instead of (epsilon, delta).")
    ] = None,
    privacy_unit: Annotated[
        str | None, typer.Option(help="Column identifying a person (default: one row each).")
    ] = None,
    columns: Annotated[
        str | None, typer.Option(help="Comma-separated columns to summarise (default: all).")
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(help="A column not to summarise (repeatable).", metavar="COL"),
    ] = None,
    max_rows: Annotated[
        int | None,
        typer.Option(
            help="Rows kept per person per query (default: chosen privately with 5% of "
            "the budget, about the 90th percentile of rows per person)."
        ),
    ] = None,
    assume_rows: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="With --dry-run: show what the plan would release at N rows (a number "
            "you state; nothing is read), and warn when the table is too small for it.",
        ),
    ] = None,
    top: Annotated[int, typer.Option(help="Categories shown per categorical column.")] = 10,
    weight: Annotated[
        list[str] | None,
        typer.Option(
            metavar="COL=W",
            help="A column's budget weight relative to the others' 1 (repeatable), e.g. "
            "income=4: its share is W over the sum of all weights (the row count's is 1).",
        ),
    ] = None,
    date_range: Annotated[
        str | None,
        typer.Option(
            metavar="START:END",
            help="Public range of the date columns' values, two ISO dates, e.g. "
            "2012-01-01:2016-01-01 (default 1900-01-01:2100-01-01).",
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="Query engine: duckdb (embedded, default) or spark (the active "
            "SparkSession, or local[*]; needs pip install 'dpkit[spark]' and Java 17)."
        ),
    ] = "duckdb",
    types: Annotated[
        list[str] | None,
        typer.Option(
            "--types",
            "--schema",
            metavar="COL=TYPE",
            help="A DuckDB type for a column instead of the one sniffed from the file "
            "(repeatable), e.g. age=BIGINT; values that do not parse count as missing. "
            "--schema is an alias.",
        ),
    ] = None,
    encoding: Annotated[
        str | None,
        typer.Option(help="CSV encoding: utf-8 (default), utf-16 or latin-1."),
    ] = None,
    delimiter: Annotated[
        str | None,
        typer.Option(help="CSV field separator, one character or 'tab' (default: sniffed)."),
    ] = None,
    na_values: Annotated[
        list[str] | None,
        typer.Option(
            metavar="TEXT",
            help="A CSV text read as missing, besides the empty field (repeatable), e.g. NA.",
        ),
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write an HTML report here.")] = None,
    json_out: Annotated[
        str | None,
        typer.Option("--json", metavar="PATH", help="Write JSON here; '-' for standard output."),
    ] = None,
    open_report: Annotated[
        bool, typer.Option("--open", help="Open the HTML report (--report) in a web browser.")
    ] = False,
    ledger: Annotated[
        Path | None, typer.Option(help="SQLite ledger file (persists the spent budget).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed: reproducible but NOT private output.")
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the plan (columns, budget split, expected accuracy); spend nothing.",
        ),
    ] = False,
) -> None:
    """Release a private summary of every column of DATA, with a report.

    Every option is checked before the file is read, and errors exit with code 2
    having spent nothing. With --json -, the JSON goes to standard output and nothing
    else does; errors are then JSON too.
    """
    from dpkit.analytics._sources import check_csv_options
    from dpkit.cli._options import date_range_from_option, weights_from_options

    output = Output(json_out)
    try:
        if engine not in ("duckdb", "spark"):
            raise InvalidParameter(f"--engine must be 'duckdb' or 'spark'. Got {engine!r}.")
        budget = budget_from_options(epsilon, delta, rho)
        schema = schema_from_options(types)
        weights = weights_from_options(weight)
        span = date_range_from_option(date_range)
        csv = check_csv_options(
            encoding=encoding, delimiter=delimiter, na_values=na_values, owner="dpkit describe"
        )
        if assume_rows is not None and (not dry_run or assume_rows < 1):
            raise InvalidParameter("--assume-rows takes an int >= 1 and goes with --dry-run.")
        check_writable(None if json_out is None else Path(json_out), "--json")
        if not dry_run:
            check_browser(open_report, report)
            check_writable(report, "--report")
        session = open_session(
            data,
            budget=budget,
            privacy_unit=privacy_unit,
            ledger=ledger,
            seed=seed,
            schema=schema,
            csv=csv,
            engine=engine,
        )
        wanted = [c.strip() for c in columns.split(",")] if columns else None
        chosen = select_columns(session, wanted, exclude or [])
        if dry_run:
            _dry_run(session, chosen, max_rows, output, weights, span, assume_rows)
            return
        summary = summarise(
            session,
            columns=chosen,
            max_rows=max_rows,
            top=top,
            console=output.err,
            source=data.name,
            weights=weights,
            date_range=span,
        )
    except DPError as err:
        output.fail(err)
    write_outputs(summary, output, report=report, open_report=open_report)


def _dry_run(
    session: Session,
    columns: list[str] | None,
    max_rows: int | None,
    output: Output,
    weights: Mapping[str, float] | None = None,
    date_range: tuple[date, date] | None = None,
    assume_rows: int | None = None,
) -> None:
    import json

    from dpkit.analytics.describe import plan_describe
    from dpkit.cli._dryrun import describe_plan, plan_payload, print_plan, size_warnings

    plan = plan_describe(
        session, columns=columns, max_rows=max_rows, date_range=date_range, weights=weights
    )
    lines = describe_plan(session, plan, assume_rows=assume_rows)
    chosen_privately = session.privacy_unit is not None and max_rows is None
    warnings = size_warnings(lines, assume_rows)
    if not output.json_to_stdout:
        print_plan(session, plan, lines, output.out)
        for warning in warnings:
            output.out.print(f"Warning: {warning}", highlight=False, markup=False)
        if chosen_privately:
            output.out.print(
                f"max_rows is chosen privately at run time (5% of the budget); this plan "
                f"assumes {plan.max_rows}. Give --max-rows to fix it.",
                highlight=False,
                markup=False,
            )
    payload = plan_payload(session, plan, lines)
    payload["max_rows_chosen_privately"] = chosen_privately
    payload["assume_rows"] = assume_rows
    payload["warnings"] = warnings
    output.write_json(json.dumps(payload, indent=2))
