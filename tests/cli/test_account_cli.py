"""``dpkit account``: DP-SGD epsilon, calibration and composing a file of events."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpkit.accounting import GaussianEvent, LaplaceEvent, PoissonSampledEvent, ZCDPAccountant
from dpkit.cli.main import app

runner = CliRunner()

_DPSGD_ARGS = ["--sampling-rate", "0.01", "--noise-multiplier", "1.0", "--steps", "100"]
_DPSGD_ARGS += ["--delta", "1e-5"]
_CALIBRATE_ARGS = ["--sampling-rate", "0.01", "--steps", "100", "--epsilon", "1.0"]
_CALIBRATE_ARGS += ["--delta", "1e-5"]

needs_calibrate = pytest.mark.skipif(
    importlib.util.find_spec("dpkit.accounting.calibrate") is None,
    reason="dpkit.accounting.calibrate (dpsgd_epsilon / dpsgd_noise_multiplier) is not there yet",
)


@needs_calibrate
@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_dpsgd_json_matches_the_library(accountant: str) -> None:
    from dpkit.accounting.calibrate import dpsgd_epsilon

    result = runner.invoke(
        app, ["account", "dpsgd", *_DPSGD_ARGS, "--accountant", accountant, "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    expected = dpsgd_epsilon(
        sampling_probability=0.01,
        noise_multiplier=1.0,
        steps=100,
        delta=1e-5,
        accountant=accountant,
    )
    assert payload["epsilon"] == expected
    assert payload["accountant"] == accountant


@needs_calibrate
def test_dpsgd_text_output_names_the_accountant() -> None:
    result = runner.invoke(
        app,
        ["account", "dpsgd", *_DPSGD_ARGS],
    )
    assert result.exit_code == 0, result.output
    assert "accountant: rdp" in result.output and "-DP" in result.output


@needs_calibrate
def test_calibrate_meets_the_target() -> None:
    from dpkit.accounting.calibrate import dpsgd_epsilon

    result = runner.invoke(
        app,
        ["account", "calibrate", *_CALIBRATE_ARGS, "--json"],
    )
    assert result.exit_code == 0, result.output
    sigma = json.loads(result.output)["noise_multiplier"]
    epsilon = dpsgd_epsilon(
        sampling_probability=0.01, noise_multiplier=sigma, steps=100, delta=1e-5
    )
    assert epsilon <= 1.0


_RATE = "--sampling-rate"


@needs_calibrate
@pytest.mark.parametrize(
    "args",
    [
        ["dpsgd", _RATE, "2", "--noise-multiplier", "1", "--steps", "5", "--delta", "1e-5"],
        ["dpsgd", _RATE, "0.1", "--noise-multiplier", "-1", "--steps", "5", "--delta", "1e-5"],
        ["dpsgd", *_DPSGD_ARGS, "--accountant", "moments"],
        ["calibrate", _RATE, "0.1", "--steps", "0", "--epsilon", "1", "--delta", "1e-5"],
        ["calibrate", _RATE, "0.1", "--steps", "10", "--epsilon", "1", "--delta", "1.5"],
    ],
    ids=["rate>1", "sigma<0", "unknown-accountant", "steps=0", "delta>1"],
)
def test_bad_dpsgd_input_exits_2(args: list[str]) -> None:
    result = runner.invoke(app, ["account", *args])
    assert result.exit_code == 2, result.output
    assert "error" in result.output


def _write(path: Path, payload: object) -> Path:
    path.write_text(json.dumps(payload))
    return path


EVENTS = [LaplaceEvent(2.0), GaussianEvent(3.0)]


def test_compose_list_of_events_zcdp(tmp_path: Path) -> None:
    path = _write(tmp_path / "events.json", [e.to_dict() for e in EVENTS])
    result = runner.invoke(
        app, ["account", "compose", str(path), "--delta", "1e-6", "--accountant", "zcdp", "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    expected = ZCDPAccountant().compose(EVENTS[0]).compose(EVENTS[1]).get_epsilon(1e-6)
    assert payload == {"epsilon": expected, "delta": 1e-6, "accountant": "zcdp", "events": 2}


def test_compose_single_event_pure_needs_no_delta(tmp_path: Path) -> None:
    path = _write(tmp_path / "one.json", PoissonSampledEvent(LaplaceEvent(1.0), 0.5).to_dict())
    result = runner.invoke(app, ["account", "compose", str(path), "--accountant", "pure"])
    assert result.exit_code == 0, result.output
    assert "1 event composed" in result.output and "accountant: pure" in result.output


def test_compose_default_accountant_is_rdp(tmp_path: Path) -> None:
    path = _write(tmp_path / "events.json", [e.to_dict() for e in EVENTS])
    result = runner.invoke(app, ["account", "compose", str(path), "--delta", "1e-6", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["accountant"] == "rdp"


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("not json", ["--delta", "1e-6"], "not valid JSON"),
        ("[]", ["--delta", "1e-6"], "empty list"),
        ('{"type": "NoSuchEvent"}', ["--delta", "1e-6"], "unknown event type"),
        ('{"type": "LaplaceEvent", "noise_multiplier": -1}', ["--delta", "1e-6"], "must be"),
        (json.dumps(GaussianEvent(1.0).to_dict()), ["--accountant", "pure"], "cannot analyse"),
        (json.dumps(LaplaceEvent(1.0).to_dict()), ["--accountant", "zcdp"], "--delta is required"),
        (json.dumps(LaplaceEvent(1.0).to_dict()), ["--delta", "2"], "delta"),
        (
            json.dumps(LaplaceEvent(1.0).to_dict()),
            ["--accountant", "x", "--delta", "0.1"],
            "one of",
        ),
    ],
    ids=[
        "bad-json",
        "empty",
        "unknown-type",
        "bad-param",
        "unsupported",
        "no-delta",
        "delta>1",
        "acct",
    ],
)
def test_compose_bad_input_exits_2(
    tmp_path: Path, content: str, extra: list[str], message: str
) -> None:
    path = tmp_path / "events.json"
    path.write_text(content)
    result = runner.invoke(app, ["account", "compose", str(path), *extra])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_compose_missing_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["account", "compose", str(tmp_path / "absent.json"), "--delta", "1e-6"]
    )
    assert result.exit_code == 2
    assert "cannot read" in result.output
