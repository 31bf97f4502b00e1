"""JSON for :class:`~dpkit.report.DatasetSummary`: a stable, versioned schema.

The document is an object with ``"schema": "dpkit.report/1"`` and one key per field
of the dataclasses, named as the fields are. Guarantees are objects with a
``"type"`` (``"PureDP"``, ``"ApproxDP"``, ``"ZCDP"``, ``"RDP"``) and their
parameters; ``created`` is ISO 8601 with its UTC offset; absent values are ``null``.
Floats are written with Python's shortest round-trip representation, so
``from_json(to_json(s)) == s`` exactly. NaN and infinity never appear (the model
rejects them). Readers must ignore keys they do not know: a later version of the
schema may add keys, and will change the version only when it changes or removes one.

Keys added within ``dpkit.report/1`` (absent in older documents, read with their
defaults): top level ``requested`` and ``guarantee`` (the budget as asked and the
guarantee the whole summary satisfies, both guarantees or null) and ``max_rows``;
statistics ``limit`` (``""``, ``"lower"``, ``"upper"``), ``caveat`` and ``rounding``;
histograms ``open_ended`` and ``integer``; columns ``sql_type``; later statistics
``withheld`` (the reason, with ``"estimate": null``), ``rank_radius`` and
``rank_count`` (an order statistic's accuracy in ranks, and the released count it
refers to), columns ``missing`` (a statistic or null) and ``alerts``, top level
``alerts``. ``budget`` keeps its
meaning: what the summary spent in the Session's query currency (zCDP rho for
``(epsilon, delta)`` budgets).

Example
-------
>>> from datetime import datetime, timezone
>>> from dpkit.accounting import PureDP
>>> from dpkit.report import DatasetSummary, from_json, to_json
>>> s = DatasetSummary(source="t.csv", privacy_unit=None, budget=PureDP(1.0),
...     budget_split=[], columns=[], rows_estimate=None, secure=True,
...     created=datetime(2024, 1, 1, tzinfo=timezone.utc))
>>> from_json(to_json(s)) == s
True
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from dpkit.accounting.guarantees import RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.errors import DataError, DPError
from dpkit.report.model import (
    BudgetShare,
    CategoryCount,
    ColumnSummary,
    DatasetSummary,
    HistogramSummary,
    Statistic,
)

__all__ = ["SCHEMA", "from_json", "guarantee_from_dict", "guarantee_to_dict", "to_json"]

#: The schema identifier written into (and required from) every document.
SCHEMA: Final = "dpkit.report/1"


def guarantee_to_dict(guarantee: Guarantee) -> dict[str, Any]:
    """A guarantee as a JSON-ready dict: ``{"type": "PureDP", "epsilon": 1.0}``."""
    if isinstance(guarantee, PureDP):
        return {"type": "PureDP", "epsilon": guarantee.epsilon}
    if isinstance(guarantee, ApproxDP):
        return {"type": "ApproxDP", "epsilon": guarantee.epsilon, "delta": guarantee.delta}
    if isinstance(guarantee, ZCDP):
        return {"type": "ZCDP", "rho": guarantee.rho}
    if isinstance(guarantee, RDP):
        return {
            "type": "RDP",
            "orders": list(guarantee.orders),
            "epsilons": list(guarantee.epsilons),
        }
    raise DataError(f"Cannot serialise a {type(guarantee).__name__} guarantee to JSON.")


def guarantee_from_dict(data: Mapping[str, Any]) -> Guarantee:
    """The inverse of :func:`guarantee_to_dict`."""
    kind = data.get("type")
    if kind == "PureDP":
        return PureDP(data["epsilon"])
    if kind == "ApproxDP":
        return ApproxDP(data["epsilon"], data["delta"])
    if kind == "ZCDP":
        return ZCDP(data["rho"])
    if kind == "RDP":
        return RDP(tuple(data["orders"]), tuple(data["epsilons"]))
    raise DataError(
        f"Unknown guarantee type {kind!r} in a report; expected PureDP, ApproxDP, ZCDP or RDP."
    )


def _optional_guarantee(guarantee: Guarantee | None) -> dict[str, Any] | None:
    return None if guarantee is None else guarantee_to_dict(guarantee)


def _statistic(s: Statistic) -> dict[str, Any]:
    return {
        "name": s.name,
        "estimate": s.estimate,
        "std_error": s.std_error,
        "ci_low": s.ci_low,
        "ci_high": s.ci_high,
        "confidence": s.confidence,
        "mechanism": s.mechanism,
        "budget": _optional_guarantee(s.budget),
        "unit": s.unit,
        "limit": s.limit,
        "caveat": s.caveat,
        "rounding": s.rounding,
        "withheld": s.withheld,
        "rank_radius": s.rank_radius,
        "rank_count": s.rank_count,
    }


def _histogram(h: HistogramSummary) -> dict[str, Any]:
    return {
        "edges": list(h.edges),
        "counts": list(h.counts),
        "ci_low": list(h.ci_low),
        "ci_high": list(h.ci_high),
        "confidence": h.confidence,
        "mechanism": h.mechanism,
        "budget": _optional_guarantee(h.budget),
        "unit": h.unit,
        "open_ended": h.open_ended,
        "integer": h.integer,
    }


def _category(c: CategoryCount) -> dict[str, Any]:
    return {
        "category": c.category,
        "estimate": c.estimate,
        "std_error": c.std_error,
        "ci_low": c.ci_low,
        "ci_high": c.ci_high,
        "confidence": c.confidence,
    }


def _column(c: ColumnSummary) -> dict[str, Any]:
    return {
        "name": c.name,
        "kind": c.kind,
        "statistics": [_statistic(s) for s in c.statistics],
        "histogram": None if c.histogram is None else _histogram(c.histogram),
        "top_categories": [_category(t) for t in c.top_categories],
        "notes": list(c.notes),
        "sql_type": c.sql_type,
        "missing": None if c.missing is None else _statistic(c.missing),
        "alerts": list(c.alerts),
    }


def summary_to_dict(summary: DatasetSummary) -> dict[str, Any]:
    """The JSON document of ``summary`` as plain dicts, lists and scalars."""
    return {
        "schema": SCHEMA,
        "title": summary.title,
        "source": summary.source,
        "privacy_unit": summary.privacy_unit,
        "budget": guarantee_to_dict(summary.budget),
        "requested": _optional_guarantee(summary.requested),
        "guarantee": _optional_guarantee(summary.guarantee),
        "max_rows": summary.max_rows,
        "budget_split": [
            {
                "label": b.label,
                "budget": guarantee_to_dict(b.budget),
                "mechanism": b.mechanism,
                "fraction": b.fraction,
            }
            for b in summary.budget_split
        ],
        "rows_estimate": None
        if summary.rows_estimate is None
        else _statistic(summary.rows_estimate),
        "secure": summary.secure,
        "created": summary.created.isoformat(),
        "notes": list(summary.notes),
        "alerts": list(summary.alerts),
        "columns": [_column(c) for c in summary.columns],
    }


def to_json(summary: DatasetSummary, *, indent: int | None = 2) -> str:
    """``summary`` as JSON text (see the module docstring for the schema)."""
    if not isinstance(summary, DatasetSummary):
        raise DataError(f"to_json needs a DatasetSummary; got {type(summary).__name__}.")
    return json.dumps(summary_to_dict(summary), indent=indent, allow_nan=False, ensure_ascii=False)


def _read_statistic(d: Mapping[str, Any]) -> Statistic:
    return Statistic(
        name=d["name"],
        estimate=d["estimate"],
        std_error=d.get("std_error"),
        ci_low=d.get("ci_low"),
        ci_high=d.get("ci_high"),
        confidence=d.get("confidence"),
        mechanism=d.get("mechanism", ""),
        budget=_read_optional_guarantee(d.get("budget")),
        unit=d.get("unit", ""),
        limit=d.get("limit", ""),
        caveat=d.get("caveat", ""),
        rounding=d.get("rounding", 0.0),
        withheld=d.get("withheld", ""),
        rank_radius=d.get("rank_radius"),
        rank_count=d.get("rank_count"),
    )


def _read_optional_guarantee(d: Mapping[str, Any] | None) -> Guarantee | None:
    return None if d is None else guarantee_from_dict(d)


def _read_histogram(d: Mapping[str, Any]) -> HistogramSummary:
    return HistogramSummary(
        edges=tuple(d["edges"]),
        counts=tuple(d["counts"]),
        ci_low=tuple(d.get("ci_low", ())),
        ci_high=tuple(d.get("ci_high", ())),
        confidence=d.get("confidence"),
        mechanism=d.get("mechanism", ""),
        budget=_read_optional_guarantee(d.get("budget")),
        unit=d.get("unit", ""),
        open_ended=d.get("open_ended", False),
        integer=d.get("integer", False),
    )


def _read_column(d: Mapping[str, Any]) -> ColumnSummary:
    histogram = d.get("histogram")
    return ColumnSummary(
        name=d["name"],
        kind=d["kind"],
        statistics=tuple(_read_statistic(s) for s in d.get("statistics", ())),
        histogram=None if histogram is None else _read_histogram(histogram),
        top_categories=tuple(
            CategoryCount(
                category=t["category"],
                estimate=t["estimate"],
                std_error=t.get("std_error"),
                ci_low=t.get("ci_low"),
                ci_high=t.get("ci_high"),
                confidence=t.get("confidence"),
            )
            for t in d.get("top_categories", ())
        ),
        notes=tuple(d.get("notes", ())),
        sql_type=d.get("sql_type", ""),
        missing=None if d.get("missing") is None else _read_statistic(d["missing"]),
        alerts=tuple(d.get("alerts", ())),
    )


def _guarded(read: Callable[[], DatasetSummary]) -> DatasetSummary:
    # One error type for every way a document can be malformed.
    try:
        return read()
    except DPError as err:
        raise DataError(f"Not a valid dpkit report: {err}") from err
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DataError(f"Not a valid dpkit report ({type(err).__name__}: {err}).") from err


def summary_from_dict(data: Mapping[str, Any]) -> DatasetSummary:
    """The inverse of :func:`summary_to_dict`."""
    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
        raise DataError(f"Not a dpkit report: expected schema {SCHEMA!r}, found {found!r}.")

    def read() -> DatasetSummary:
        rows = data.get("rows_estimate")
        return DatasetSummary(
            source=data["source"],
            privacy_unit=data.get("privacy_unit"),
            budget=guarantee_from_dict(data["budget"]),
            budget_split=tuple(
                BudgetShare(
                    label=b["label"],
                    budget=guarantee_from_dict(b["budget"]),
                    mechanism=b.get("mechanism", ""),
                    fraction=b.get("fraction"),
                )
                for b in data.get("budget_split", ())
            ),
            columns=tuple(_read_column(c) for c in data.get("columns", ())),
            rows_estimate=None if rows is None else _read_statistic(rows),
            secure=data["secure"],
            created=datetime.fromisoformat(data["created"]),
            title=data.get("title", DatasetSummary.title),
            notes=tuple(data.get("notes", ())),
            alerts=tuple(data.get("alerts", ())),
            requested=_read_optional_guarantee(data.get("requested")),
            guarantee=_read_optional_guarantee(data.get("guarantee")),
            max_rows=data.get("max_rows"),
        )

    return _guarded(read)


def from_json(text: str | bytes) -> DatasetSummary:
    """Read a :class:`DatasetSummary` from JSON text written by :func:`to_json`.

    Raises
    ------
    DataError
        If the text is not JSON, not a dpkit report, or holds invalid values.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"Not a valid dpkit report: not JSON ({err.msg}).") from err
    return summary_from_dict(data)
