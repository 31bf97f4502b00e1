"""``dpkit account``: privacy accounting from the command line.

- ``dpkit account dpsgd``: epsilon of a DP-SGD configuration (sampling rate, noise
  multiplier, steps, delta).
- ``dpkit account calibrate``: the noise multiplier that meets a target (epsilon, delta).
- ``dpkit account compose FILE``: compose a JSON file of events (``Event.to_dict()``
  dicts, one or a list) and print epsilon at delta.

Output is a short human-readable summary (Rich) or, with ``--json``, one JSON object.
Bad input prints a message and exits with code 2. Accountants are imported lazily, so
``dpkit --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from dpkit.errors import DPError

__all__ = ["account_app"]

account_app = typer.Typer(
    help="Privacy accounting: DP-SGD epsilon, noise calibration, composing events.",
    no_args_is_help=True,
    add_completion=False,
)

_DPSGD_ACCOUNTANTS = ("rdp", "pld")
_COMPOSE_ACCOUNTANTS = ("pure", "zcdp", "rdp", "pld")

AccountantOption = Annotated[
    str, typer.Option(help="Accountant: 'rdp' (Renyi DP) or 'pld' (privacy loss distributions).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _fail(message: str) -> NoReturn:
    Console(stderr=True).print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code=2)


def _check_choice(value: str, choices: tuple[str, ...], option: str) -> str:
    if value not in choices:
        _fail(f"--{option} must be one of {', '.join(choices)}; got {value!r}.")
    return value


def _emit(payload: dict[str, Any], lines: list[str], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
    else:
        console = Console()
        for line in lines:
            console.print(line, highlight=False, markup=False)


@account_app.command("dpsgd")
def dpsgd(
    sampling_rate: Annotated[float, typer.Option(help="Poisson sampling rate q in (0, 1].")],
    noise_multiplier: Annotated[float, typer.Option(help="Noise std over clipping norm.")],
    steps: Annotated[int, typer.Option(help="Number of training steps.")],
    delta: Annotated[float, typer.Option(help="Target delta in (0, 1).")],
    accountant: AccountantOption = "rdp",
    as_json: JsonOption = False,
) -> None:
    """Epsilon of DP-SGD (Poisson-subsampled Gaussian steps, add/remove one example)."""
    _check_choice(accountant, _DPSGD_ACCOUNTANTS, "accountant")
    from dpkit.accounting.calibrate import dpsgd_epsilon

    try:
        epsilon = dpsgd_epsilon(
            sampling_probability=sampling_rate,
            noise_multiplier=noise_multiplier,
            steps=steps,
            delta=delta,
            accountant=accountant,
        )
    except DPError as err:
        _fail(str(err))
    payload = {
        "epsilon": epsilon,
        "delta": delta,
        "accountant": accountant,
        "sampling_rate": sampling_rate,
        "noise_multiplier": noise_multiplier,
        "steps": steps,
    }
    lines = [
        f"DP-SGD with q={sampling_rate:g}, noise multiplier {noise_multiplier:g}, {steps} steps:",
        f"  ({epsilon:.6g}, {delta:g})-DP  [accountant: {accountant}; add/remove one example]",
    ]
    _emit(payload, lines, as_json)


@account_app.command("calibrate")
def calibrate(
    sampling_rate: Annotated[float, typer.Option(help="Poisson sampling rate q in (0, 1].")],
    steps: Annotated[int, typer.Option(help="Number of training steps.")],
    epsilon: Annotated[float, typer.Option(help="Target epsilon > 0.")],
    delta: Annotated[float, typer.Option(help="Target delta in (0, 1).")],
    accountant: AccountantOption = "rdp",
    as_json: JsonOption = False,
) -> None:
    """The smallest DP-SGD noise multiplier that meets (epsilon, delta)."""
    _check_choice(accountant, _DPSGD_ACCOUNTANTS, "accountant")
    from dpkit.accounting.calibrate import dpsgd_noise_multiplier

    try:
        sigma = dpsgd_noise_multiplier(
            sampling_probability=sampling_rate,
            steps=steps,
            target_epsilon=epsilon,
            delta=delta,
            accountant=accountant,
        )
    except DPError as err:
        _fail(str(err))
    payload = {
        "noise_multiplier": sigma,
        "epsilon": epsilon,
        "delta": delta,
        "accountant": accountant,
        "sampling_rate": sampling_rate,
        "steps": steps,
    }
    lines = [
        f"Noise multiplier {sigma:.6g} makes {steps} DP-SGD steps at q={sampling_rate:g} "
        f"({epsilon:g}, {delta:g})-DP  [accountant: {accountant}]",
    ]
    _emit(payload, lines, as_json)


def _load_events(path: Path) -> list[Any]:
    from dpkit.accounting.events import event_from_dict

    try:
        data = json.loads(path.read_text())
    except OSError as err:
        _fail(f"cannot read {str(path)!r}: {err.strerror or err}.")
    except json.JSONDecodeError as err:
        _fail(f"{str(path)!r} is not valid JSON: {err}.")
    items = data if isinstance(data, list) else [data]
    if not items:
        _fail(f"{str(path)!r} holds an empty list; give at least one event.")
    try:
        return [event_from_dict(item) for item in items]
    except DPError as err:
        _fail(str(err))


def _make_accountant(name: str) -> Any:
    if name == "pure":
        from dpkit.accounting.simple import PureAccountant

        return PureAccountant()
    if name == "zcdp":
        from dpkit.accounting.simple import ZCDPAccountant

        return ZCDPAccountant()
    if name == "rdp":
        from dpkit.accounting.rdp import RDPAccountant

        return RDPAccountant()
    from dpkit.accounting.pld import PLDAccountant

    return PLDAccountant()


@account_app.command("compose")
def compose(
    events_file: Annotated[
        Path, typer.Argument(help="JSON file: one Event.to_dict() object or a list of them.")
    ],
    delta: Annotated[
        float | None, typer.Option(help="Delta in (0, 1); required except for 'pure'.")
    ] = None,
    accountant: Annotated[
        str, typer.Option(help="Accountant: 'pure', 'zcdp', 'rdp' or 'pld'.")
    ] = "rdp",
    as_json: JsonOption = False,
) -> None:
    """Compose the events in a JSON file and print epsilon at delta."""
    _check_choice(accountant, _COMPOSE_ACCOUNTANTS, "accountant")
    if delta is None and accountant != "pure":
        _fail(f"--delta is required with --accountant {accountant}.")
    events = _load_events(events_file)
    from dpkit.accounting.events import ComposedEvent

    try:
        composed = _make_accountant(accountant).compose(ComposedEvent(tuple(events)))
        epsilon = composed.get_epsilon(0.0 if delta is None else delta)
    except DPError as err:
        _fail(str(err))
    shown_delta = 0.0 if delta is None else delta
    payload = {
        "epsilon": epsilon,
        "delta": shown_delta,
        "accountant": accountant,
        "events": len(events),
    }
    noun = "event" if len(events) == 1 else "events"
    lines = [
        f"{len(events)} {noun} composed: ({epsilon:.6g}, {shown_delta:g})-DP  "
        f"[accountant: {accountant}]",
    ]
    _emit(payload, lines, as_json)
