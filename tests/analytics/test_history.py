"""``session.history`` as data: SpendHistory, readable queries, charges in user units."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from fractions import Fraction

import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._accounting import budget_kind
from dpkit.analytics._history import (
    SpendHistory,
    charge_in_user_units,
    kind_from_ledger,
    readable_description,
)
from dpkit.analytics._ledger import SpendRecord


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"region": ["a", "b"] * 20, "age": list(range(40)), "person": list(range(40))}
    )


def _grouped() -> Query:
    keys = KeySet.from_values(region=["a", "b"])
    return (
        Query()
        .group_by("region", keys=keys)
        .filter("age > 3")
        .count()
        .sum("age", bounds=(0.0, 100.0))
    )


# ----------------------------------------------------------------------------- units


def test_pure_charges_are_epsilon() -> None:
    kind = budget_kind(dp.PureDP(1.0), None, "test")
    assert charge_in_user_units(kind, (Fraction(1, 4),)) == {"epsilon": 0.25}


def test_zcdp_charges_are_rho() -> None:
    kind = budget_kind(dp.ZCDP(0.5), None, "test")
    assert charge_in_user_units(kind, (Fraction(1, 8),)) == {"rho": 0.125}


def test_approx_charges_show_rho_delta_and_epsilon_worth() -> None:
    kind = budget_kind(dp.ApproxDP(1.0, 1e-6), None, "test")
    rho = Fraction(1, 100)
    units = charge_in_user_units(kind, (rho, Fraction(0)))
    assert list(units) == ["rho", "delta", "epsilon"]
    assert units["rho"] == 0.01 and units["delta"] == 0.0
    assert units["epsilon"] == kind.as_approx(rho).epsilon
    # The budget's zCDP part is worth the epsilon asked for (rho_g converts back to it).
    whole = charge_in_user_units(kind, kind.amount[:2], round_up=False)
    assert whole["epsilon"] == pytest.approx(1.0, rel=1e-9)
    assert whole["epsilon"] <= 1.0


def test_approx_charges_with_a_pure_component_add_it_at_face_value() -> None:
    kind = budget_kind(dp.ApproxDP(2.0, 1e-6), None, "test")
    pure_only = charge_in_user_units(kind, (Fraction(0), Fraction(0), Fraction(1, 2)))
    assert pure_only == {"rho": 0.0, "delta": 0.0, "pure_epsilon": 0.5, "epsilon": 0.5}
    both = charge_in_user_units(kind, (Fraction(1, 100), Fraction(0), Fraction(1, 2)))
    assert both["epsilon"] == pytest.approx(0.5 + kind.as_approx(Fraction(1, 100)).epsilon)


def test_unknown_currency_shows_its_components() -> None:
    kind = budget_kind(dp.PureDP(1.0), None, "test")
    assert charge_in_user_units(kind, (Fraction(1), Fraction(2))) == {
        "amount_0": 1.0,
        "amount_1": 2.0,
    }


@pytest.mark.parametrize(
    "budget", [dp.PureDP(1.0), dp.ZCDP(0.5), dp.ApproxDP(1.0, 1e-6)], ids=["pure", "zcdp", "approx"]
)
def test_kind_from_ledger_reads_the_stored_repr(budget: dp.accounting.Guarantee) -> None:
    kind = budget_kind(budget, None, "test")
    again = kind_from_ledger(kind.key, kind.amount)
    assert again is not None
    assert again.name == kind.name and again.total == budget and again.amount == kind.amount


@pytest.mark.parametrize(
    "text", ["partition", "__import__('os').getcwd()", "PureDP(-1.0)", "ApproxDP(epsilon=1.0"]
)
def test_kind_from_ledger_evaluates_nothing(text: str) -> None:
    assert kind_from_ledger(text, (Fraction(1),)) is None


# ----------------------------------------------------------------------------- queries


def test_a_query_in_words() -> None:
    text = json.dumps({"query": repr(_grouped()), "budget": "0.2"})
    assert readable_description(text) == "count, sum(age) by region where age > 3"


def test_quantiles_private_keys_and_row_bounds_in_words() -> None:
    query = (
        Query()
        .group_by("region", keys="private")
        .bound(max_rows=2)
        .count()
        .quantile("age", 0.5, bounds=(0.0, 100.0))
    )
    text = readable_description(json.dumps({"query": repr(query)}))
    assert text == (
        "count, quantile(age, 0.5) by region (keys selected privately) (at most 2 rows per person)"
    )


def test_a_total_row_bound_in_words() -> None:
    query = (
        Query()
        .group_by("region", keys="private")
        .bound(max_groups=3, max_rows=4, max_total_rows=6)
        .count()
    )
    text = readable_description(json.dumps({"query": repr(query)}))
    assert text == (
        "count by region (keys selected privately) (at most 6 rows per person in all, 4 per group)"
    )


def test_a_cut_description_is_read_as_far_as_it_goes() -> None:
    keys = KeySet.from_values(region=[f"r{i}" for i in range(500)])
    query = Query().group_by("region", keys=keys).filter("age > 3").count()
    cut = repr(query)[:2000]
    text = readable_description(json.dumps({"query": cut}))
    assert text.startswith("query by region where age > 3")
    assert text.endswith("[description truncated]")


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        ({"partition": "region", "keys": ["'a'", "'b'"]}, "partition by region (2 parts)"),
        ({"synthesize": "mst", "columns": ["a", "b"]}, "synthesize (mst) of a, b"),
        ({"synthesize": "aim", "measure": True}, "synthesize (aim): measurements"),
        (
            {"failed_after_charge": True},
            "failed after its charge: the rest of the budget was charged",
        ),
        ({"something": "else"}, '{"something": "else"}'),
    ],
    ids=["partition", "synthesize", "measure", "failed", "unknown"],
)
def test_other_spends_in_words(description: dict[str, object], expected: str) -> None:
    assert readable_description(json.dumps(description)) == expected


def test_text_that_is_not_json_is_kept() -> None:
    assert readable_description("not json") == "not json"


# ----------------------------------------------------------------------------- history


def test_history_is_still_a_sequence_of_records() -> None:
    session = dp.Session.from_pandas(_frame(), budget=dp.PureDP(1.0), rng=1)
    assert session.history == [] and not session.history
    session.evaluate(_grouped(), budget=0.25)
    session.evaluate(Query().count(), budget=0.25)
    history = session.history
    assert isinstance(history, SpendHistory)
    assert len(history) == 2 and history == list(history) and history == tuple(history)
    assert isinstance(history[0], SpendRecord) and history[-1].id == 2
    assert isinstance(history[:1], SpendHistory) and len(history[:1]) == 1
    assert repr(history) == repr(list(history))
    assert sum(r.amount[0] for r in history) == Fraction(0.25) * 2


@pytest.mark.parametrize(
    ("budget", "units"),
    [
        (dp.PureDP(1.0), ["epsilon"]),
        (dp.ZCDP(0.5), ["rho"]),
        (dp.ApproxDP(1.0, 1e-6), ["rho", "delta", "epsilon"]),
    ],
    ids=["pure", "zcdp", "approx"],
)
def test_to_pandas_one_row_per_spend(budget: dp.accounting.Guarantee, units: list[str]) -> None:
    session = dp.Session.from_pandas(_frame(), budget=budget, rng=1)
    before = datetime.now(UTC)
    session.evaluate(_grouped(), budget=0.25)
    session.evaluate(Query().count(), budget=0.5)
    frame = session.history.to_pandas()
    # ("pure_epsilon" too where an ApproxDP ledger keeps pure charges apart.)
    shown = [c for c in frame.columns if c != "pure_epsilon"]
    assert shown == ["id", "time", "scope", "query", "budget", *units]
    assert list(frame["id"]) == [1, 2]
    assert str(frame["time"].dt.tz) == "UTC"
    assert (frame["time"] >= pd.Timestamp(before).floor("s")).all()
    assert list(frame["query"]) == ["count, sum(age) by region where age > 3", "count"]
    assert list(frame["budget"]) == ["0.25", "0.5"]
    first = units[0]
    total = budget.epsilon if isinstance(budget, dp.PureDP) else None
    if total is not None:
        assert list(frame[first]) == [0.25, 0.5]
    assert (frame[first] > 0).all()


def test_to_pandas_of_an_empty_history_has_the_columns() -> None:
    session = dp.Session.from_pandas(_frame(), budget=dp.ApproxDP(1.0, 1e-6), rng=1)
    frame = session.history.to_pandas()
    assert frame.empty
    assert [c for c in frame.columns if c != "pure_epsilon"] == [
        "id",
        "time",
        "scope",
        "query",
        "budget",
        "rho",
        "delta",
        "epsilon",
    ]


def test_a_pure_query_in_an_approx_session_shows_its_worth() -> None:
    session = dp.Session.from_pandas(_frame(), budget=dp.ApproxDP(2.0, 1e-6), rng=1)
    session.evaluate(Query().count(), budget=dp.PureDP(0.1))
    row = session.history.to_pandas().iloc[0]
    assert row["budget"] == "PureDP(epsilon=0.1)"
    assert row["epsilon"] >= 0.1  # never shown as worth less than it was charged


def test_amounts_written_before_a_currency_widened_count_as_zero() -> None:
    from dpkit.analytics._history import _totals_match

    old = SpendRecord(1, "root", 0.0, (Fraction(1, 4), Fraction(0)), "{}")
    new = SpendRecord(2, "root", 1.0, (Fraction(0), Fraction(0), Fraction(1, 2)), "{}")
    assert _totals_match([old, new], {"root": (Fraction(1, 4), Fraction(0), Fraction(1, 2))})
    assert not _totals_match([old, new], {"root": (Fraction(1, 4), Fraction(0), Fraction(1))})
