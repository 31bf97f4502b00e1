"""``dpkit account dpsgd|calibrate`` in Opacus's vocabulary: epochs, batch size, dataset size."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dpkit.accounting.calibrate import dpsgd_epsilon
from dpkit.cli.main import app

runner = CliRunner()


def _run(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["account", *args, "--json"])
    assert result.exit_code == 0, result.output
    payload: dict[str, object] = json.loads(result.output)
    return payload


def test_epochs_batch_and_dataset_size() -> None:
    payload = _run(
        "dpsgd", "--epochs", "3", "--batch-size", "256", "--dataset-size", "60000",
        "--noise-multiplier", "1.1", "--delta", "1e-5",
    )  # fmt: skip
    # q = B / N; an epoch is ceil(60000 / 256) = 235 batches, as Opacus's loader makes.
    assert payload["sampling_rate"] == 256 / 60000
    assert payload["steps"] == 3 * 235
    expected = dpsgd_epsilon(
        sampling_probability=256 / 60000, noise_multiplier=1.1, steps=705, delta=1e-5
    )
    assert payload["epsilon"] == expected


def test_epochs_with_a_sampling_rate_round_up() -> None:
    # Opacus computes int(90 / 0.04) = 2249 (the float quotient is just below 2250).
    payload = _run(
        "dpsgd", "--sampling-rate", "0.04", "--epochs", "90",
        "--noise-multiplier", "1.5", "--delta", "1e-5",
    )  # fmt: skip
    assert payload["steps"] == 2250


def test_calibrate_reproduces_opacus_get_noise_multiplier() -> None:
    # opacus/tests/accountants_test.py: 1.416 (places=4) for eps 8, delta 1e-5,
    # q 0.04, 90 epochs; dpkit never asks for more noise and is within 0.1%.
    payload = _run(
        "calibrate", "--epsilon", "8", "--delta", "1e-5", "--sampling-rate", "0.04",
        "--epochs", "90",
    )  # fmt: skip
    sigma = payload["noise_multiplier"]
    assert isinstance(sigma, float)
    assert 1.416 * (1 - 1e-3) <= sigma <= 1.416 + 5e-5


def test_prv_is_the_pld_accountant() -> None:
    args = ("dpsgd", "--sampling-rate", "0.01", "--steps", "100", "--noise-multiplier", "1.0")
    prv = _run(*args, "--delta", "1e-5", "--accountant", "prv")
    pld = _run(*args, "--delta", "1e-5", "--accountant", "pld")
    assert prv["epsilon"] == pld["epsilon"] and prv["accountant"] == "prv"
    text = runner.invoke(app, ["account", *args, "--delta", "1e-5", "--accountant", "prv"])
    assert "prv (PLD accountant)" in text.output


_SIGMA = ["--noise-multiplier", "1", "--delta", "1e-5"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sampling-rate", "0.1", "--batch-size", "5", "--steps", "3"], "not both"),
        (["--batch-size", "5", "--steps", "3"], "--dataset-size"),
        (["--sampling-rate", "0.1"], "exactly one of --steps and --epochs"),
        (["--sampling-rate", "0.1", "--steps", "3", "--epochs", "1"], "exactly one"),
        (["--batch-size", "50", "--dataset-size", "10", "--epochs", "1"], "at most"),
        (["--batch-size", "0", "--dataset-size", "10", "--epochs", "1"], ">= 1"),
        (["--sampling-rate", "0.1", "--epochs", "-1"], "--epochs"),
        (["--sampling-rate", "nan", "--epochs", "1"], "--sampling-rate"),
        (["--sampling-rate", "0.1", "--epochs", "inf"], "--epochs"),
    ],
    ids=["both", "no-n", "no-length", "steps-and-epochs", "b>n", "b=0", "neg-epochs",
         "nan-rate", "inf-epochs"],
)  # fmt: skip
def test_bad_schedules_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["account", "dpsgd", *args, *_SIGMA])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_replace_relation_uses_the_replace_one_pld() -> None:
    from dpkit.accounting import GaussianEvent, PoissonSampledEvent
    from dpkit.accounting.pld import PLDAccountant

    args = ("--sampling-rate", "0.01", "--steps", "200", "--delta", "1e-5")
    payload = _run("dpsgd", *args, "--noise-multiplier", "1.0", "--accountant", "pld",
                   "--relation", "replace")  # fmt: skip
    step = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    expected = PLDAccountant(relation="replace").compose(step, count=200).get_epsilon(1e-5)
    assert payload["epsilon"] == expected and payload["relation"] == "replace"

    calibrated = _run("calibrate", *args, "--epsilon", "1.5", "--accountant", "prv",
                      "--relation", "replace")  # fmt: skip
    sigma = calibrated["noise_multiplier"]
    assert isinstance(sigma, float)

    def eps(s: float) -> float:
        event = PoissonSampledEvent(GaussianEvent(s), 0.01)
        return PLDAccountant(relation="replace").compose(event, count=200).get_epsilon(1e-5)

    assert eps(sigma) <= 1.5 < eps(sigma * 0.999)  # meets the target, and is tight


def test_replace_relation_needs_a_pld_accountant() -> None:
    args = ["--sampling-rate", "0.01", "--steps", "5", "--relation", "replace", *_SIGMA]
    result = runner.invoke(app, ["account", "dpsgd", *args])
    assert result.exit_code == 2 and "--accountant pld or prv" in result.output
    bad = runner.invoke(app, ["account", "dpsgd", *args[:4], "--relation", "swap", *_SIGMA])
    assert bad.exit_code == 2 and "--relation must be one of" in " ".join(bad.output.split())


def test_fpr_bounds_every_membership_attack() -> None:
    from dpkit.accounting import GaussianEvent, PoissonSampledEvent
    from dpkit.accounting.pld import PLDAccountant
    from dpkit.accounting.tradeoff import max_true_positive_rate

    args = ("--sampling-rate", "0.01", "--steps", "100", "--noise-multiplier", "1.0")
    payload = _run("dpsgd", *args, "--delta", "1e-5", "--accountant", "pld",
                   "--fpr", "0.001", "--fpr", "0.1")  # fmt: skip
    step = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    expected = max_true_positive_rate(PLDAccountant().compose(step, count=100), [0.001, 0.1])
    assert payload["max_true_positive_rate"] == {"0.001": expected[0], "0.1": expected[1]}
    bad = runner.invoke(app, ["account", "dpsgd", *args, "--delta", "1e-5", "--fpr", "nan"])
    assert bad.exit_code == 2 and "--fpr must be" in bad.output
