"""``dpkit describe --weight COL=W`` and ``--date-range START:END`` (issue 14, items 5
and 10): parsed before the file is read, passed to describe's ``weights`` and
``date_range``, shown by ``--dry-run`` and in the report's budget table."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import dpkit as dp
from dpkit.analytics.session import Session
from dpkit.cli._options import date_range_from_option, weights_from_options
from dpkit.cli.main import app

runner = CliRunner()
BUDGET = dp.ApproxDP(1.0, 1e-6)


@pytest.fixture
def csv_file(tmp_path: Path, write_spend_csv: Callable[..., Path]) -> Path:
    return write_spend_csv(tmp_path / "spend.csv", rows=3000, persons=800)


@pytest.fixture
def dated_csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(4)
    n = 3000
    day = pd.Timestamp("2012-01-01") + pd.to_timedelta(rng.integers(0, 1400, n), "D")
    path = tmp_path / "dated.csv"
    pd.DataFrame({"day": day.date, "amount": rng.gamma(2.0, 10.0, n)}).to_csv(path, index=False)
    return path


def describe(*args: str) -> Any:
    return runner.invoke(app, ["describe", *args])


def _epoch(day: date) -> float:
    return float((day - date(1970, 1, 1)).days * 86_400)


# ------------------------------------------------------------------ parsing


def test_weight_options_parse() -> None:
    assert weights_from_options(None) is None
    assert weights_from_options(["spend=4", " plan = 0.5 ", "a=b=2"]) == {
        "spend": 4.0,
        "plan": 0.5,
        "a=b": 2.0,  # the last '=' separates the weight
    }


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("spend", "COLUMN=WEIGHT"),
        ("=4", "COLUMN=WEIGHT"),
        ("spend=", "COLUMN=WEIGHT"),
        ("spend=four", "must be a number"),
        ("spend=0", "positive finite"),
        ("spend=-2", "positive finite"),
        ("spend=nan", "positive finite"),
        ("spend=inf", "positive finite"),
    ],
)
def test_bad_weight_options_exit_2_before_the_file_is_read(
    tmp_path: Path, item: str, message: str
) -> None:
    result = describe(str(tmp_path / "absent.csv"), "--weight", item, "--json", "-")
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)
    assert error["error"] == "InvalidParameter" and message in error["message"]


def test_a_column_weighted_twice_is_refused(tmp_path: Path) -> None:
    result = describe(str(tmp_path / "absent.csv"), "--weight", "a=2", "--weight", "a=3")
    assert result.exit_code == 2 and "twice" in result.stderr


def test_date_range_option_parses() -> None:
    assert date_range_from_option(None) is None
    assert date_range_from_option("2012-01-01:2016-01-01") == (date(2012, 1, 1), date(2016, 1, 1))


@pytest.mark.parametrize(
    "text",
    ["2012-01-01", "2016-01-01:2012-01-01", "2012-01-01:2012-01-01", "2012-13-01:2016-01-01",
     "2012-01-01:2016-01-01:2017-01-01", "2012-01-01T10:00:2016-01-01", "a:b", ":"],
    ids=["one-date", "reversed", "empty", "bad-month", "three", "datetime", "text", "colon"],
)  # fmt: skip
def test_bad_date_ranges_exit_2_before_the_file_is_read(tmp_path: Path, text: str) -> None:
    result = describe(str(tmp_path / "absent.csv"), "--date-range", text, "--json", "-")
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)
    assert error["error"] == "InvalidParameter" and "--date-range" in error["message"]


# ------------------------------------------------------------------ checked against the file


@pytest.mark.parametrize(
    ("item", "error", "message"),
    [
        ("nope=2", "DataError", "Available columns"),
        ("person=2", "InvalidParameter", "privacy unit"),
        ("plan=2", "InvalidParameter", "not among the columns summarised"),
    ],
    ids=["unknown", "privacy-unit", "excluded"],
)
def test_a_weight_for_a_column_not_summarised_spends_nothing(
    csv_file: Path, tmp_path: Path, item: str, error: str, message: str
) -> None:
    ledger = tmp_path / "l.sqlite"
    args = [str(csv_file), "--privacy-unit", "person", "--exclude", "plan", "--ledger", str(ledger)]
    for extra in ([], ["--dry-run"]):
        result = describe(*args, *extra, "--weight", item, "--json", "-")
        assert result.exit_code == 2, result.output
        payload = json.loads(result.stdout)
        assert payload["error"] == error and message in payload["message"]
    spent = Session.from_path(csv_file, privacy_unit="person", budget=BUDGET, ledger=ledger).spent
    assert spent == dp.ZCDP(0.0)


def test_weight_gives_the_column_its_share_and_spends_the_budget(
    csv_file: Path, tmp_path: Path
) -> None:
    outs = {}
    for label, extra in (("equal", []), ("weighted", ["--weight", "spend=4"])):
        out = tmp_path / f"{label}.json"
        # --max-rows given: no share goes to choosing it, so the split is the weights'.
        result = describe(str(csv_file), "--privacy-unit", "person", "--max-rows", "10",
                          "--seed", "3", *extra, "--json", str(out))  # fmt: skip
        assert result.exit_code == 0, result.output
        outs[label] = json.loads(out.read_text())
    weighted = outs["weighted"]
    # rows 1, plan 1, spend 4: spend gets 4/6 of the budget, in the budget table.
    split = weighted["budget_split"]
    spend_share = sum(b["fraction"] for b in split if b["label"].startswith("spend: "))
    assert spend_share == pytest.approx(4 / 6, rel=1e-9)
    plan_share = sum(b["fraction"] for b in split if b["label"].startswith("plan"))
    assert plan_share == pytest.approx(1 / 6, rel=1e-9)
    assert sum(b["fraction"] for b in split) == pytest.approx(1.0)
    # Both runs spend the Session's whole budget (its query currency, rho).
    total = Session.from_path(csv_file, privacy_unit="person", budget=BUDGET).remaining
    for payload in outs.values():
        assert payload["budget"]["rho"] == pytest.approx(total.rho, rel=1e-9)  # type: ignore[attr-defined]
    assert any("spend 4 (66.7%)" in note for note in weighted["notes"])

    def count_half_width(payload: dict[str, Any]) -> float:
        column = next(c for c in payload["columns"] if c["name"] == "spend")
        count = next(s for s in column["statistics"] if s["name"] == "count")
        return float(count["ci_high"] - count["ci_low"]) / 2

    # Share 1/3 -> 4/6 (twice): the count's Gaussian half-width shrinks by sqrt(2).
    ratio = count_half_width(weighted) / count_half_width(outs["equal"])
    assert ratio == pytest.approx(2**-0.5, rel=0.05)


def test_dry_run_shows_the_weights_and_per_column_shares(csv_file: Path) -> None:
    args = [str(csv_file), "--privacy-unit", "person", "--dry-run", "--weight", "spend=4"]
    result = runner.invoke(app, ["describe", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "weight" in result.stdout and "66.7%" in result.stdout and "16.7%" in result.stdout
    result = describe(*args, "--json", "-")
    plan = json.loads(result.stdout)["plan"]
    shares = {p["target"]: (p["weight"], p["share"]) for p in plan}
    assert shares["spend"] == (4.0, pytest.approx(4 / 6))
    assert shares["plan"] == (1.0, pytest.approx(1 / 6))
    assert shares["rows"] == (1.0, pytest.approx(1 / 6))
    remaining = json.loads(result.stdout)["remaining"]["rho"]
    assert sum(p["budget"]["rho"] for p in plan) <= remaining
    spend = next(p for p in plan if p["target"] == "spend")
    equal = json.loads(describe(*args[:-2], "--json", "-").stdout)["plan"]
    equal_spend = next(p for p in equal if p["target"] == "spend")
    # The predicted count accuracy follows the share.
    assert spend["budget"]["rho"] == pytest.approx(2 * equal_spend["budget"]["rho"], rel=1e-9)
    assert spend["expected_accuracy"] != equal_spend["expected_accuracy"]


def test_date_range_bounds_the_released_dates(dated_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = describe(str(dated_csv), "--seed", "2", "--date-range", "2012-01-01:2016-01-01",
                      "--json", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    day = next(c for c in json.loads(out.read_text())["columns"] if c["name"] == "day")
    values = [s["estimate"] for s in day["statistics"] if s.get("unit") == "epoch_seconds"]
    assert values
    # The range query's bins: the years of the range, plus one either side.
    for value in values:
        assert _epoch(date(2011, 1, 1)) <= value <= _epoch(date(2017, 1, 1))
    assert any("2012-01-01" in note and "2016-01-01" in note for note in day["notes"])
    result = describe(str(dated_csv), "--dry-run", "--date-range", "2012-01-01:2016-01-01")
    assert "Public date range (dates outside are clamped): 2012-01-01 to 2016-01-01" in (
        result.stdout
    )
    args = (str(dated_csv), "--dry-run", "--date-range", "2012-01-01:2016-01-01")
    plan = json.loads(describe(*args, "--json", "-").stdout)
    assert plan["date_range"] == ["2012-01-01", "2016-01-01"]
