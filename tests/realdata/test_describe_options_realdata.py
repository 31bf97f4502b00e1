"""``dpkit describe --date-range`` and ``--weight`` on a real table (issue 14, items 5
and 10): vega_datasets' Seattle weather (1,461 days, 2012-01-01 to 2015-12-31, a DATE
column and four DOUBLE columns), written to CSV and run through the command line at
(epsilon, delta) = (1, 1e-6) with seeded generators.

Checks: every released date lies inside the public range given (the range query's
bins are the years of that range, so a date outside would need a spurious bin, which
happens with probability about 3e-7 per bin); a weight of 4 on ``temp_max`` gives it
4/10 of the budget instead of 1/7 in the budget table, and shrinks its count interval by
sqrt(1/7 / 0.4) = 0.60 (Gaussian noise: the half-width depends on the budget only) and
its mean interval too (median over the seeds); every count and mean interval of the
weighted column covers the truth or (mean) flags the clamping, at 95% each over
``SEEDS`` seeds x 2 intervals: misses above the binomial's 1 - 1e-6 quantile fail.
"""

from __future__ import annotations

import json
import warnings
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom
from typer.testing import CliRunner

from dpkit.cli.main import app

SEEDS = 4
runner = CliRunner()


def _epoch(day: date) -> float:
    return float((day - date(1970, 1, 1)).days * 86_400)


@pytest.fixture(scope="module")
def weather(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, Path]:
    from vega_datasets import data

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = data.seattle_weather()
    frame["date"] = frame["date"].dt.date  # a DATE column
    path = tmp_path_factory.mktemp("weather") / "seattle-weather.csv"
    frame.to_csv(path, index=False)
    return frame, path


def _run(path: Path, seed: int, out: Path, *extra: str) -> dict[str, Any]:
    result = runner.invoke(
        app,
        ["describe", str(path), "--seed", str(seed), "--types", "date=DATE", *extra,
         "--json", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(out.read_text())
    return payload


def _stats(payload: dict[str, Any], column: str) -> dict[str, dict[str, Any]]:
    found = next(c for c in payload["columns"] if c["name"] == column)
    return {s["name"]: s for s in found["statistics"]}


def test_date_range_and_weight_on_seattle_weather(
    weather: tuple[pd.DataFrame, Path], tmp_path: Path
) -> None:
    frame, path = weather
    start, stop = _epoch(date(2012, 1, 1)), _epoch(date(2016, 1, 1))
    options = ("--date-range", "2012-01-01:2016-01-01")
    widths: dict[str, list[tuple[float, float]]] = {"equal": [], "weighted": []}
    misses = checked = 0
    for seed in range(SEEDS):
        for label, weight in (("equal", ()), ("weighted", ("--weight", "temp_max=4"))):
            payload = _run(path, 100 + seed, tmp_path / f"{label}{seed}.json", *options, *weight)
            day = next(c for c in payload["columns"] if c["name"] == "date")
            assert day["kind"] == "date"
            dates = [
                s["estimate"]
                for s in day["statistics"]
                if s.get("unit") == "epoch_seconds" and s["estimate"] is not None
            ]
            assert dates and all(start <= d <= stop for d in dates), (seed, dates)
            stats = _stats(payload, "temp_max")
            count, mean = stats["count"], stats["mean"]
            widths[label].append(
                ((count["ci_high"] - count["ci_low"]) / 2, (mean["ci_high"] - mean["ci_low"]) / 2)
            )
            share = sum(
                b["fraction"] for b in payload["budget_split"] if b["label"].startswith("temp_max:")
            )
            assert share == pytest.approx(0.4 if weight else 1 / 7, rel=1e-9)
            if weight:
                truth = frame["temp_max"]
                checked += 2
                misses += not count["ci_low"] <= truth.notna().sum() <= count["ci_high"]
                flagged = "may move up to" in (mean.get("caveat") or "") and not mean[
                    "caveat"
                ].startswith("clamping to the range may move up to 0.0%")
                covered = mean["ci_low"] <= truth.mean() <= mean["ci_high"]
                misses += not (covered or flagged)
    assert misses <= int(binom.ppf(1 - 1e-6, checked, 0.05))
    equal, weighted = np.median(widths["equal"], axis=0), np.median(widths["weighted"], axis=0)
    expected = (1 / 7 / 0.4) ** 0.5
    assert weighted[0] / equal[0] == pytest.approx(expected, rel=0.05)
    assert weighted[1] < 0.85 * equal[1]
