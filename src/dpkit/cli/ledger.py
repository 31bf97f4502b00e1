"""``dpkit ledger show|export LEDGER``: a Session's ledger file as tables, JSON or CSV.

    dpkit ledger show budget.db            # scopes (budget, spent, remaining), spends
    dpkit ledger show budget.db --json     # the same as one JSON document
    dpkit ledger show budget.db --csv      # the spends, one row each
    dpkit ledger export budget.db -o spends.csv    # or -o ledger.json

The file is opened read-only (SQLite ``mode=ro``): never created, never changed. A
missing file, or a file that is not a dpkit ledger, is an error (exit code 2). Each
spend shows its time (UTC), the query in words, the budget the query asked for, and the
charge in the units of the Session's budget (:mod:`dpkit.analytics._history`). A ledger
holds public parameters only (queries, keys, bounds, budgets), never a row value.
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dpkit.cli._output import Output, check_writable
from dpkit.errors import DPError, InvalidParameter

if TYPE_CHECKING:
    from dpkit.analytics._history import LedgerSnapshot

__all__ = ["ledger_app"]

ledger_app = typer.Typer(
    help="Read a Session's ledger file (never changed): budgets, spends, remaining.",
    no_args_is_help=True,
    add_completion=False,
)

LedgerArgument = Annotated[
    Path, typer.Argument(help="The SQLite ledger file (ledger= of a Session, --ledger).")
]


@ledger_app.command("show")
def show(
    ledger: LedgerArgument,
    json_flag: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of tables.")
    ] = False,
    csv_flag: Annotated[
        bool, typer.Option("--csv", help="Print the spends as CSV, one row each.")
    ] = False,
) -> None:
    """Print the scopes of LEDGER (budget, spent, remaining) and every spend.

    With --json, errors are JSON on standard output too.
    """
    output = Output("-" if json_flag else None)
    try:
        if json_flag and csv_flag:
            raise InvalidParameter("Give --json or --csv, not both.")
        snapshot = _read(ledger)
    except DPError as err:
        output.fail(err)
    if json_flag:
        output.write_json(_json(snapshot))
    elif csv_flag:
        typer.echo(_csv(snapshot), nl=False)
    else:
        _print(snapshot, output)


@ledger_app.command("export")
def export(
    ledger: LedgerArgument,
    out: Annotated[
        Path,
        typer.Option("--output", "-o", metavar="PATH", help="A .csv (the spends) or .json file."),
    ],
) -> None:
    """Write LEDGER to a file: .csv (one row per spend) or .json (scopes and spends)."""
    output = Output(None)
    try:
        suffix = out.suffix.lower()
        if suffix not in (".csv", ".json"):
            raise InvalidParameter(f"--output: give a .csv or .json file name; got {str(out)!r}.")
        check_writable(out, "--output")
        if (
            out.exists()
            and ledger.exists()
            and (
                out.resolve() == ledger.resolve() or os.path.samefile(out, ledger)  # a hard link
            )
        ):
            raise InvalidParameter("--output is the ledger itself; give another file.")
        snapshot = _read(ledger)
    except DPError as err:
        output.fail(err)
    text = _csv(snapshot) if suffix == ".csv" else _json(snapshot)
    try:
        out.write_text(text, encoding="utf-8", newline="")
    except OSError as err:
        output.fail(err)
    output.note(f"{len(snapshot.spends)} spends written to {out}")


def _read(ledger: Path) -> LedgerSnapshot:
    from dpkit.analytics._history import read_ledger

    return read_ledger(ledger)


def _json(snapshot: LedgerSnapshot) -> str:
    return json.dumps(snapshot.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _csv(snapshot: LedgerSnapshot) -> str:
    """The spends, one row each; the charge's columns are those of every scope's units."""
    names: dict[str, None] = dict.fromkeys(["id", "time", "scope", "query", "budget"])
    for row in snapshot.spends:
        names.update(dict.fromkeys(row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(names), lineterminator="\n")
    writer.writeheader()
    for row in snapshot.spends:
        writer.writerow({**row, "time": row["time"].isoformat()})
    return buffer.getvalue()


def _units(units: dict[str, float] | None, sep: str = "\n") -> str:
    if units is None:
        return "-"
    return sep.join(f"{name}={value:.4g}" for name, value in units.items())


def _line(console: Console, text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def _print(snapshot: LedgerSnapshot, output: Output) -> None:
    """Tables for a terminal; partitions' bookkeeping scopes (no budget of their own)
    are left out (the JSON has them)."""
    console = output.out
    state = {True: "history intact", False: "HISTORY EDITED", None: "history not chained"}
    _line(
        console,
        f"Ledger {snapshot.path} (read-only): {len(snapshot.spends)} spends, "
        f"{state[snapshot.intact]}.",
    )
    for kind in dict.fromkeys(s.kind for s in snapshot.scopes if s.budget is not None):
        _line(console, f"Session budget: {kind}")
    if snapshot.failure is not None:
        _line(
            console,
            f"LOCKED: a query failed after its charge at {snapshot.failure.isoformat()}; "
            "every Session on this ledger is refused.",
        )
    scopes = Table(title="Scopes", title_justify="left")
    for column in ("scope", "spends", "budget", "spent", "remaining"):
        scopes.add_column(column, overflow="fold", no_wrap=column != "scope")
    for scope in snapshot.scopes:
        if scope.budget is None:
            continue
        cells = (scope.scope, str(scope.spends), _units(scope.budget), _units(scope.spent))
        scopes.add_row(*map(Text, cells), Text(_units(scope.remaining)))
    console.print(scopes)
    spends = Table(title="Spends", title_justify="left")
    for column in ("id", "time (UTC)", "scope", "query", "budget asked", "charge"):
        spends.add_column(column, overflow="fold", no_wrap=column in ("id", "charge"))
    fixed = {"id", "time", "scope", "query", "budget"}
    for row in snapshot.spends:
        charge: dict[str, Any] = {k: v for k, v in row.items() if k not in fixed}
        row_cells = (
            str(row["id"]),
            row["time"].strftime("%Y-%m-%d %H:%M:%S"),
            row["scope"],
            row["query"],
            row["budget"] or "",
            _units(charge),
        )
        spends.add_row(*map(Text, row_cells))  # Text: a query's "[b]" is not Rich markup
    console.print(spends)
