"""Entry point of the ``dpkit`` command."""

from __future__ import annotations

import json
import warnings
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from dpkit.cli.account import account_app
from dpkit.cli.audit import audit_command
from dpkit.cli.demo import BUDGET_SHARES, DemoRow, run_demo
from dpkit.errors import DPError, InsecureRandomWarning
from dpkit.random import as_random

app = typer.Typer(
    help="dpkit: differential privacy with exact noise and tight accounting.",
    no_args_is_help=True,
    add_completion=False,
)


app.command("audit")(audit_command)
app.add_typer(account_app, name="account")


@app.callback()
def main() -> None:
    """dpkit command line."""


def _render(rows: list[DemoRow], epsilon: float, secure: bool, console: Console) -> None:
    table = Table(title="UCI Adult (32,561 people): private statistics, 95% intervals")
    table.add_column("statistic")
    table.add_column("estimate", justify="right")
    table.add_column("95% interval", justify="right")
    table.add_column("epsilon", justify="right")
    table.add_column("mechanism")
    for row in rows:
        digits = 2 if row.statistic.startswith("mean") else 0
        table.add_row(
            row.statistic,
            f"{row.estimate:,.{digits}f}",
            f"[{row.low:,.{digits}f}, {row.high:,.{digits}f}]",
            f"{row.epsilon:g}" if row.epsilon else "\u2033",
            row.mechanism,
        )
    console.print(table)
    split = ", ".join(f"{k} {v:.0%}" for k, v in BUDGET_SHARES.items())
    console.print(
        f"Privacy: {epsilon:g}-DP in total (pure DP, basic composition; "
        f"add/remove one person). Budget split: {split}."
    )
    if not secure:
        console.print("[yellow]Seeded generator: reproducible but NOT private.[/yellow]")


@app.command()
def demo(
    epsilon: Annotated[float, typer.Option(help="Total privacy budget (pure DP).")] = 1.0,
    seed: Annotated[int | None, typer.Option(help="Seed for a reproducible, insecure run.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Release a few private statistics of the bundled UCI Adult data set."""
    console = Console()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureRandomWarning)
            rng = as_random(seed)
        rows = run_demo(epsilon=epsilon, rng=rng)
    except DPError as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(code=2) from err
    if as_json:
        payload = {
            "epsilon": epsilon,
            "secure": rng.secure,
            "statistics": [row.__dict__ for row in rows],
        }
        typer.echo(json.dumps(payload, indent=2))
    else:
        _render(rows, epsilon, rng.secure, console)
