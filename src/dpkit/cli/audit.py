"""``dpkit audit MODULE:FUNCTION``: audit a mechanism from the command line.

``FUNCTION(x, n, rng)`` must return ``n`` independent outputs of the mechanism on
input ``x`` (see :func:`dpkit.audit.audit`); ``--x`` and ``--x-prime`` are JSON. The
command prints the audited lower bound on epsilon with its confidence and a verdict:
``REFUTED`` (exit code 1) when the bound exceeds the claimed epsilon, otherwise
``not refuted`` (exit code 0) -- an audit never certifies privacy. Errors exit with 2.
``--plot PATH`` also writes a PNG of the two output histograms with the test region the
audit chose shaded, and of the test's error rates against the trade-off curve of the
claimed guarantee (needs Matplotlib: ``pip install 'dpkit[plot]'``).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import numpy.typing as npt
import typer

from dpkit.errors import DPError, InsecureRandomWarning, InvalidParameter
from dpkit.random import as_random

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from dpkit.audit.blackbox import AuditResult, Mechanism

__all__ = ["audit_command", "load_mechanism", "plot_audit"]

_PLOT_HINT = "--plot needs Matplotlib: pip install 'dpkit[plot]'"
_DISCRETE_MAX = 60  # at most this many distinct outputs: one bar per value
_CONTINUOUS_BINS = 80
_TAIL = 5e-4  # continuous outputs: the plot spans the pooled [0.05%, 99.95%] quantiles
_RELATIVE_SPAN = 1e-6  # below this spread relative to their size, outputs get an offset


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


def _matplotlib_available() -> bool:
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        return False
    return True


def _edges(pooled: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Bin edges: one bar per value for few distinct outputs, else quantile-trimmed bins."""
    distinct = np.unique(pooled)
    if distinct.size <= _DISCRETE_MAX:
        if distinct.size == 1:
            return np.array([distinct[0] - 0.5, distinct[0] + 0.5])
        middles = (distinct[1:] + distinct[:-1]) / 2
        first = distinct[0] - (middles[0] - distinct[0])
        last = distinct[-1] + (distinct[-1] - middles[-1])
        return np.concatenate([[first], middles, [last]])
    low, high = np.quantile(pooled, [_TAIL, 1 - _TAIL])
    if not high > low:
        low, high = float(distinct[0]), float(distinct[-1])
    return np.linspace(low, high, _CONTINUOUS_BINS + 1)


