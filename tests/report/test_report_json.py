"""dpkit.report JSON: exact round trips and a stable, versioned schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest

from dpkit.accounting import RDP, ZCDP, ApproxDP, PureDP
from dpkit.errors import DataError
from dpkit.report import SCHEMA, DatasetSummary, from_json, to_json
from dpkit.report.serialize import guarantee_from_dict, guarantee_to_dict


@pytest.mark.parametrize(
    "guarantee",
    [PureDP(0.3), ApproxDP(1.0, 1e-7), ZCDP(0.125), RDP((2.0, 4.0), (0.1, 0.3))],
    ids=["pure", "approx", "zcdp", "rdp"],
)
def test_guarantee_round_trip(guarantee: object) -> None:
    data = guarantee_to_dict(guarantee)  # type: ignore[arg-type]
    assert json.loads(json.dumps(data)) == data
    assert guarantee_from_dict(json.loads(json.dumps(data))) == guarantee


@pytest.mark.parametrize(
    ("secure", "budget"), [(True, "pure"), (False, "zcdp")], ids=["secure-pure", "insecure-zcdp"]
)
def test_summary_round_trip_is_exact(
    summary_factory: Callable[..., DatasetSummary], secure: bool, budget: str
) -> None:
    summary = summary_factory(secure=secure, budget=budget)
    text = to_json(summary)
    assert from_json(text) == summary
    assert from_json(to_json(summary, indent=None)) == summary
    assert from_json(text.encode("utf-8")) == summary


def test_schema_keys_are_stable(sample_summary: DatasetSummary) -> None:
    # Changing or removing any of these keys is a schema change (bump SCHEMA); keys
    # may only be added (the second set of each pair), with defaults for old documents.
    doc = json.loads(to_json(sample_summary))
    assert doc["schema"] == SCHEMA == "dpkit.report/1"
    assert set(doc) == {
        "schema", "title", "source", "privacy_unit", "budget", "budget_split",
        "rows_estimate", "secure", "created", "notes", "columns",
    } | {"requested", "guarantee", "max_rows", "alerts"}  # fmt: skip
    assert doc["budget"] == {"type": "PureDP", "epsilon": 1.0}
    assert doc["created"] == "2025-03-14T09:26:53+00:00"
    column = doc["columns"][0]
    assert set(column) == {
        "name", "kind", "statistics", "histogram", "top_categories", "notes",
    } | {"sql_type", "missing", "alerts"}  # fmt: skip
    assert set(column["statistics"][0]) == {
        "name", "estimate", "std_error", "ci_low", "ci_high", "confidence",
        "mechanism", "budget", "unit",
    } | {"limit", "caveat", "rounding", "withheld", "rank_radius", "rank_count"}  # fmt: skip
    assert set(column["histogram"]) == {
        "edges", "counts", "ci_low", "ci_high", "confidence", "mechanism", "budget", "unit",
    } | {"open_ended", "integer"}  # fmt: skip
    categories = doc["columns"][2]["top_categories"]
    assert set(categories[0]) == {
        "category", "estimate", "std_error", "ci_low", "ci_high", "confidence",
    }  # fmt: skip
    assert set(doc["budget_split"][0]) == {"label", "budget", "mechanism", "fraction"}


def test_documents_without_the_added_keys_still_read(sample_summary: DatasetSummary) -> None:
    summary = replace(
        sample_summary,
        requested=ApproxDP(1.0, 1e-6),
        guarantee=ApproxDP(0.97, 7e-7),
        max_rows=10,
    )
    doc = json.loads(to_json(summary))
    for key in ("requested", "guarantee", "max_rows", "alerts"):
        del doc[key]
    for column in doc["columns"]:
        del column["sql_type"], column["missing"], column["alerts"]
        for stat in column["statistics"]:
            del stat["limit"], stat["caveat"]
            del stat["withheld"], stat["rank_radius"], stat["rank_count"]
        if column["histogram"] is not None:
            del column["histogram"]["open_ended"], column["histogram"]["integer"]
    old = from_json(json.dumps(doc))
    assert old == replace(summary, requested=None, guarantee=None, max_rows=None)
    # And the new keys carry what a reader needs: the budget asked and the guarantee.
    new = json.loads(to_json(summary))
    assert new["requested"] == {"type": "ApproxDP", "epsilon": 1.0, "delta": 1e-6}
    assert new["guarantee"] == {"type": "ApproxDP", "epsilon": 0.97, "delta": 7e-7}


def test_unknown_keys_are_ignored(sample_summary: DatasetSummary) -> None:
    doc = json.loads(to_json(sample_summary))
    doc["added_in_a_later_version"] = {"x": 1}
    doc["columns"][0]["also_new"] = []
    assert from_json(json.dumps(doc)) == sample_summary


def test_non_ascii_and_markup_survive(sample_summary: DatasetSummary) -> None:
    summary = replace(sample_summary, source="données/ünïcode <&>.csv")
    assert from_json(to_json(summary)).source == "données/ünïcode <&>.csv"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "expected schema"),
        ('{"schema": "dpkit.report/999"}', "expected schema"),
        ('{"schema": "dpkit.report/1"}', "Not a valid dpkit report"),
    ],
    ids=["garbage", "array", "future-schema", "missing-fields"],
)
def test_bad_documents_raise_data_error(text: str, match: str) -> None:
    with pytest.raises(DataError, match=match):
        from_json(text)


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("budget",), {"type": "Mystery", "epsilon": 1.0}, "Unknown guarantee type"),
        (("budget",), {"type": "PureDP", "epsilon": -1.0}, "epsilon"),
        (("columns", 0, "kind"), "text", "kind"),
        (("columns", 0, "statistics", 0, "estimate"), None, "estimate"),
        (("created",), "yesterday", "Not a valid dpkit report"),
    ],
    ids=["unknown-guarantee", "negative-epsilon", "bad-kind", "null-estimate", "bad-date"],
)
def test_invalid_values_raise_data_error(
    sample_summary: DatasetSummary, path: tuple[object, ...], value: object, match: str
) -> None:
    doc = json.loads(to_json(sample_summary))
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(DataError, match=match):
        from_json(json.dumps(doc))


def test_json_never_contains_nan(sample_summary: DatasetSummary) -> None:
    text = to_json(sample_summary)
    assert "NaN" not in text and "Infinity" not in text
    with pytest.raises(DataError, match="DatasetSummary"):
        to_json({"not": "a summary"})  # type: ignore[arg-type]


def test_statistic_rounding_round_trips_and_defaults_to_zero(
    sample_summary: DatasetSummary,
) -> None:
    doc = json.loads(to_json(sample_summary))
    statistic = doc["columns"][0]["statistics"][0]
    assert statistic["rounding"] == 0.0
    del statistic["rounding"]  # a document written before the key
    assert from_json(json.dumps(doc)) == sample_summary
