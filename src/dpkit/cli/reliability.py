"""``dpkit reliability``: choose a never-fail construction before running anything.

``dpkit reliability plan --epsilon E [--delta D] --failure-probability B --alpha A``
prints, for a base mechanism that is ``(E, D)``-DP and whose loss exceeds ``A`` with
probability at most ``B`` on every input, what each construction of
:mod:`dpkit.reliability` guarantees: absorbing the failure into delta, repeat until
success (Steinke 2025, Theorems 1-2, default attempt cap) and, for a pure-DP base, the
pure variant with a Laplace loss estimate. ``--json`` prints one JSON object. Bad
input prints a message and exits with code 2.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from dpkit.errors import DPError

__all__ = ["reliability_app"]

reliability_app = typer.Typer(
    help="Algorithms that never fail: what each construction costs, before running it.",
    no_args_is_help=True,
    add_completion=False,
)


@reliability_app.callback()
def _group() -> None:
    """Algorithms that never fail (dpkit.reliability)."""


def _fail(message: str) -> NoReturn:
    Console(stderr=True).print(f"[red]error:[/red] {message}", highlight=False, markup=True)
    raise typer.Exit(code=2)


def _row_payload(row: Any) -> dict[str, Any]:
    guarantee = row.guarantee
    return {
        "construction": row.construction,
        "epsilon": guarantee.epsilon,
        "delta": getattr(guarantee, "delta", 0.0),
        "loss_bound": row.loss_bound,
        "failure_probability": row.failure_probability,
        "expected_attempts": row.expected_attempts,
    }


@reliability_app.command("plan")
def plan(
    epsilon: Annotated[float, typer.Option(help="Epsilon of the base mechanism.")],
    failure_probability: Annotated[
        float, typer.Option(help="beta: proven bound on P[loss > alpha], every input.")
    ],
    alpha: Annotated[float, typer.Option(help="Target loss alpha >= 0.")],
    delta: Annotated[float, typer.Option(help="Delta of the base mechanism.")] = 0.0,
    loss_epsilon: Annotated[
        float | None, typer.Option(help="Epsilon of the loss estimate (default: --epsilon).")
    ] = None,
    loss_delta: Annotated[
        float | None,
        typer.Option(help="Delta of the loss estimate (default: --delta, or 1e-6 if 0)."),
    ] = None,
    loss_sensitivity: Annotated[float, typer.Option(help="Sensitivity of the loss.")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Compare the never-fail constructions for a base mechanism (nothing runs)."""
    from dpkit.accounting.guarantees import ApproxDP, PureDP
    from dpkit.reliability import compare

    try:
        base = PureDP(epsilon) if delta == 0.0 else ApproxDP(epsilon, delta)
        z_epsilon = epsilon if loss_epsilon is None else loss_epsilon
        z_delta = (delta if delta > 0 else 1e-6) if loss_delta is None else loss_delta
        rows = compare(
            base,
            failure_probability=failure_probability,
            alpha=alpha,
            loss_guarantee=ApproxDP(z_epsilon, z_delta),
            loss_sensitivity=loss_sensitivity,
        )
    except DPError as err:
        _fail(str(err))
    payload = {
        "base": {"epsilon": epsilon, "delta": delta},
        "failure_probability": failure_probability,
        "alpha": alpha,
        "loss_estimate": {"epsilon": z_epsilon, "delta": z_delta},
        "constructions": [_row_payload(row) for row in rows],
    }
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    console = Console(soft_wrap=True)  # a table row stays on one line
    console.print(
        f"Base mechanism ({epsilon:g}, {delta:g})-DP, loss > {alpha:g} with probability "
        f"<= {failure_probability:g}:",
        highlight=False,
        markup=False,
    )
    header = f"  {'construction':<21}{'epsilon':>12}{'delta':>12}{'loss bound':>13}"
    console.print(header + f"{'fails w.p.':>12}{'attempts':>10}", highlight=False, markup=False)
    for row in rows:
        item = _row_payload(row)
        console.print(
            f"  {item['construction']:<21}{item['epsilon']:>12.6g}{item['delta']:>12.4g}"
            f"{item['loss_bound']:>13.6g}{item['failure_probability']:>12.3g}"
            f"{item['expected_attempts']:>10.4g}",
            highlight=False,
            markup=False,
        )
    if delta > 0:
        console.print(
            "  (reduce_failure needs a pure-DP base: not shown)", highlight=False, markup=False
        )
