"""``dpkit audit MODULE:FUNCTION``: audit a mechanism from the command line.

``FUNCTION(x, n, rng)`` must return ``n`` independent outputs of the mechanism on
input ``x`` (see :func:`dpkit.audit.audit`); ``--x`` and ``--x-prime`` are JSON. The
command prints the audited lower bound on epsilon with its confidence and a verdict:
``REFUTED`` (exit code 1) when the bound exceeds the claimed epsilon, otherwise
``not refuted`` (exit code 0) -- an audit never certifies privacy. Errors exit with 2.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
import warnings
from typing import Annotated, Any

import typer

from dpkit.audit.blackbox import AuditResult, Mechanism, audit
from dpkit.errors import DPError, InsecureRandomWarning
from dpkit.random import as_random

__all__ = ["audit_command", "load_mechanism"]


def load_mechanism(target: str) -> Mechanism:
    """Import ``MODULE:FUNCTION`` (the current directory is searched first)."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise typer.BadParameter(f"expected MODULE:FUNCTION, got {target!r}")
    if os.getcwd() not in sys.path:  # like `python -m`, find modules next to the user
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise typer.BadParameter(f"cannot import module {module_name!r}: {err}") from err
    function: Any = module
    for part in attribute.split("."):
        function = getattr(function, part, None)
    if not callable(function):
        raise typer.BadParameter(f"{target!r} is not a callable")
    mechanism: Mechanism = function
    return mechanism


def _parse_json(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise typer.BadParameter(f"{option} must be JSON ({err.msg})") from err


def _verdict(result: AuditResult, epsilon: float) -> str:
    if result.refutes(epsilon):
        return (
            f"REFUTED: the mechanism is not ({epsilon:g}, {result.delta:g})-DP "
            f"(at {result.confidence:.0%} confidence)."
        )
    return (
        f"not refuted: no evidence against ({epsilon:g}, {result.delta:g})-DP on this pair "
        "(an audit never certifies privacy)."
    )


def audit_command(
    target: Annotated[str, typer.Argument(metavar="MODULE:FUNCTION", help="f(x, n, rng).")],
    x: Annotated[str, typer.Option("--x", help="Input x, as JSON.")],
    x_prime: Annotated[str, typer.Option("--x-prime", help="Neighbour x', as JSON.")],
    epsilon: Annotated[float, typer.Option(help="The claimed epsilon.")],
    delta: Annotated[float, typer.Option(help="The claimed delta.")] = 0.0,
    confidence: Annotated[float, typer.Option(help="Confidence of the bound.")] = 0.95,
    samples: Annotated[int, typer.Option(help="Draws per input.")] = 10**6,
    attack: Annotated[str, typer.Option(help="'threshold' or 'histogram'.")] = "threshold",
    seed: Annotated[int | None, typer.Option(help="Seed (reproducible audit).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Audit a mechanism on a neighbouring pair: a lower bound on epsilon and a verdict."""
    mechanism = load_mechanism(target)
    x_value = _parse_json(x, "--x")
    x_prime_value = _parse_json(x_prime, "--x-prime")
    if attack not in ("threshold", "histogram"):
        raise typer.BadParameter("--attack must be 'threshold' or 'histogram'")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise typer.BadParameter("--epsilon must be a finite float >= 0")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureRandomWarning)
            rng = as_random(seed)
        result = audit(
            mechanism,
            x_value,
            x_prime_value,
            delta=delta,
            confidence=confidence,
            samples=samples,
            attack="histogram" if attack == "histogram" else "threshold",
            rng=rng,
        )
    except DPError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=2) from err
    refuted = result.refutes(epsilon)
    if as_json:
        payload = {
            "epsilon_lower_bound": result.epsilon_lower_bound,
            "confidence": result.confidence,
            "delta": result.delta,
            "claimed_epsilon": epsilon,
            "samples": result.samples,
            "attack": result.attack,
            "refuted": refuted,
        }
        typer.echo(json.dumps(payload))
    else:
        typer.echo(
            f"audited lower bound: epsilon >= {result.epsilon_lower_bound:.4f} at delta = "
            f"{result.delta:g} ({result.confidence:.0%} confidence, {result.samples} samples "
            f"per input, {result.attack} attack)"
        )
        typer.echo(_verdict(result, epsilon))
    if refuted:
        raise typer.Exit(code=1)
