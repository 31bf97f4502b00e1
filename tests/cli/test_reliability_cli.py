"""``dpkit reliability plan``: the constructions' costs from the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import dpkit as dp
from dpkit.cli.main import app

runner = CliRunner()
PURE = ["reliability", "plan", "--epsilon", "1", "--failure-probability", "0.05", "--alpha", "3"]


def test_plan_json_matches_the_library() -> None:
    result = runner.invoke(app, [*PURE, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    rows = {row["construction"]: row for row in payload["constructions"]}
    assert set(rows) == {"absorb_failure", "repeat_until_success", "reduce_failure"}
    expected = dp.reliability.compare(
        dp.PureDP(1.0),
        failure_probability=0.05,
        alpha=3.0,
        loss_guarantee=dp.ApproxDP(1.0, 1e-6),
    )
    for row in expected:
        got = rows[row.construction]
        assert got["epsilon"] == row.guarantee.epsilon
        assert got["loss_bound"] == row.loss_bound
        assert got["failure_probability"] == row.failure_probability
    absorb = dp.reliability.absorb_failure(dp.PureDP(1.0), failure_probability=0.05)
    assert rows["absorb_failure"]["delta"] == absorb.delta
    repeat = dp.reliability.RepeatUntilSuccess(
        lambda data, rng: data,
        loss=lambda y, x: abs(y - x),
        alpha=3.0,
        failure_probability=0.05,
        guarantee=dp.PureDP(1.0),
        loss_guarantee=dp.ApproxDP(1.0, 1e-6),
    )
    assert rows["repeat_until_success"]["delta"] == repeat.guarantee.delta
    assert rows["repeat_until_success"]["loss_bound"] == repeat.loss_bound


def test_plan_text_and_approximate_base() -> None:
    result = runner.invoke(app, PURE)
    assert result.exit_code == 0, result.output
    assert "repeat_until_success" in result.output and "reduce_failure" in result.output
    approx = runner.invoke(
        app,
        ["reliability", "plan", "--epsilon", "1", "--delta", "1e-6",
         "--failure-probability", "1e-9", "--alpha", "3", "--json"],
    )  # fmt: skip
    assert approx.exit_code == 0, approx.output
    names = [row["construction"] for row in json.loads(approx.output)["constructions"]]
    assert names == ["absorb_failure", "repeat_until_success"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (["--failure-probability", "1.5"], "failure_probability"),
        (["--alpha", "-1"], "alpha"),
        (["--epsilon", "-1"], "epsilon"),
        (["--delta", "2"], "delta"),
        (["--loss-delta", "0"], "needs delta > 0"),
        (["--failure-probability", "0.999999"], "Theorem 1 needs"),
    ],
)
def test_bad_input_exits_2(change: list[str], message: str) -> None:
    args = list(PURE)
    for i in range(0, len(change), 2):
        if change[i] in args:
            args[args.index(change[i]) + 1] = change[i + 1]
        else:
            args += change[i : i + 2]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output