def _shade_region(
    ax: Axes, edges: npt.NDArray[np.float64], inside: npt.NDArray[np.bool_], label: str
) -> None:
    """Shade the runs of consecutive bins that lie in the test region."""
    labelled = False
    start: int | None = None
    for i, flag in enumerate([*inside.tolist(), False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            ax.axvspan(
                float(edges[start]),
                float(edges[i]),
                color="0.55",
                alpha=0.25,
                hatch="//",
                label=None if labelled else label,
                zorder=0,
            )
            labelled, start = True, None


def _draw_tradeoff(ax: Axes, result: AuditResult, claimed_epsilon: float | None) -> None:
    """The hypothesis-testing view: the audit's test against trade-off curves.

    An ``(eps, delta)``-DP mechanism admits no test with false-negative rate below
    ``f_{eps,delta}(false-positive rate)`` (Dong, Roth & Su 2022). The
    audit's test is drawn at its observed rates and at their Clopper-Pearson upper
    bounds; the corner below the claimed curve is what refutes the claim.
    """
    from dpkit.accounting.tradeoff import approx_dp_tradeoff

    alphas = np.linspace(0.0, 1.0, 401)
    if claimed_epsilon is not None:
        claimed = approx_dp_tradeoff(alphas, epsilon=claimed_epsilon, delta=result.delta)
        ax.plot(alphas, claimed, color="black", label=f"claimed ({claimed_epsilon:g}, "
                f"{result.delta:g})-DP")  # fmt: skip
    bound = result.epsilon_lower_bound
    if math.isfinite(bound) and bound > 0:
        audited = approx_dp_tradeoff(alphas, epsilon=bound, delta=result.delta)
        ax.plot(alphas, audited, color="#e15759", linestyle="--",
                label=f"audited lower bound ({bound:.3g}, {result.delta:g})")  # fmt: skip
    fpr = result.false_positives / max(result.negatives, 1)
    fnr = result.false_negatives / max(result.positives, 1)
    ax.plot([fpr], [fnr], "o", color="#4e79a7", label="the audit's test (observed)")
    ax.plot([result.fpr_upper], [result.fnr_upper], "s", color="#4e79a7", fillstyle="none",
            label=f"its {result.confidence:.0%} upper bounds")  # fmt: skip
    ax.plot([fpr, result.fpr_upper], [fnr, result.fnr_upper], color="#4e79a7", linewidth=0.8)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("equal")
    ax.set_xlabel("false-positive rate (type I error)")
    ax.set_ylabel("false-negative rate (type II error)")
    ax.set_title("hypothesis-testing view (f-DP)")
    ax.legend(loc="upper right", fontsize=7.5)


def plot_audit(result: AuditResult, path: Path, *, claimed_epsilon: float | None = None) -> None:
    """Write a PNG: the histograms of M(x) and M(x') and the audit's test region.

    A second panel shows the same test in the hypothesis-testing plane against the
    trade-off curve of the claimed ``(epsilon, delta)`` (and of the audited bound).

    Needs ``result.outputs`` (``audit(..., keep_outputs=True)``). Scalar outputs are
    drawn on their own axis; vector outputs on the axis of the attack's score. A bin
    is shaded when most of the draws that fall in it lie in the region
    ``{score > threshold}`` the audit chose (exactly the region for the threshold
    attack). The title states the audited lower bound and its confidence.
    """
    if result.outputs is None:
        raise InvalidParameter(
            "plot_audit needs an AuditResult from audit(..., keep_outputs=True); "
            "this one kept no outputs."
        )
    import matplotlib
    from matplotlib.figure import Figure

    kept = result.outputs
    scalar = kept.x.ndim == 1 or kept.x.shape[1] == 1
    if scalar:
        vx = kept.x.reshape(-1).astype(np.float64)
        vxp = kept.x_prime.reshape(-1).astype(np.float64)
        axis_label = "mechanism output"
    else:
        vx, vxp = kept.scores_x, kept.scores_x_prime
        axis_label = "attack score (outputs are vectors)"
    pooled = np.concatenate([vx, vxp])
    magnitude = float(np.max(np.abs(pooled)))
    if magnitude > 0 and float(np.ptp(pooled)) < _RELATIVE_SPAN * magnitude:
        # Outputs huge and close together (e.g. 2^60 +- 256): Matplotlib's transforms
        # cannot resolve them, so draw them relative to one of them (exact subtraction).
        offset = float(np.sort(pooled)[pooled.size // 2])
        vx, vxp, pooled = vx - offset, vxp - offset, pooled - offset
        axis_label = f"{axis_label} - {offset:.17g}"
    in_region = np.concatenate(
        [kept.scores_x > result.threshold, kept.scores_x_prime > result.threshold]
    )
    edges = _edges(pooled)
    members = np.histogram(pooled[in_region], edges)[0]
    totals = np.histogram(pooled, edges)[0]
    says = "x" if result.positive == "x" else "x'"
    with matplotlib.rc_context({"font.size": 9.0}):
        fig = Figure(figsize=(11.0, 4.4), layout="constrained")
        ax, plane = fig.subplots(1, 2, width_ratios=(1.6, 1.0))
        _draw_tradeoff(plane, result, claimed_epsilon)
        _shade_region(ax, edges, members * 2 > totals, f"test region (says {says})")
        ax.stairs(
            np.histogram(vx, edges)[0] / vx.size,
            edges,
            fill=True,
            alpha=0.45,
            color="#4e79a7",
            label="outputs on x",
        )
        ax.stairs(
            np.histogram(vxp, edges)[0] / vxp.size,
            edges,
            fill=True,
            alpha=0.45,
            color="#e15759",
            label="outputs on x'",
        )
        ax.set_xlabel(axis_label)
        ax.set_ylabel("share of draws")
        claim = "" if claimed_epsilon is None else f" (claimed {claimed_epsilon:g})"
        ax.set_title(
            f"audited lower bound: epsilon >= {result.epsilon_lower_bound:.4g}{claim}\n"
            f"delta = {result.delta:g}, {result.confidence:.0%} confidence, "
            f"{result.attack} attack, {result.samples} draws per input"
        )
        ax.legend(loc="best")
        fig.savefig(path, format="png", dpi=110)


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
    plot: Annotated[
        Path | None,
        typer.Option(help="Write a PNG of the output histograms and the test region here."),
    ] = None,
) -> None:
    """Audit a mechanism on a neighbouring pair: a lower bound on epsilon and a verdict."""
    mechanism = load_mechanism(target)
    x_value = _parse_json(x, "--x")
    x_prime_value = _parse_json(x_prime, "--x-prime")
    if attack not in ("threshold", "histogram"):
        raise typer.BadParameter("--attack must be 'threshold' or 'histogram'")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise typer.BadParameter("--epsilon must be a finite float >= 0")
    if plot is not None and not _matplotlib_available():
        typer.echo(f"error: {_PLOT_HINT}", err=True)
        raise typer.Exit(code=2)
    # Imported here: the audit module (and SciPy's statistics, through it) would add
    # ~0.1 s to every other command's start.
    from dpkit.audit.blackbox import audit

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
            keep_outputs=plot is not None,
            rng=rng,
        )
    except DPError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=2) from err
    refuted = result.refutes(epsilon)
    if plot is not None:
        try:
            plot_audit(result, plot, claimed_epsilon=epsilon)
        except OSError as err:
            typer.echo(f"error: cannot write the plot to {str(plot)!r}: {err}", err=True)
            raise typer.Exit(code=2) from err
    if as_json:
        payload = {
            "epsilon_lower_bound": result.epsilon_lower_bound,
            "confidence": result.confidence,
            "delta": result.delta,
            "claimed_epsilon": epsilon,
            "samples": result.samples,
            "attack": result.attack,
            "refuted": refuted,
            "plot": None if plot is None else str(plot),
        }
        typer.echo(json.dumps(payload))
    else:
        typer.echo(
            f"audited lower bound: epsilon >= {result.epsilon_lower_bound:.4f} at delta = "
            f"{result.delta:g} ({result.confidence:.0%} confidence, {result.samples} samples "
            f"per input, {result.attack} attack)"
        )
        typer.echo(_verdict(result, epsilon))
        if plot is not None:
            typer.echo(f"plot written to {plot}")
    if refuted:
        raise typer.Exit(code=1)
