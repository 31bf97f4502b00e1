"""An attacker's view of the encoding check: a byte that does not decode, planted in
the data.

The threat model (DESIGN.md, "Threat model of the Session"): whether a Session opens,
and what every query does, may depend on the schema and public parameters only.
``dpkit.analytics._csv_encoding`` refuses a CSV file whose start does not decode in the
chosen encoding; that start (the first ``ENCODING_SAMPLE_BYTES``, 64 KiB, a public
constant) is treated like the sniffer's sample, whose findings (dialect, types) are
public. The attack: whoever can put one row in the data (a form field, a log line)
writes a Latin-1 byte into a UTF-8 file, next to a secret, anywhere past the sample.

What holds, checked below on real files:

- Past the sample, the byte changes nothing the analyst sees: the file opens (it is
  never refused for it), the planted line is skipped by DuckDB's reader when the file
  is copied at creation, and every query of a fixed loop answers as on the neighbour
  without the line -- same outcomes, same spend, no lock, no error after a charge.
- Whether a file is refused depends on its first 64 KiB only: files that share them
  and differ after (clean, planted bytes, byte-order marks, NUL bytes, a cut character,
  megabytes of junk) are all opened, or all refused with the same message.
- A refused file is refused at creation, before a Session exists: nothing is charged,
  a ledger holds no spend, and the message quotes no row.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._csv_encoding import ENCODING_SAMPLE_BYTES
from dpkit.analytics._sources import open_file
from dpkit.cli.main import app
from dpkit.errors import DataError
from dpkit.testing import session_transcript

MARKER = "SECRET-MARKER-91c2"
CITIES = ("north", "south", "east")
ROWS = 12_000  # about 200 KB: the sample is the first third
#: A Latin-1 "©": never valid in UTF-8 (a continuation byte where a character starts).
BAD = b"\xa9"

runner = CliRunner()


def rows() -> bytes:
    lines = [b"person,age,city"]
    lines += [f"{i},{20 + i % 50},{CITIES[i % 3]}".encode() for i in range(ROWS)]
    return b"\n".join(lines) + b"\n"


def planted(at: int, bad: bytes = BAD) -> bytes:
    """``rows()`` with one more line whose ``bad`` bytes start at byte ``at``."""
    data = rows()
    lead = b"90000,30,"
    cut = data.rindex(b"\n", 0, at - len(lead) + 1) + 1  # a line start at or before
    line = lead + b"x" * (at - cut - len(lead)) + bad + f" {MARKER}\n".encode()
    out = data[:cut] + line + data[cut:]
    assert out[at : at + len(bad)] == bad
    return out


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def queries() -> list[Query]:
    keys = KeySet.from_values(city=list(CITIES))
    return [
        Query().count(),
        Query().mean("age", bounds=(0.0, 100.0)),
        Query().group_by("city", keys=keys).count(),
        Query().median("age", bounds=(0.0, 100.0)),
        Query().max("age", bounds=(0.0, 100.0)),
        Query().filter("city = 'north'").sum("age", bounds=(0.0, 100.0)),
        Query().mean("city", bounds=(0.0, 1.0)),  # a string column: refused, free
    ]


# ------------------------------------------------------------------ past the sample


@pytest.mark.parametrize(
    "at",
    [ENCODING_SAMPLE_BYTES, ENCODING_SAMPLE_BYTES + 1, 150_000],
    ids=["first-byte-past", "second-byte-past", "far-past"],
)
def test_a_bad_byte_past_the_sample_changes_nothing_observable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], at: int
) -> None:
    # Same file name in two folders: no message can differ by the path.
    base = write(tmp_path / "base" / "visits.csv", rows())
    neighbour = write(tmp_path / "neighbour" / "visits.csv", planted(at))
    seen = []
    for path in (base, neighbour):
        session = dp.Session.from_path(path, budget=dp.PureDP(10.0), rng=4)
        seen.append(session_transcript(session, queries(), budget=dp.PureDP(1.0)))
    assert seen[0] == seen[1]
    assert seen[0][:6] == ["ok"] * 6 and seen[0][-1] == "spent PureDP(epsilon=6.0)"
    assert all(MARKER not in text for text in seen[1])
    assert MARKER not in "".join(capsys.readouterr())


def test_the_planted_line_is_skipped_when_the_file_is_opened(tmp_path: Path) -> None:
    # The line is dropped by DuckDB's reader when the file is copied at creation
    # (ignore_errors), so no query reads it later.
    path = write(tmp_path / "visits.csv", planted(ENCODING_SAMPLE_BYTES + 10))
    opened = open_file(path, schema=None, owner="test")
    table = opened.connection.execute(f"SELECT * FROM {opened.relation}").fetchall()
    assert len(table) == ROWS and not any(MARKER in str(row) for row in table)
    # And the Session answers and charges as usual (eps = 5, k = 3: 6.1e-7).
    session = dp.Session.from_path(path, budget=dp.PureDP(5.0), rng=7)
    count = session.evaluate(Query().count(), budget=dp.PureDP(5.0)).dataframe["count"][0]
    assert abs(count - ROWS) < 3 and session.spent == dp.PureDP(5.0)


# ------------------------------------------------------------------ the sample decides

TAILS = {
    "clean": b"",
    "latin-1": b"1,30,Gen\xe8ve\n" * 50,
    "utf-16-bom": codecs.BOM_UTF16_LE + "1,30,x\n".encode("utf-16-le"),
    "nul": b"1,30,\x00\n",
    "cut-character": b"1,30,\xc3",
    "junk-3mb": bytes(range(256)) * 12_000,
}


@pytest.mark.parametrize("head", ["clean", "bad-at-100", "bad-at-last-byte"])
def test_whether_a_file_is_refused_depends_on_its_first_64_kib_only(
    tmp_path: Path, head: str
) -> None:
    sample = {
        "clean": rows(),
        "bad-at-100": planted(100),
        "bad-at-last-byte": planted(ENCODING_SAMPLE_BYTES - 1),
    }[head][:ENCODING_SAMPLE_BYTES]
    sample = sample[: sample.rindex(b"\n") + 1] if head == "clean" else sample
    outcomes = set()
    for name, tail in TAILS.items():
        rest = rows()[len(sample) :] if head == "clean" else b"\n" + rows()[20:]
        path = write(tmp_path / name / "visits.csv", sample + rest + tail)
        try:
            dp.Session.from_path(path, budget=dp.PureDP(1.0))
            outcomes.add("opened")
        except DataError as err:
            assert MARKER not in str(err)
            outcomes.add(str(err))
    assert len(outcomes) == 1
    (outcome,) = outcomes
    assert (outcome == "opened") == (head == "clean")
    if head != "clean":
        # Refused without saying where the bad byte is (it would point at a row).
        assert "a byte in its start does not decode" in outcome
        assert "--encoding latin-1" in outcome


def test_a_refused_file_charges_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "visits.csv", planted(1000))
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "summary.json"
    with pytest.raises(DataError, match="nothing was spent") as refused:
        dp.Session.from_path(path, budget=dp.PureDP(1.0), ledger=ledger)
    assert MARKER not in str(refused.value)
    assert refused.value.__cause__ is None
    result = runner.invoke(
        app,
        ["describe", str(path), "--epsilon", "1", "--ledger", str(ledger), "--json", str(out)],
    )
    assert result.exit_code == 2 and not out.exists()
    assert MARKER not in result.output
    assert json.loads(result.stderr)["error"] == "DataError"
    # Read as Latin-1 (the way out the message names), the file opens with its ledger
    # untouched, and the planted line is a row like any other.
    session = dp.Session.from_path(
        path, budget=dp.PureDP(1.0), ledger=ledger, encoding="latin-1", rng=1
    )
    assert session.spent == dp.PureDP(0.0)
