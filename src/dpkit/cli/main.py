"""Entry point of the ``dpkit`` command (also ``python -m dpkit``).

Sub-commands: ``describe`` (the main job: a private summary of a dataset with a
report), ``demo`` (``describe`` on a bundled dataset, offline), ``sql`` (GoogleSQL's
DP SELECT over files), ``account`` (privacy accounting), ``ledger`` (a ledger file,
read-only) and ``audit`` (statistical auditing of a mechanism); ``dpkit --version``.
Heavy parts (the Session, DuckDB, SciPy) load only when a command needs them, so
``dpkit --help`` is instant. Help texts are plain text (Typer prints docstrings as
they are).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dpkit.cli._output import (
    JsonErrorsCommand,
    Output,
    check_browser,
    check_writable,
    write_outputs,
)
from dpkit.cli.account import account_app
from dpkit.cli.audit import audit_command
from dpkit.cli.describe import budget_from_options, describe_command, summarise
from dpkit.cli.ledger import ledger_app
from dpkit.cli.reliability import reliability_app
from dpkit.cli.sql import sql_command
from dpkit.cli.synth import synth_command
from dpkit.errors import DPError

if TYPE_CHECKING:
    from dpkit.accounting.guarantees import Guarantee
    from dpkit.analytics.session import Session

app = typer.Typer(
    help="dpkit: differential privacy with exact noise and tight accounting.",
    no_args_is_help=True,
    add_completion=False,
    # A traceback's local variables can hold rows (a DataFrame, a parsed line).
    pretty_exceptions_show_locals=False,
)

# Under --json, their command-line errors come out as JSON too (cli/_output.py).
app.command("describe", cls=JsonErrorsCommand)(describe_command)
app.command("audit")(audit_command)
app.command("sql", cls=JsonErrorsCommand)(sql_command)
app.command("synth", cls=JsonErrorsCommand)(synth_command)
app.add_typer(account_app, name="account")
app.add_typer(ledger_app, name="ledger")
app.add_typer(reliability_app, name="reliability")


def _version(value: bool) -> None:
    if value:
        from dpkit import __version__

        typer.echo(f"dpkit {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """dpkit command line."""


@app.command(cls=JsonErrorsCommand)
def demo(
    epsilon: Annotated[float, typer.Option(help="Total epsilon.")] = 1.0,
    delta: Annotated[float, typer.Option(help="Total delta.")] = 1e-6,
    people: Annotated[int, typer.Option(help="Users in the generated dataset.")] = 30_000,
    report: Annotated[
        Path | None, typer.Option(help="HTML report path (default dpkit-demo-report.html).")
    ] = None,
    json_out: Annotated[
        str | None,
        typer.Option("--json", metavar="PATH", help="Write JSON here; '-' for standard output."),
    ] = None,
    open_report: Annotated[
        bool, typer.Option("--open", help="Open the report in a web browser.")
    ] = False,
    seed: Annotated[
        int | None, typer.Option(help="Seed: reproducible but NOT private output.")
    ] = None,
) -> None:
    """Summarise synthetic web-session data privately (many rows per user), offline.

    Generates the dpkit web-sessions dataset deterministically (30,000 users, about
    500,000 sessions by default; dpkit.data.make_web_sessions in Python) and runs the
    dpkit describe summary on it with user_id as the privacy unit.
    """
    output = Output(json_out)
    target = report if report is not None else Path("dpkit-demo-report.html")
    try:
        check_browser(open_report, target)
        check_writable(target, "--report")
        check_writable(None if json_out is None else Path(json_out), "--json")
        session = _demo_session(people, budget_from_options(epsilon, delta, None), seed)
        summary = summarise(
            session,
            columns=None,
            max_rows=None,
            top=10,
            console=output.err,
            source=f"dpkit web sessions (synthetic, {people:,} users)",
        )
    except DPError as err:
        output.fail(err)
    write_outputs(summary, output, report=target, open_report=open_report)


def _demo_session(people: int, budget: Guarantee, seed: int | None) -> Session:
    import warnings

    import pandas as pd  # type: ignore[import-untyped]

    from dpkit.analytics.session import Session
    from dpkit.data.sessions import make_web_sessions
    from dpkit.errors import InsecureRandomWarning

    frame = pd.DataFrame(make_web_sessions(n_people=people))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRandomWarning)
        return Session.from_pandas(frame, privacy_unit="user_id", budget=budget, rng=seed)
