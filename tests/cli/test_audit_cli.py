"""``dpkit audit MODULE:FUNCTION``: bound, confidence and verdict on the command line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpkit.cli.main import app

MODULE = textwrap.dedent(
    """
    import numpy as np
    import dpkit as dp

    GOOD = dp.Laplace.calibrate(epsilon=1.0)

    def good(x, n, rng):
        return GOOD.release(np.full(n, float(x)), rng=rng).value

    def half_noise(x, n, rng):
        return dp.noise.laplace(np.full(n, float(x)), scale=0.5, rng=rng)

    def broken(x, n, rng):
        return np.full(n + 1, float(x))
    """
)


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    (tmp_path / "audit_cli_mechanisms.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return CliRunner()


def _run(runner: CliRunner, function: str, *extra: str) -> tuple[int, str]:
    args = ["audit", f"audit_cli_mechanisms:{function}", "--x", "0", "--x-prime", "1"]
    result = runner.invoke(app, [*args, "--samples", "20000", "--seed", "1", *extra])
    return result.exit_code, result.output


def test_correct_mechanism_is_not_refuted(runner: CliRunner) -> None:
    code, output = _run(runner, "good", "--epsilon", "1")
    assert code == 0, output
    assert "audited lower bound" in output and "95% confidence" in output
    assert "not refuted" in output


def test_planted_bug_is_refuted(runner: CliRunner) -> None:
    code, output = _run(runner, "half_noise", "--epsilon", "1", "--json")
    assert code == 1, output
    payload = json.loads(output)
    assert payload["refuted"] is True and payload["epsilon_lower_bound"] > 1.0
    assert payload["confidence"] == 0.95


@pytest.mark.parametrize(
    ("function", "extra"),
    [
        ("good", ["--epsilon", "1", "--delta", "1.5"]),
        ("good", ["--epsilon", "1", "--confidence", "1"]),
        ("broken", ["--epsilon", "1"]),
        ("missing", ["--epsilon", "1"]),
        ("good", ["--epsilon", "1", "--attack", "magic"]),
    ],
    ids=["delta", "confidence", "wrong-shape", "missing-function", "attack"],
)
def test_errors_exit_with_2(runner: CliRunner, function: str, extra: list[str]) -> None:
    code, output = _run(runner, function, *extra)
    assert code == 2, output


def test_bad_json(runner: CliRunner) -> None:
    result = runner.invoke(
        app, ["audit", "audit_cli_mechanisms:good", "--x", "{", "--x-prime", "1", "--epsilon", "1"]
    )
    assert result.exit_code == 2
