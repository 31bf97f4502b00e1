"""``dpkit synth DATA -o synthetic.parquet``: a private synthetic copy of a table.

    dpkit synth adult.csv --epsilon 1 --method aim -o synthetic.parquet \\
        --domains domains.json --bounds age=17:100 --categories sex=Female,Male

runs MST or AIM (:mod:`dpkit.synth`) on a Session over the file, charged once, writes
the synthetic table (``.parquet`` or ``.csv``), prints the guarantee and, with
``--report``, writes an HTML fidelity report (synthetic vs the noisy measurements:
private). ``--dry-run`` prints the plan and the noise and spends nothing.

Every column needs a public domain (it must not come from the data): booleans have
one; give the others with ``--domains FILE.json`` (``{"col": ["a", "b"]}`` for
categories, ``{"col": [low, high]}`` or ``{"col": {"low": .., "high": .., "bins": ..}}``
for numbers and ISO dates), ``--categories COL=a,b,c`` or ``--bounds
COL=LOW:HIGH[:BINS]``. The budget is zCDP: ``--rho``, or ``--epsilon`` with ``--delta``
(default 1e-6), converted exactly.
"""

from __future__ import annotations

import json
import warnings
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

from dpkit.cli._output import Output, check_writable
from dpkit.errors import DPError, InsecureRandomWarning, InvalidParameter

__all__ = ["synth_command"]


