"""A Session over several tables on a real panel (issue 29): joins compute what they say.

The NLSY wage panel shipped inside ``linearmodels`` (Vella & Verbeek 1998: 545 persons x
8 years, person id ``nr``), split as docs/joins.md splits it: a private ``jobs`` table
(one row per person and year), a private ``people`` table (one row per person) and
public lookup tables written by hand (the nine 1970 Census major occupation groups of
the ``occupation`` codes; a variant listing code 7 twice, multiplicity 2; one leaving
code 8 out, for left joins).

* The exact integers a joined query computes before noise (read through the Session's
  own path: joined view, compile, engine) equal a pandas merge with the same semantics
  -- rows of the same person only, each public row a lookup or a duplicate -- where
  ``max_rows``/``max_groups`` are large enough not to bind.
* A left join keeps the rows without a match; an inner join drops them.
* A join of two private tables on another key (``year``) joins rows of the same person
  only, and ``truncate=`` bounds each person's rows of the joined table.
* A partition on ``people`` (``table=``) sees the persons of its part in ``jobs``.
* Released counts at a generous epsilon lie in the intervals dpkit returns, evaluated at
  ``confidence = 1 - FAILURE`` each: with K intervals checked the test fails with
  probability at most ``K * FAILURE`` over the noise (union bound; here K <= 20, so
  <= 2e-5). The generator is seeded, so a run is reproducible.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query

SALT = 29_2029
FAILURE = 1e-6
SCHOOLS = ["no diploma", "high school", "college"]
COLLAR = {1: "white", 2: "white", 3: "white", 4: "white", 5: "blue", 6: "blue", 7: "blue"}
COLLAR |= {8: "farm", 9: "service"}


def _panel() -> pd.DataFrame:
    """``linearmodels.datasets.wage_panel.load()``, read from the installed package's file
    (importing linearmodels takes seconds)."""
    spec = find_spec("linearmodels")
    if spec is None or spec.origin is None:
        pytest.skip("linearmodels is not installed")
    return pd.read_csv(Path(spec.origin).parent / "datasets" / "wage_panel" / "wage_panel.csv.bz2")


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    panel = _panel()
    assert panel.shape == (4360, 12)
    assert panel.groupby("nr").size().eq(8).all()
    jobs = panel[["nr", "year", "hours", "lwage", "occupation", "union"]].copy()
    people = panel.drop_duplicates("nr")[["nr", "black", "hisp", "educ"]].copy()
    # The traits are the same every year, so one row per person loses nothing.
    assert panel.groupby("nr")[["black", "hisp", "educ"]].nunique().eq(1).all().all()
    people["school"] = pd.cut(people["educ"], [0, 11, 12, 99], labels=SCHOOLS).astype(str)
    occupations = pd.DataFrame({"occupation": list(COLLAR), "collar": [COLLAR[c] for c in COLLAR]})
    summary = pd.DataFrame(  # code 7 in two groups: multiplicity 2
        {
            "occupation": [1, 2, 3, 4, 5, 6, 7, 7, 8, 9],
            "summary": ["white"] * 4 + ["manual"] * 3 + ["farm", "farm", "service"],
        }
    )
    partial = occupations[occupations["occupation"] != 8].reset_index(drop=True)
    status = jobs[["nr", "year", "union"]].rename(columns={"union": "union_status"})
    return {
        "jobs": jobs,
        "people": people,
        "status": status,
        "occupations": occupations,
        "summary": summary,
        "partial": partial,
    }


def _session(tables: dict[str, pd.DataFrame], budget: float = 100.0, rng: int = 29) -> Any:
    return dp.Session.from_tables(
        {name: tables[name] for name in ("jobs", "people", "status")},
        privacy_unit="nr",
        public={name: tables[name] for name in ("occupations", "summary", "partial")},
        budget=dp.PureDP(budget),
        rng=rng,
    )


@pytest.fixture(scope="module")
def session(tables: dict[str, pd.DataFrame]) -> Any:
    return _session(tables)


def exact(session: Any, query: Query) -> dict[tuple[Any, ...], list[int]]:
    """The exact integers ``query`` computes before noise, on the Session's own path
    (joined view, compile, engine), at a fixed salt; spends nothing."""
    view, stripped = session._view_for(query, SALT)
    compiled = view._compile(stripped, 0.1, salt=SALT)
    view._engine.prepare(compiled.plan, compiled.orders)
    return dict(view._engine.aggregate(compiled.plan))


def _counts(result: dict[tuple[Any, ...], list[int]]) -> dict[Any, int]:
    return {key[0] if len(key) == 1 else key: values[0] for key, values in result.items()}


def test_public_join_counts_and_sums_equal_a_pandas_merge(
    session: Any, tables: dict[str, pd.DataFrame]
) -> None:
    query = (
        Query.from_table("jobs")
        .join("occupations", on="occupation")
        .group_by("collar", keys=KeySet.from_table("occupations", "collar"))
        .bound(max_groups=4, max_rows=8)  # at most 4 collars and 8 rows a person: no cut
        .count()
        .sum("lwage", bounds=(-5.0, 5.0))
    )
    merged = tables["jobs"].merge(tables["occupations"], on="occupation", how="inner")
    got = exact(session, query)
    assert _counts(got) == merged.groupby("collar").size().to_dict()
    assert sum(_counts(got).values()) == len(tables["jobs"])  # a lookup: M = 1
    # The sum is exact on a fixed-point grid: S = sum(round((x - mid) * inv)) for the
    # grid's inv and centre, so it is within one unit per row of the real-valued sum.
    view, stripped = session._view_for(query, SALT)
    statistic = view._compile(stripped, 0.1, salt=SALT).plan.statistics[1]
    assert statistic.op == "fixed_sum"
    for collar, rows in merged.groupby("collar"):
        expected = float(((rows["lwage"] - statistic.mid) * statistic.inv).sum())
        assert abs(got[(collar,)][1] - expected) <= len(rows)


def test_duplicate_public_keys_repeat_rows_before_the_bound(
    session: Any, tables: dict[str, pd.DataFrame]
) -> None:
    query = (
        Query.from_table("jobs")
        .join("summary", on="occupation")
        .group_by("summary", keys=KeySet.from_table("summary", "summary"))
        .bound(max_groups=4, max_rows=8)  # code 7 sits in 2 groups: at most 4 groups
        .count()
    )
    merged = tables["jobs"].merge(tables["summary"], on="occupation", how="inner")
    assert _counts(exact(session, query)) == merged.groupby("summary").size().to_dict()
    code_7 = int((tables["jobs"]["occupation"] == 7).sum())
    assert len(merged) == len(tables["jobs"]) + code_7
    explained = session.explain(query, budget=dp.PureDP(1.0))
    assert "at most 2 row(s) per key" in explained.source[1]
    assert "at most 2 joined row(s)" in explained.source[2]
    # The noise is set by the bound, not by M: the same as the lookup's.
    lookup = (
        Query.from_table("jobs")
        .join("occupations", on="occupation")
        .group_by("collar", keys=KeySet.from_table("occupations", "collar"))
        .bound(max_groups=4, max_rows=8)
        .count()
    )
    looked = session.explain(lookup, budget=dp.PureDP(1.0))
    for stat in (explained.statistics[0], looked.statistics[0]):
        assert (stat.sensitivity, stat.max_groups) == (8, 4)  # per group; 32 in all
    assert explained.statistics[0].noise_scale == looked.statistics[0].noise_scale


def test_left_join_keeps_unmatched_rows(session: Any, tables: dict[str, pd.DataFrame]) -> None:
    jobs = tables["jobs"]
    unmatched = int((jobs["occupation"] == 8).sum())
    assert unmatched > 0
    base = Query.from_table("jobs")
    total = base.bound(max_rows=8).count()
    left = base.join("partial", on="occupation", how="left").bound(max_rows=8).count()
    inner = base.join("partial", on="occupation").bound(max_rows=8).count()
    assert _counts(exact(session, total)) == {(): len(jobs)}
    assert _counts(exact(session, left)) == {(): len(jobs)}
    assert _counts(exact(session, inner)) == {(): len(jobs) - unmatched}
    # The kept rows carry NULL public columns: group on whether the lookup matched.
    flagged = (
        base.join("partial", on="occupation", how="left")
        .with_column("matched", "collar IS NOT NULL")
        .group_by("matched", keys=KeySet.from_values(matched=[True, False]))
        .bound(max_groups=2, max_rows=8)
        .count()
    )
    merged = jobs.merge(tables["partial"], on="occupation", how="left", indicator=True)
    assert len(merged) == len(jobs)
    assert _counts(exact(session, flagged)) == {True: len(jobs) - unmatched, False: unmatched}
    assert int((merged["_merge"] == "left_only").sum()) == unmatched


def test_private_join_on_the_unit_equals_a_pandas_merge(
    session: Any, tables: dict[str, pd.DataFrame]
) -> None:
    query = (
        Query.from_table("jobs")
        .join("people", on="nr", truncate=1, columns=["school"])
        .group_by("school", keys=KeySet.from_values(school=SCHOOLS))
        .bound(max_groups=1, max_rows=8)
        .count()
        .count_distinct()
    )
    merged = tables["jobs"].merge(tables["people"], on="nr", how="inner")
    got = exact(session, query)
    assert {k[0]: v[0] for k, v in got.items()} == merged.groupby("school").size().to_dict()
    persons = merged.groupby("school")["nr"].nunique().to_dict()
    assert {k[0]: v[1] for k, v in got.items()} == persons


def test_private_join_on_another_key_joins_the_same_person_only(
    session: Any, tables: dict[str, pd.DataFrame]
) -> None:
    jobs = tables["jobs"]
    persons = jobs["nr"].nunique()
    # On year alone, pandas would pair every person's year with 545 persons' rows.
    assert len(jobs.merge(tables["status"], on="year")) == len(jobs) * persons
    same_person = jobs.merge(tables["status"], on=["nr", "year"])
    kept_all = (
        Query.from_table("jobs")
        .join("status", on="year", truncate=1)  # one row per person and year
        .group_by("union_status", keys=KeySet.from_values(union_status=[0, 1]))
        .bound(max_groups=2, max_rows=8)
        .count()
    )
    assert _counts(exact(session, kept_all)) == same_person.groupby("union_status").size().to_dict()
    # truncate counts rows per person *and key*: with truncate=1 every row of jobs still
    # meets its own year's row, so nothing is lost (asserted above).


def test_partition_by_a_column_of_people(tables: dict[str, pd.DataFrame]) -> None:
    session = _session(tables, budget=10.0, rng=5)
    parts = session.partition("school", SCHOOLS, dp.PureDP(1.0), table="people")
    merged = tables["jobs"].merge(tables["people"], on="nr")
    query = Query.from_table("jobs").bound(max_rows=8).count().count_distinct()
    for school, part in parts.items():
        rows = merged[merged["school"] == school]
        assert exact(part, query) == {(): [len(rows), rows["nr"].nunique()]}
    assert session.remaining == dp.PureDP(9.0)


def test_released_counts_lie_in_the_stated_intervals(tables: dict[str, pd.DataFrame]) -> None:
    session = _session(tables, budget=30.0, rng=11)
    confidence = 1.0 - FAILURE
    merged_pub = tables["jobs"].merge(tables["occupations"], on="occupation")
    merged_priv = tables["jobs"].merge(tables["people"], on="nr")
    cases = [
        (
            Query.from_table("jobs")
            .join("occupations", on="occupation")
            .group_by("collar", keys=KeySet.from_table("occupations", "collar"))
            .bound(max_groups=4, max_rows=8)
            .count(),
            "collar",
            merged_pub.groupby("collar").size().to_dict(),
        ),
        (
            Query.from_table("jobs")
            .join("people", on="nr", truncate=1, columns=["school"])
            .group_by("school", keys=KeySet.from_values(school=SCHOOLS))
            .bound(max_groups=1, max_rows=8)
            .count(),
            "school",
            merged_priv.groupby("school").size().to_dict(),
        ),
    ]
    checked = 0
    for query, column, truth in cases:
        frame = session.evaluate(query, budget=dp.PureDP(10.0), confidence=confidence).dataframe
        assert set(frame[column]) == set(truth)
        for _, row in frame.iterrows():
            exact_count = truth[row[column]]
            assert row["count_low"] <= exact_count <= row["count_high"], (row, exact_count)
            # Useful, not only true: at epsilon 10 (noise scale 3.2 rows at most) the
            # 1 - 1e-6 interval is within 20% of every group of more than 400 rows.
            if exact_count > 400:
                assert row["count_high"] - row["count_low"] < 0.2 * exact_count
            checked += 1
    assert checked <= 20  # the union bound of the module docstring
    assert np.isclose(session.remaining.epsilon, 10.0)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (Query.from_table("occupations").count(), "is a public table"),
        (Query.from_table("jobs").join("people", on="nr").bound(max_rows=8).count(), "truncate="),
        (
            Query.from_table("jobs")
            .join("occupations", on="occupation", truncate=1)
            .bound(max_rows=8)
            .count(),
            "applies to a join with a private table",
        ),
        (
            Query.from_table("jobs")
            .join("occupations", on="occupation", columns=["occupation"])
            .bound(max_rows=8)
            .count(),
            "clashes",
        ),
        (
            Query.from_table("jobs")
            .join("people", on="nr", truncate=1, columns=["nr"])
            .bound(max_rows=8)
            .count(),
            "privacy unit",
        ),
        (Query().bound(max_rows=8).count(), "several private tables"),
    ],
)
def test_refusals_spend_nothing(session: Any, query: Query, message: str) -> None:
    before = session.spent
    with pytest.raises(dp.InvalidParameter, match=message):
        session.evaluate(query, budget=dp.PureDP(0.1))
    assert session.spent == before
