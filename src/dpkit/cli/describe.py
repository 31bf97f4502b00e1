"""``dpkit describe DATA``: a private summary of every column of a table, with a report.

The main job of the command line. It opens a :class:`~dpkit.Session` on a CSV or
Parquet file (DuckDB copies it once into a private table), spends the given budget on the plan of
:func:`dpkit.analytics.describe.describe`, prints the summary as a terminal table and,
on request, writes a self-contained HTML report (plots need ``dpkit[plot]``) and a
JSON file. Errors (bad file, bad budget, unknown column) exit with code 2 and spend
nothing. No message of the engine is printed: DuckDB's can quote rows (an
:class:`~dpkit.errors.EngineError` is reported by its class), and ``--schema`` fixes
column types that would otherwise be sniffed from the file.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from dpkit.errors import DPError, EngineError, InsecureRandomWarning, InvalidParameter

if TYPE_CHECKING:
    from dpkit.accounting.guarantees import Guarantee
    from dpkit.analytics.session import Session
    from dpkit.report.model import DatasetSummary

__all__ = [
    "budget_from_options",
    "describe_command",
    "run_describe",
    "schema_from_options",
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
    """The ``schema=`` of :meth:`~dpkit.Session.from_path` from ``--schema col=TYPE``
    options (types are checked by ``from_path``)."""
    if not items:
        return None
    schema: dict[str, str] = {}
    for item in items:
        column, sep, type_name = item.partition("=")
        if not sep or not column.strip() or not type_name.strip():
            raise InvalidParameter(f"--schema takes COLUMN=TYPE (e.g. age=BIGINT). Got {item!r}.")
        schema[column.strip()] = type_name.strip()
    return schema


def run_describe(
    data: Path,
    *,
    budget: Guarantee,
    privacy_unit: str | None,
    columns: list[str] | None,
    max_rows: int | None,
    top: int,
    ledger: Path | None,
    seed: int | None,
    console: Console,
    source: str | None = None,
    schema: Mapping[str, str] | None = None,
) -> DatasetSummary:
    """Open a Session on ``data``, run the summary with a progress bar, return it."""
    from dpkit.analytics.session import Session

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomWarning)
        session = Session.from_path(
            data, privacy_unit=privacy_unit, budget=budget, ledger=ledger, rng=seed, schema=schema
        )
    return summarise(
        session, columns=columns, max_rows=max_rows, top=top, console=console, source=source
    )


def summarise(
    session: Session,
    *,
    columns: list[str] | None,
    max_rows: int | None,
    top: int,
    console: Console,
    source: str | None = None,
) -> DatasetSummary:
    """Run :func:`dpkit.analytics.describe.describe` on ``session`` with a progress bar."""
    from dpkit.analytics.describe import describe, plan_describe

    plan = plan_describe(session, columns=columns, max_rows=max_rows)
    progress = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} queries"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress, warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomWarning)
        task = progress.add_task("summarising", total=plan.steps)

        def advance(label: str) -> None:
            progress.update(task, description=f"summarising {label}")
            progress.advance(task)

        return describe(
            session, columns=columns, max_rows=max_rows, top=top, source=source, progress=advance
        )


def describe_command(
    data: Annotated[Path, typer.Argument(help="A CSV (.csv, .csv.gz) or Parquet file.")],
    epsilon: Annotated[
        float | None, typer.Option(help="Total epsilon (default 1.0 unless --rho).")
    ] = None,
    delta: Annotated[
        float, typer.Option(help="Total delta; 0 gives pure DP (no category selection).")
    ] = 1e-6,
    rho: Annotated[
        float | None, typer.Option(help="A zCDP budget instead of (eps, delta).")
    ] = None,
    privacy_unit: Annotated[
        str | None, typer.Option(help="Column identifying a person (default: one row each).")
    ] = None,
    columns: Annotated[
        str | None, typer.Option(help="Comma-separated columns to summarise (default: all).")
    ] = None,
    max_rows: Annotated[
        int | None, typer.Option(help="Rows kept per person per query (default 10).")
    ] = None,
    top: Annotated[int, typer.Option(help="Categories shown per categorical column.")] = 10,
    engine: Annotated[str, typer.Option(help="Query engine (only 'duckdb' for now).")] = "duckdb",
    report: Annotated[Path | None, typer.Option(help="Write an HTML report here.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write JSON here.")] = None,
    open_report: Annotated[
        bool, typer.Option("--open", help="Open the HTML report in a browser.")
    ] = False,
    ledger: Annotated[
        Path | None, typer.Option(help="SQLite ledger file (persists the spent budget).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed: reproducible but NOT private output.")
    ] = None,
    schema: Annotated[
        list[str] | None,
        typer.Option(
            help="COLUMN=TYPE (repeatable), e.g. age=BIGINT: a DuckDB type for a column "
            "instead of the one sniffed from the file; values that do not parse count as "
            "missing."
        ),
    ] = None,
) -> None:
    """Release a private summary of every column of DATA, with a report."""
    console = Console()
    try:
        if engine != "duckdb":
            raise InvalidParameter(f"--engine must be 'duckdb' for now. Got {engine!r}.")
        if not data.is_file():
            raise InvalidParameter(f"No file at {str(data)!r}.")
        summary = run_describe(
            data,
            budget=budget_from_options(epsilon, delta, rho),
            privacy_unit=privacy_unit,
            columns=[c.strip() for c in columns.split(",")] if columns else None,
            max_rows=max_rows,
            top=top,
            ledger=ledger,
            seed=seed,
            console=console,
            source=data.name,
            schema=schema_from_options(schema),
        )
    except EngineError as err:
        # An engine's message can quote rows: say what failed, never what it said.
        console.print(
            f"[red]error:[/red] the query engine failed ({type(err).__name__}); its message "
            "is not shown because it may quote row values. Budget charged for queries that "
            "had started stays spent."
        )
        raise typer.Exit(code=2) from None
    except DPError as err:
        # dpkit's own messages hold public information only; escape() keeps a column
        # name such as "[bold]" from being read as Rich markup.
        console.print(f"[red]error:[/red] {escape(str(err))}")
        raise typer.Exit(code=2) from None
    write_outputs(summary, console, report=report, json_out=json_out, open_report=open_report)


def write_outputs(
    summary: DatasetSummary,
    console: Console,
    *,
    report: Path | None,
    json_out: Path | None,
    open_report: bool,
) -> None:
    """Print the summary, and write/open the report and JSON the user asked for."""
    from dpkit.report import open_in_browser, render_html, render_terminal, to_json

    render_terminal(summary, console)
    if json_out is not None:
        json_out.write_text(to_json(summary), encoding="utf-8")
        console.print(f"JSON written to {json_out}")
    if report is not None:
        render_html(summary, report)
        console.print(f"HTML report written to {report}")
        if open_report:
            open_in_browser(report)