def _number(value: object, option: str) -> Any:
    """A bound from the command line or JSON: a number or an ISO date (text)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidParameter(f"{option}: {value!r} is not a number or an ISO date.")
    if not isinstance(value, str):
        return value
    text = value.strip()
    for parse in (int, float, date.fromisoformat):
        try:
            return parse(text)
        except (ValueError, OverflowError):
            continue
    raise InvalidParameter(f"{option}: {text!r} is not a number or an ISO date.")


def domains_from_options(
    path: Path | None, categories: list[str] | None, bounds: list[str] | None
) -> dict[str, object]:
    """Public domains from ``--domains``, ``--categories`` and ``--bounds`` (checked
    before the data is read)."""
    from dpkit.synth import Bins

    out: dict[str, object] = {}
    if path is not None:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise InvalidParameter(
                f"--domains: cannot read {str(path)!r} as JSON ({err})."
            ) from None
        if not isinstance(loaded, dict):
            raise InvalidParameter("--domains: the file must hold a JSON object {column: domain}.")
        for name, spec in loaded.items():
            if isinstance(spec, dict):
                bins, nulls = spec.get("bins", 32), spec.get("nulls", True)
                if isinstance(bins, bool) or not isinstance(bins, int):
                    raise InvalidParameter(f"--domains: bins of {name!r} must be an integer.")
                if not isinstance(nulls, bool):
                    raise InvalidParameter(f"--domains: nulls of {name!r} must be true or false.")
                if "low" not in spec or "high" not in spec:
                    raise InvalidParameter(
                        f"--domains: {name!r} must give low and high (and optionally bins, nulls)."
                    )
                out[name] = Bins(
                    _number(spec["low"], "--domains"),
                    _number(spec["high"], "--domains"),
                    bins,
                    nulls,
                )
            elif (
                isinstance(spec, list)
                and len(spec) == 2
                and all(isinstance(v, int | float) and not isinstance(v, bool) for v in spec)
                and name not in (categories or [])
            ):
                out[name] = (spec[0], spec[1])
            elif isinstance(spec, list):
                out[name] = list(spec)
            else:
                raise InvalidParameter(
                    f"--domains: the domain of {name!r} must be a list or object."
                )
    for item in categories or []:
        name, sep, values = item.partition("=")
        if not sep or not name.strip() or not values:
            raise InvalidParameter(f"--categories takes COL=a,b,c. Got {item!r}.")
        out[name.strip()] = [v for v in values.split(",")]
    for item in bounds or []:
        name, sep, rest = item.partition("=")
        parts = rest.split(":") if sep else []
        if not name.strip() or len(parts) not in (2, 3):
            raise InvalidParameter(f"--bounds takes COL=LOW:HIGH[:BINS]. Got {item!r}.")
        low, high = _number(parts[0], "--bounds"), _number(parts[1], "--bounds")
        bins = 32
        if len(parts) == 3:
            try:
                bins = int(parts[2])
            except ValueError:
                raise InvalidParameter(f"--bounds {item!r}: BINS must be an integer.") from None
        out[name.strip()] = Bins(low, high, bins)
    return out


def _check_distinct(data: Path, *outputs: Path | str | None) -> None:
    """The input and the outputs are different files (a report written over the table,
    or the table over its own input, would lose data after the charge)."""
    seen = {data.resolve(): "DATA"}
    for option, path in zip(("--output", "--report", "--json"), outputs, strict=True):
        if path is None or str(path) == "-":
            continue
        resolved = Path(path).resolve()
        if resolved in seen:
            raise InvalidParameter(f"{option} is the same file as {seen[resolved]}; give another.")
        seen[resolved] = option


def _run_with_progress(session: Any, arguments: dict[str, Any], output: Output) -> Any:
    """``session.synthesize`` with a progress bar on a terminal (by the share of the
    budget spent, which AIM reports as ``[NN%]``), or its lines when piped."""
    import re

    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = output.err
    if not console.is_terminal:
        return session.synthesize(
            **arguments, progress=lambda line: console.print(line, highlight=False, markup=False)
        )
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}% of the budget"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with bar:
        task = bar.add_task("synthesizing", total=100)

        def tell(line: str) -> None:
            share = re.match(r"\[(\d+)%\] ", line)
            if share:
                bar.update(task, completed=int(share.group(1)))
                line = line[share.end() :]
            bar.update(task, description=line[:60])

        return session.synthesize(**arguments, progress=tell)


def _real_comparison(data: Path, result: Any) -> Any:
    """The non-private evaluation: the real table read directly (no noise)."""
    import pandas as pd  # type: ignore[import-untyped]

    frame = (
        pd.read_parquet(data) if data.suffix.lower() in (".parquet", ".pq") else pd.read_csv(data)
    )
    marginals = [m.columns for m in result.measurements if len(m.columns) <= 2]
    return result.compare_with_real(frame, marginals)


def _split(text: str) -> tuple[float, ...]:
    """``--mst-split 0.4,0.2,0.4`` (or fractions ``1/3,1/3,1/3``) -> numbers; the
    Session checks that they are three positive shares adding up to 1."""
    from fractions import Fraction

    try:
        return tuple(float(Fraction(part.strip())) for part in text.split(","))
    except (ValueError, ZeroDivisionError):
        raise InvalidParameter(
            f"--mst-split takes three shares A,B,C adding up to 1; got {text!r}."
        ) from None


def synth_command(
    data: Annotated[Path, typer.Argument(help="A CSV or Parquet file.")],
    output_path: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write the synthetic table (.parquet, .csv)."),
    ] = None,
    method: Annotated[str, typer.Option(help="aim (default) or mst.")] = "aim",
    epsilon: Annotated[float | None, typer.Option(help="Total epsilon (default 1.0).")] = None,
    delta: Annotated[
        float | None, typer.Option(help="Total delta with --epsilon (default 1e-6).")
    ] = None,
    rho: Annotated[float | None, typer.Option(help="A zCDP budget instead.")] = None,
    privacy_unit: Annotated[
        str | None, typer.Option(help="Column identifying a person (default: one row each).")
    ] = None,
    max_rows: Annotated[int, typer.Option(help="Rows one person contributes at most.")] = 1,
    columns: Annotated[
        str | None, typer.Option(help="Comma-separated columns (default: all but the unit).")
    ] = None,
    domains: Annotated[Path | None, typer.Option(help="JSON file of public domains.")] = None,
    categories: Annotated[
        list[str] | None, typer.Option(help="Public categories COL=a,b,c (repeatable).")
    ] = None,
    bounds: Annotated[
        list[str] | None, typer.Option(help="Public bounds COL=LOW:HIGH[:BINS] (repeatable).")
    ] = None,
    rows: Annotated[int | None, typer.Option(help="Rows to sample (default: noisy total).")] = None,
    mst_split: Annotated[
        str | None,
        typer.Option(
            help="MST's budget shares A,B,C for (1-way marginals, tree selection, 2-way "
            "marginals), adding up to 1 (default 0.4,0.2,0.4; the paper's: 1/3 each)."
        ),
    ] = None,
    ledger: Annotated[Path | None, typer.Option(help="SQLite ledger file.")] = None,
    report: Annotated[
        Path | None, typer.Option(help="Write the HTML fidelity report here.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan and noise; spend nothing.")
    ] = False,
    json_out: Annotated[
        str | None, typer.Option("--json", metavar="PATH", help="Write a JSON summary here.")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed: reproducible but NOT private output.")
    ] = None,
    compare_with_real: Annotated[
        bool,
        typer.Option(
            "--compare-with-real",
            help="NOT PRIVATE, for evaluation: add the synthetic-vs-real L1 error of every "
            "measured marginal to the report, marked as such.",
        ),
    ] = False,
) -> None:
    """Write a private synthetic copy of DATA (MST or AIM), charged once to the budget."""
    from dpkit.accounting.guarantees import ZCDP, ApproxDP
    from dpkit.analytics.session import Session

    output = Output(json_out)
    try:
        if rho is not None and (epsilon is not None or delta is not None):
            raise InvalidParameter("Give either --rho (zCDP) or --epsilon/--delta, not both.")
        eps = 1.0 if epsilon is None else epsilon
        budget = ZCDP(rho) if rho is not None else ApproxDP(eps, 1e-6 if delta is None else delta)
        if compare_with_real and report is None:
            raise InvalidParameter("--compare-with-real adds a section to --report; give it.")
        if not dry_run and output_path is None:
            raise InvalidParameter("Give --output PATH (.parquet or .csv), or --dry-run.")
        if output_path is not None and output_path.suffix.lower() not in (".parquet", ".csv"):
            raise InvalidParameter("--output must end in .parquet or .csv.")
        _check_distinct(data, output_path, report, json_out)
        check_writable(output_path, "--output")
        check_writable(report, "--report")
        check_writable(None if json_out in (None, "-") else Path(str(json_out)), "--json")
        public = domains_from_options(domains, categories, bounds)
        names = [c.strip() for c in columns.split(",")] if columns else None
        if not data.is_file():
            raise InvalidParameter(f"No file at {str(data)!r}.")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureRandomWarning)
            session = Session.from_path(
                data,
                privacy_unit=privacy_unit,
                budget=budget,
                ledger=ledger,
                rng=seed,
            )
        arguments: dict[str, Any] = {
            "budget": "remaining",
            "method": method,
            "columns": names,
            "domains": public,
            "rows": rows,
            "max_rows": max_rows,
        }
        if mst_split is not None:
            arguments["mst_split"] = _split(mst_split)
        if dry_run:
            output.note(session.explain_synthesis(**arguments))
            output.note("Dry run: nothing was spent.")
            return
        result = _run_with_progress(session, arguments, output)
        assert output_path is not None
        if output_path.suffix.lower() == ".csv":
            result.to_csv(output_path)
        else:
            result.to_parquet(output_path)
        output.note(result.summary())
        output.note(f"Synthetic table written to {output_path}")
        if compare_with_real and report is None:
            raise InvalidParameter("--compare-with-real adds a section to --report; give it.")
        if report is not None:
            real = _real_comparison(data, result) if compare_with_real else None
            page = result.to_html(f"Synthetic copy of {data.name}", real)
            report.write_text(page, encoding="utf-8")
            output.note(f"Report written to {report}")
            if real is not None:
                output.err.print(
                    "The report's last section compares with the real data: NOT PRIVATE.",
                    highlight=False,
                    markup=False,
                )
        if json_out is not None:
            payload = {
                "method": result.method,
                "rows": len(result.data),
                "columns": list(result.data.columns),
                "guarantee": repr(result.guarantee),
                "measurements": [" x ".join(m.columns) for m in result.measurements],
                "output": str(output_path),
            }
            output.write_json(json.dumps(payload))
    except DPError as err:
        output.fail(err)
