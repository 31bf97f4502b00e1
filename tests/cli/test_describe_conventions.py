"""Command-line conventions of ``dpkit describe`` (issue 14, items 7, 9 and 10): version,
``python -m dpkit``, ``--json -``, JSON errors, ``--open``, reading options, help
text, the progress bar and ``--dry-run``."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

import dpkit as dp
from dpkit.analytics.session import Session
from dpkit.cli import _output
from dpkit.cli.main import app
from dpkit.errors import EngineError

runner = CliRunner()
BUDGET = dp.ApproxDP(1.0, 1e-6)


@pytest.fixture
def csv_file(tmp_path: Path, write_spend_csv: Callable[..., Path]) -> Path:
    return write_spend_csv(tmp_path / "spend.csv", rows=3000, persons=800)


def describe(*args: str) -> Any:
    return runner.invoke(app, ["describe", *args])


def spent(path: Path, ledger: Path, unit: str | None = "person") -> dp.Guarantee:
    return Session.from_path(path, privacy_unit=unit, budget=BUDGET, ledger=ledger).spent


# ------------------------------------------------------------------ version, module


def test_version_option() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"dpkit {dp.__version__}\n"


def test_python_dash_m_dpkit_runs_the_command_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dpkit", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"dpkit {dp.__version__}"
    proc = subprocess.run(
        [sys.executable, "-m", "dpkit", "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and "describe" in proc.stdout and "dpkit" in proc.stdout


# ------------------------------------------------------------------ JSON to stdout


def test_json_dash_writes_only_json_to_stdout(
    csv_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "r.html"
    args = [str(csv_file), "--privacy-unit", "person", "--seed", "2", "--report", str(report)]
    result = describe(*args, "--json", "-")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)  # the whole of stdout is one JSON document
    assert [c["name"] for c in payload["columns"]] == ["plan", "spend"]
    assert not (tmp_path / "-").exists()
    assert "HTML report written" in result.stderr  # messages go to stderr
    assert "Budget split" not in result.output  # no terminal tables


def test_json_to_a_file_keeps_the_terminal_summary(csv_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = describe(str(csv_file), "--privacy-unit", "person", "--seed", "2", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert "Budget split" in result.stdout and "JSON written" in result.stdout
    assert json.loads(out.read_text())["privacy_unit"] == "person"


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("target", ["-", "file"])
def test_errors_under_json_are_json(csv_file: Path, tmp_path: Path, target: str) -> None:
    json_target = "-" if target == "-" else str(tmp_path / "s.json")
    result = describe(str(csv_file), "--columns", "nope", "--json", json_target)
    assert result.exit_code == 2
    stream = result.stdout if target == "-" else result.stderr
    error = json.loads(stream)
    assert set(error) == {"error", "message"}
    assert error["error"] == "DataError" and "Available columns" in error["message"]
    other = result.stderr if target == "-" else result.stdout
    assert other == ""
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "No such option: --bogus"),
        (["--epsilon", "abc"], "Invalid value for '--epsilon'"),
        (["--max-rows", "1.5"], "Invalid value for '--max-rows'"),
    ],
    ids=["unknown-option", "bad-float", "bad-int"],
)
@pytest.mark.parametrize("target", ["-", "file", "equals"])
def test_usage_errors_under_json_are_json(
    csv_file: Path, tmp_path: Path, target: str, args: list[str], message: str
) -> None:
    # Click refuses these before the command runs; under --json they come out as the
    # other errors do: one JSON object, where the JSON would go, exit code 2.
    path = str(tmp_path / "s.json")
    json_args = {"-": ["--json", "-"], "file": ["--json", path], "equals": [f"--json={path}"]}
    result = describe(str(csv_file), *json_args[target], *args)
    assert result.exit_code == 2
    stream = result.stdout if target == "-" else result.stderr
    error = json.loads(stream)
    assert error == {"error": "UsageError", "message": error["message"]}
    assert error["message"].startswith(message)
    assert (result.stderr if target == "-" else result.stdout) == ""
    assert not (tmp_path / "s.json").exists()


def test_usage_errors_without_json_stay_click_messages(csv_file: Path) -> None:
    result = describe(str(csv_file), "--bogus")
    assert result.exit_code == 2
    assert result.stdout == "" and "No such option: --bogus" in result.stderr
    assert not result.stderr.lstrip().startswith("{")


def test_a_missing_argument_or_json_value_is_a_json_error() -> None:
    result = describe("--json", "-")
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "error": "UsageError",
        "message": "Missing argument 'data'.",
    }
    result = runner.invoke(app, ["demo", "--json"])  # JSON asked, no target: stderr
    assert result.exit_code == 2
    assert json.loads(result.stderr)["message"] == "Option '--json' requires an argument."
    result = runner.invoke(app, ["demo", "--json", "-", "--people", "many"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"] == "UsageError"


def test_plain_errors_go_to_stderr(csv_file: Path) -> None:
    result = describe(str(csv_file), "--epsilon", "-1")
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.startswith("error:")


@pytest.mark.parametrize("json_target", [None, "-"])
def test_engine_text_never_reaches_the_user(
    csv_file: Path, monkeypatch: pytest.MonkeyPatch, json_target: str | None
) -> None:
    def failing(*args: Any, **kwargs: Any) -> Any:
        raise EngineError("Conversion Error: Original Line: 'alice,secret,42'")

    monkeypatch.setattr(Session, "evaluate", failing)
    extra = ["--json", json_target] if json_target else []
    result = describe(str(csv_file), "--privacy-unit", "person", *extra)
    assert result.exit_code == 2
    assert "secret" not in result.output and "Original Line" not in result.output
    assert _output.ENGINE_MESSAGE in result.output
    if json_target:
        assert json.loads(result.stdout) == {
            "error": "EngineError",
            "message": _output.ENGINE_MESSAGE,
        }


# ------------------------------------------------------------------ --open


def test_open_without_a_browser_fails_before_spending(
    csv_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_browser(*args: Any) -> Any:
        raise webbrowser.Error("could not locate runnable browser")

    monkeypatch.setattr(webbrowser, "get", no_browser)
    ledger, report = tmp_path / "l.sqlite", tmp_path / "r.html"
    result = describe(
        str(csv_file), "--privacy-unit", "person", "--ledger", str(ledger),
        "--report", str(report), "--open",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "no web browser" in result.stderr
    assert not report.exists()
    assert spent(csv_file, ledger) == dp.ZCDP(0.0)


def test_open_without_report_is_refused(csv_file: Path) -> None:
    result = describe(str(csv_file), "--open")
    assert result.exit_code == 2 and "--report" in result.stderr


def test_a_browser_that_does_not_start_exits_non_zero(
    csv_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webbrowser, "get", lambda *a: object())
    monkeypatch.setattr(webbrowser, "open", lambda *a, **k: False)
    report = tmp_path / "r.html"
    result = describe(str(csv_file), "--seed", "1", "--report", str(report), "--open")
    assert result.exit_code == 1
    assert report.is_file() and "did not start" in result.stderr


def test_open_launches_the_browser_on_the_report(
    csv_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "get", lambda *a: object())
    monkeypatch.setattr(webbrowser, "open", lambda url, **k: opened.append(url) or True)
    report = tmp_path / "r.html"
    result = describe(str(csv_file), "--seed", "1", "--report", str(report), "--open")
    assert result.exit_code == 0, result.output
    assert opened == [report.resolve().as_uri()]


# ------------------------------------------------------------------ column and file options


def test_exclude_is_repeatable(csv_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = describe(str(csv_file), "--seed", "1", "--exclude", "person", "--exclude", "plan",
                      "--json", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [c["name"] for c in json.loads(out.read_text())["columns"]] == ["spend"]
    result = describe(str(csv_file), "--exclude", "nope")
    assert result.exit_code == 2 and "Available columns" in result.stderr


def test_encoding_delimiter_and_na_values(tmp_path: Path) -> None:
    lines = ["ville;revenu;âge"] + [
        f"{city};{'NA' if i % 9 == 0 else 1000 + i};{20 + i % 50}"
        for i, city in enumerate(["Genève", "Zürich", "Bâle"] * 400)
    ]
    path = tmp_path / "fr.csv"
    path.write_bytes(("\n".join(lines) + "\n").encode("latin-1") + b"\x85\x96;1;2\n")
    out = tmp_path / "s.json"
    args = [str(path), "--seed", "1", "--epsilon", "4", "--json", str(out)]
    result = describe(*args, "--encoding", "latin-1", "--delimiter", ";", "--na-values", "NA")
    assert result.exit_code == 0, result.output
    kinds = {c["name"]: c["kind"] for c in json.loads(out.read_text())["columns"]}
    assert kinds == {"ville": "categorical", "revenu": "numeric", "âge": "numeric"}
    # Without --na-values the 'NA' texts make the sniffer call the column text.
    result = describe(*args, "--encoding", "latin-1", "--delimiter", ";")
    kinds = {c["name"]: c["kind"] for c in json.loads(out.read_text())["columns"]}
    assert result.exit_code == 0 and kinds["revenu"] == "categorical"


@pytest.mark.parametrize(
    ("args", "parameter"),
    [
        (["--encoding", "cp1252"], "'encoding'"),
        (["--delimiter", ";;"], "'delimiter'"),
        (["--types", "age=NOPE"], "'NOPE'"),
        (["--types", "age"], "COLUMN=TYPE"),
    ],
    ids=["encoding", "delimiter", "type", "no-type"],
)
def test_options_are_checked_before_the_file(
    tmp_path: Path, args: list[str], parameter: str
) -> None:
    # The file does not even exist: the option's error comes first.
    result = describe(str(tmp_path / "absent.csv"), *args, "--json", "-")
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["error"] == "InvalidParameter" and parameter in error["message"]


def test_types_is_the_name_and_schema_an_alias(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("code,x\n" + "".join(f"{i % 7},{i}\n" for i in range(2000)))
    for option in ("--types", "--schema"):
        out = tmp_path / f"{option}.json"
        result = describe(str(path), "--seed", "1", option, "code=VARCHAR", "--json", str(out))
        assert result.exit_code == 0, result.output
        kinds = {c["name"]: c["kind"] for c in json.loads(out.read_text())["columns"]}
        assert kinds["code"] == "categorical"


def test_csv_options_on_parquet_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(path)
    result = describe(str(path), "--delimiter", ";")
    assert result.exit_code == 2 and "apply to CSV files" in result.stderr


# ------------------------------------------------------------------ empty files


def test_a_zero_byte_file_is_refused_before_any_charge(tmp_path: Path) -> None:
    path, ledger = tmp_path / "empty.csv", tmp_path / "l.sqlite"
    path.write_bytes(b"")
    result = describe(str(path), "--ledger", str(ledger), "--json", "-")
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["error"] == "DataError" and "no header" in error["message"]
    assert "column0" not in result.output
    assert not ledger.exists()  # not even opened


def test_a_header_only_file_is_summarised_without_crashing(tmp_path: Path) -> None:
    # Zero rows is a fact about the data: it is not refused (that would reveal it for
    # free); the summary is released like any other.
    path, out = tmp_path / "header.csv", tmp_path / "s.json"
    path.write_text("person,plan,spend\n")
    result = describe(str(path), "--privacy-unit", "person", "--seed", "1",
                      "--types", "spend=DOUBLE", "--json", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert {c["name"] for c in json.loads(out.read_text())["columns"]} == {"plan", "spend"}


# ------------------------------------------------------------------ help text


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[Any]:
    found = [(path, command)]
    if hasattr(command, "commands"):  # a group (Typer vendors Click)
        for name, sub in command.commands.items():
            found.extend(_commands(sub, (*path, name)))
    return found


def test_help_text_has_no_restructured_text() -> None:
    root = typer.main.get_command(app)
    commands = _commands(root)
    assert len(commands) >= 6
    rst = re.compile(r"``|:(func|class|mod|meth|attr|data):`")
    for path, _ in commands:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, path
        assert not rst.search(result.output), (path, rst.search(result.output))


# ------------------------------------------------------------------ progress


def test_no_progress_bar_when_stderr_is_not_a_terminal(csv_file: Path) -> None:
    result = describe(str(csv_file), "--privacy-unit", "person", "--seed", "1")
    assert result.exit_code == 0, result.output
    assert "summarising" not in result.output and "columns" not in result.stderr
    assert result.stderr == ""


@pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX")
def test_a_progress_bar_is_drawn_on_a_terminal(csv_file: Path, tmp_path: Path) -> None:
    import pty

    leader, follower = pty.openpty()
    out = tmp_path / "s.json"
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpkit", "describe", str(csv_file), "--privacy-unit",
         "person", "--seed", "1", "--json", "-"],
        stdout=subprocess.PIPE, stderr=follower, env=env,
    )  # fmt: skip
    os.close(follower)
    drawn, deadline = b"", time.monotonic() + 120
    while time.monotonic() < deadline:
        if not select.select([leader], [], [], 1.0)[0]:
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        drawn += chunk
    stdout, _ = proc.communicate(timeout=120)
    os.close(leader)
    assert proc.returncode == 0
    text = drawn.decode("utf-8", "replace")
    assert "summarising" in text and "columns" in text
    assert json.loads(stdout)["privacy_unit"] == "person"  # stdout stays pure JSON
    assert not out.exists()


# ------------------------------------------------------------------ dry run


def test_dry_run_prints_the_plan_and_spends_nothing(
    csv_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, report = tmp_path / "l.sqlite", tmp_path / "r.html"
    Session.from_path(csv_file, privacy_unit="person", budget=BUDGET, ledger=ledger).evaluate(
        dp.Query().bound(max_rows=10).count(), budget=0.25
    )
    before = spent(csv_file, ledger)

    def no_query(*args: Any, **kwargs: Any) -> Any:
        pytest.fail("a query ran during --dry-run")

    monkeypatch.setattr(Session, "evaluate", no_query)
    result = runner.invoke(
        app,
        ["describe", str(csv_file), "--privacy-unit", "person", "--ledger", str(ledger),
         "--report", str(report), "--dry-run"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Dry run: nothing was spent" in out
    for expected in ("rows", "plan", "categorical", "spend", "numeric", "33.3%"):
        assert expected in out
    assert "ranks" in out and "noisy count ≥" in out  # expected accuracy from explain
    assert not report.exists()
    assert spent(csv_file, ledger) == before


def test_dry_run_json(csv_file: Path) -> None:
    result = describe(str(csv_file), "--privacy-unit", "person", "--dry-run", "--json", "-")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["dry_run"] is True and plan["spent"] is False
    assert [p["target"] for p in plan["plan"]] == ["rows", "plan", "spend"]
    assert sum(p["share"] for p in plan["plan"]) == pytest.approx(1.0)
    total = sum(p["budget"]["rho"] for p in plan["plan"])
    assert total <= plan["remaining"]["rho"]
    assert plan["queries"] == 1 + 1 + 4
    rows = plan["plan"][0]["expected_accuracy"]
    assert rows[0].startswith("rows ±") and rows[1].startswith("persons ±")
    # A DOUBLE column may spend part of its share on the integer check; says so.
    spend = plan["plan"][2]["expected_accuracy"]
    assert any("values that are not integers" in line for line in spend)
    result = describe(str(csv_file), "--dry-run", "--json", "-")  # person: a BIGINT
    person = next(p for p in json.loads(result.stdout)["plan"] if p["target"] == "person")
    assert not any("not integers" in line for line in person["expected_accuracy"])


def test_demo_follows_the_same_conventions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the demo's default report path
    result = runner.invoke(app, ["demo", "--people", "500", "--seed", "1", "--json", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["privacy_unit"] == "user_id"
    assert (tmp_path / "dpkit-demo-report.html").is_file()
    result = runner.invoke(app, ["demo", "--epsilon", "-1", "--json", "-"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"] == "InvalidParameter"

    def no_browser(*args: Any) -> Any:
        raise webbrowser.Error("none")

    monkeypatch.setattr(webbrowser, "get", no_browser)
    result = runner.invoke(app, ["demo", "--people", "500", "--open"])
    assert result.exit_code == 2 and "no web browser" in result.stderr


# ------------------------------------------------------------------ outputs checked first


@pytest.mark.parametrize("option", ["--json", "--report"])
@pytest.mark.parametrize("where", ["missing-folder", "a-folder"])
def test_an_output_that_cannot_be_written_is_refused_before_anything_is_spent(
    csv_file: Path, tmp_path: Path, option: str, where: str
) -> None:
    # Issue 28: an unwritable --json path failed after the whole run had been charged.
    folder = tmp_path / "folder"
    folder.mkdir()
    target = {"missing-folder": tmp_path / "nope" / "out", "a-folder": folder}[where]
    ledger = tmp_path / "ledger.db"
    result = describe(
        str(csv_file), "--privacy-unit", "person", "--ledger", str(ledger), option, str(target)
    )
    assert result.exit_code == 2, result.output
    assert option in result.output
    assert (
        not ledger.exists()
        or not Session.from_path(
            csv_file, privacy_unit="person", budget=BUDGET, ledger=ledger
        ).history
    )
