"""``dpkit audit MODULE:FUNCTION``: bound, confidence and verdict on the command line."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

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


@pytest.mark.parametrize(
    ("function", "attack", "code"),
    [("half_noise", "threshold", 1), ("good", "histogram", 0)],
    ids=["threshold-refuted", "histogram-not-refuted"],
)
def test_plot_writes_a_png(
    runner: CliRunner, tmp_path: Path, function: str, attack: str, code: int
) -> None:
    image = pytest.importorskip("matplotlib.image")
    path = tmp_path / "audit.png"
    exit_code, output = _run(
        runner, function, "--epsilon", "1", "--attack", attack, "--plot", str(path)
    )
    assert exit_code == code, output
    assert "plot written to" in output
    assert path.stat().st_size > 10_000  # axes, two histograms, a region, a title
    pixels = image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] >= 300 and pixels.shape[1] >= 500
    assert pixels.std() > 0.05  # not a blank canvas


def test_plot_path_in_json(runner: CliRunner, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "bound.png"
    code, output = _run(runner, "good", "--epsilon", "1", "--json", "--plot", str(path))
    assert code == 0, output
    assert json.loads(output)["plot"] == str(path) and path.exists()


def test_plot_without_matplotlib_says_how_to_install(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry in sys.modules makes "import matplotlib..." raise ImportError.
    for name in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)
    path = tmp_path / "never.png"
    code, output = _run(runner, "good", "--epsilon", "1", "--plot", str(path))
    assert code == 2
    assert "pip install 'dpkit[plot]'" in output
    assert not path.exists()


def test_plot_to_unwritable_path_exits_with_2(runner: CliRunner, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "missing-folder" / "audit.png"
    code, output = _run(runner, "good", "--epsilon", "1", "--plot", str(path))
    assert code == 2, output
    assert "cannot write the plot" in output


@pytest.mark.parametrize(
    ("attack", "correction", "thresholds"),
    [
        ("threshold", "split", None),
        ("histogram", "split", None),
        ("threshold", "bonferroni", [0.5]),
    ],
    ids=["threshold", "histogram", "bonferroni"],
)
def test_kept_outputs_are_the_estimation_samples(
    attack: str, correction: str, thresholds: list[float] | None, tmp_path: Path
) -> None:
    """``keep_outputs=True`` (what --plot uses) keeps exactly the samples the bound used."""
    import numpy as np

    import dpkit as dp
    from dpkit.audit.blackbox import audit
    from dpkit.cli.audit import plot_audit
    from dpkit.testing import seeded

    def mechanism(x: Any, n: int, rng: dp.Random) -> Any:
        return dp.noise.laplace(np.full(n, float(x)), scale=1.0, rng=rng)

    result = audit(
        mechanism,
        0.0,
        1.0,
        samples=4000,
        attack=attack,  # type: ignore[arg-type]
        correction=correction,  # type: ignore[arg-type]
        thresholds=thresholds,
        keep_outputs=True,
        rng=seeded(5),
    )
    kept = result.outputs
    assert kept is not None
    positive, negative = (
        (kept.scores_x, kept.scores_x_prime)
        if result.positive == "x"
        else (kept.scores_x_prime, kept.scores_x)
    )
    assert positive.size == result.positives and negative.size == result.negatives
    assert np.count_nonzero(negative > result.threshold) == result.false_positives
    assert np.count_nonzero(positive <= result.threshold) == result.false_negatives
    if attack == "threshold":
        np.testing.assert_array_equal(kept.x.reshape(-1), kept.scores_x)
    plain = audit(
        mechanism,
        0.0,
        1.0,
        samples=4000,
        attack=attack,  # type: ignore[arg-type]
        correction=correction,  # type: ignore[arg-type]
        thresholds=thresholds,
        rng=seeded(5),
    )
    assert plain.outputs is None and plain == result  # outputs do not enter equality
    pytest.importorskip("matplotlib")
    plot_audit(result, tmp_path / "direct.png", claimed_epsilon=1.0)
    assert (tmp_path / "direct.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="keep_outputs"):
        plot_audit(plain, tmp_path / "never.png")
