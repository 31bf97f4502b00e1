"""Entry point of the ``dpkit`` command.

Sub-commands: ``describe`` (the main job: a private summary of a dataset with a
report), ``demo`` (``describe`` on a bundled dataset, offline), ``account`` (privacy
accounting) and ``audit`` (statistical auditing of a mechanism). Heavy parts (the
Session, DuckDB, SciPy) load only when a command needs them, so ``dpkit --help`` is
instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from dpkit.cli.account import account_app
from dpkit.cli.audit import audit_command
from dpkit.cli.describe import budget_from_options, describe_command, summarise, write_outputs
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

app.command("describe")(describe_command)
app.command("audit")(audit_command)
app.add_typer(account_app, name="account")


@app.callback()
def main() -> None:
    """dpkit command line."""


@app.command()
def demo(
    epsilon: Annotated[float, typer.Option(help="Total epsilon.")] = 1.0,
    delta: Annotated[float, typer.Option(help="Total delta.")] = 1e-6,
    people: Annotated[int, typer.Option(help="Users in the generated dataset.")] = 30_000,
    report: Annotated[
        Path | None, typer.Option(help="HTML report path (default dpkit-demo-report.html).")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write JSON here.")] = None,
    open_report: Annotated[bool, typer.Option("--open", help="Open the report.")] = False,
    seed: Annotated[
        int | None, typer.Option(help="Seed: reproducible but NOT private output.")
    ] = None,
) -> None:
    """Summarise synthetic web-session data privately (many rows per user), offline.

    Generates the dpkit web-sessions dataset deterministically (``dpkit.data.
    make_web_sessions``: 30,000 users, about 500,000 sessions by default) and runs the
    ``dpkit describe`` summary on it with ``user_id`` as the privacy unit.
    """
    console = Console()
    target = report if report is not None else Path("dpkit-demo-report.html")
    try:
        session = _demo_session(people, budget_from_options(epsilon, delta, None), seed)
        summary = summarise(
            session,
            columns=None,
            max_rows=None,
            top=10,
            console=console,
            source=f"dpkit web sessions (synthetic, {people:,} users)",
        )
    except DPError as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(code=2) from err
    write_outputs(summary, console, report=target, json_out=json_out, open_report=open_report)


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
