"""Stability of the joined view: on neighbouring databases, the exact integers of a
query over several tables move by at most what its noise is calibrated for.

Neighbours (dpkit.analytics._joins): one person removed with all their rows in every
private table; public tables the same. Hypothesis draws small databases -- persons with
random numbers of rows in ``visits`` and ``people`` (and rows with a NULL person, which
are in both neighbours), a public ``regions`` table with duplicate and NULL keys, keys
of integer, double (NaN, -0.0) or string type -- and random queries over them: public
joins and private joins (on the privacy unit or on another key, with truncation), inner
and left, chains of two, starting from either private table, with filters, derived
columns, groups with ``KeySet.from_table`` or ``KeySet.from_values`` and counts, sums,
means and distinct counts. For the same salt on both neighbours (one evaluation's
keyed hashes), every exact integer the engine returns (what the noise is added to)
must move, per group, by at most the statistic's per-group sensitivity (``Noise.
sensitivity``: ``max_rows`` times one row's bound), in at most ``max_groups`` groups,
and so by at most ``max_groups`` times that in L1 over the groups.

DuckDB runs the property; a few examples also run on Spark, whose integers must be
DuckDB's (more behind ``--runslow``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._compile import CompiledQuery

SALT = 424_242
KINDS = ["x", "y", "z"]
REGION_NAMES = ["a", "b", "c"]
QUERIES_PER_DATABASE = 3

#: Join keys (visits.region_id = regions.region_id, people.home = regions.region_id):
#: values per key type, NULL (None) and, for doubles, NaN and -0.0 (the same key as 0.0).
KEY_VALUES: dict[str, list[Any]] = {
    "int": [0, 1, 2, 3, None],
    "double": [0.0, -0.0, 1.0, 2.5, float("nan"), None],
    "string": ["r0", "r1", "r2", "", None],
}
ARROW_KEY = {"int": pa.int64(), "double": pa.float64(), "string": pa.string()}
UNIT_TYPES = {"int": pa.int64(), "string": pa.string()}

FAST = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW = settings(FAST, max_examples=300)
SPARK = settings(FAST, max_examples=2)
SPARK_SLOW = settings(FAST, max_examples=40)


# ---------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Database:
    """Rows of the private tables (person ids 0..n-1, or None) and the public table."""

    unit_type: str
    key_type: str
    visits: list[tuple[Any, ...]]  # (uid, region_id, kind, duration)
    people: list[tuple[Any, ...]]  # (uid, pkind, age, home)
    regions: list[tuple[Any, ...]]  # (region_id, region, weight)
    persons: int

    def unit(self, person: int | None) -> Any:
        if person is None or self.unit_type == "int":
            return person
        return f"p{person}"

    def base_rows(self, table: str | None) -> Counter[Any]:
        """Rows per person (as the engine holds the unit) of a private table."""
        rows = self.visits if table == "visits" else self.people
        return Counter(self.unit(r[0]) for r in rows)

    def without(self, person: int) -> Database:
        """The neighbour: ``person`` removed with all their rows in every private table."""
        return Database(
            self.unit_type,
            self.key_type,
            [r for r in self.visits if r[0] != person],
            [r for r in self.people if r[0] != person],
            self.regions,
            self.persons,
        )

    def tables(self) -> tuple[dict[str, pa.Table], dict[str, pa.Table]]:
        unit, key = UNIT_TYPES[self.unit_type], ARROW_KEY[self.key_type]

        def table(rows: list[tuple[Any, ...]], fields: list[tuple[str, Any]]) -> pa.Table:
            columns = list(zip(*rows, strict=True)) if rows else [()] * len(fields)
            return pa.table(
                {
                    name: pa.array(list(c), type=t)
                    for (name, t), c in zip(fields, columns, strict=True)
                }
            )

        visits = table(
            [(self.unit(u), k, c, d) for u, k, c, d in self.visits],
            [("uid", unit), ("region_id", key), ("kind", pa.string()), ("duration", pa.int64())],
        )
        people = table(
            [(self.unit(u), c, a, h) for u, c, a, h in self.people],
            [("uid", unit), ("pkind", pa.string()), ("age", pa.int64()), ("home", key)],
        )
        regions = table(
            self.regions,
            [("region_id", key), ("region", pa.string()), ("weight", pa.int64())],
        )
        return {"visits": visits, "people": people}, {"regions": regions}


@st.composite
def databases(draw: st.DrawFn, integer_nulls: bool = True) -> Database:
    """A database, and the person whose removal gives its neighbour: that person has
    many rows (more than the bounds keep, so the bounds are what limits the change)."""
    unit_type = draw(st.sampled_from(sorted(UNIT_TYPES)), label="unit type")
    key_type = draw(st.sampled_from(sorted(KEY_VALUES)), label="key type")
    values = KEY_VALUES[key_type]
    if not integer_nulls and key_type == "int":
        values = [v for v in values if v is not None]
    keys = st.sampled_from(values)
    persons = draw(st.integers(1, 4), label="persons")
    visits: list[tuple[Any, ...]] = []
    people: list[tuple[Any, ...]] = []
    # Person 0 is the one removed; None owns rows in both neighbours (never counted).
    for person in [*range(persons), None]:
        many = 12 if person == 0 else 4
        visit = st.tuples(st.just(person), keys, st.sampled_from(KINDS), st.integers(0, 130))
        row = st.tuples(
            st.just(person),
            st.sampled_from([*KINDS, None]),
            st.integers(0, 99) | (st.none() if integer_nulls else st.nothing()),
            keys,
        )
        visits += draw(st.lists(visit, max_size=many), label=f"visits of {person}")
        people += draw(st.lists(row, max_size=many // 2), label=f"people rows of {person}")
    region = st.tuples(
        keys,
        st.sampled_from([*REGION_NAMES, None]),
        st.integers(0, 9),
    )
    regions = draw(st.lists(region, max_size=8), label="regions")
    order = draw(st.permutations(range(len(visits))), label="row order")
    return Database(unit_type, key_type, [visits[i] for i in order], people, regions, persons)


# ---------------------------------------------------------------------------- queries
# A join: (table, on, columns it brings in); ``how`` and ``truncate`` are drawn.
PUBLIC_ON_VISIT = ("regions", "region_id", ("region", "weight"))
PUBLIC_ON_HOME = ("regions", {"home": "region_id"}, ("region", "weight"))
PEOPLE_ON_UNIT = ("people", "uid", ("pkind", "age", "home"))
PEOPLE_ON_KIND = ("people", {"kind": "pkind"}, ("age", "home"))
VISITS_ON_UNIT = ("visits", "uid", ("region_id", "kind", "duration"))
VISITS_ON_KIND = ("visits", {"pkind": "kind"}, ("region_id", "duration"))

#: Join chains (at most two joins) per base table; each is valid given the columns
#: the earlier joins bring.
CHAINS: dict[str, list[tuple[tuple[Any, ...], ...]]] = {
    "visits": [
        (),
        (PUBLIC_ON_VISIT,),
        (PEOPLE_ON_UNIT,),
        (PEOPLE_ON_KIND,),
        (PUBLIC_ON_VISIT, PEOPLE_ON_UNIT),
        (PUBLIC_ON_VISIT, PEOPLE_ON_KIND),
        (PEOPLE_ON_UNIT, PUBLIC_ON_VISIT),
        (PEOPLE_ON_KIND, PUBLIC_ON_HOME),
    ],
    "people": [
        (PUBLIC_ON_HOME,),
        (VISITS_ON_UNIT,),
        (VISITS_ON_KIND, PUBLIC_ON_HOME),
        (PUBLIC_ON_HOME, VISITS_ON_UNIT),
    ],
}
BASE_COLUMNS = {
    "visits": ("region_id", "kind", "duration"),
    "people": ("pkind", "age", "home"),
}


@st.composite
def queries(draw: st.DrawFn, database: Database) -> Query:
    base = draw(st.sampled_from(["visits", "visits", "people"]), label="base")
    chain = draw(st.sampled_from(CHAINS[base]), label="joins")
    query = Query.from_table(base)
    columns = set(BASE_COLUMNS[base])
    for table, on, brought in chain:
        how = draw(st.sampled_from(["inner", "left"]), label="how")
        if table == "regions":
            query = query.join(table, on=on, how=how)
        else:
            truncate = draw(st.integers(1, 3), label="truncate")
            query = query.join(table, on=on, how=how, truncate=truncate)
        columns |= set(brought)
    # Filters (NULL from a left join makes a comparison false: the row is dropped).
    filters = {
        "duration": "duration >= 20",
        "age": "age IS NULL OR age < 60",
        "region": "region <> 'b'",
        "kind": "kind IN ('x', 'y')",
    }
    for column, expression in filters.items():
        if column in columns and draw(st.integers(0, 3), label=f"filter {column}") == 0:
            query = query.filter(expression)
    if "duration" in columns and draw(st.booleans(), label="derived"):
        query = query.with_column(
            "band", "CASE WHEN duration > 50 THEN 'long' ELSE 'short' END"
        ).with_column("d2", "duration * 2")
        columns |= {"band", "d2"}
    # Groups.
    regions = {r[1] for r in database.regions if r[1] is not None and _key_ok(r[0])}
    groupings: list[tuple[str, Any] | None] = [None]
    if "region" in columns:
        groupings.append(("region", KeySet.from_values(region=REGION_NAMES)))
        if regions:  # KeySet.from_table needs a non-NULL key in the public table
            groupings.append(("region", KeySet.from_table("regions", "region")))
    if "kind" in columns:
        groupings.append(("kind", KeySet.from_values(kind=KINDS)))
    if "pkind" in columns:
        groupings.append(("pkind", KeySet.from_values(pkind=KINDS)))
    if "band" in columns:
        groupings.append(("band", KeySet.from_values(band=["long", "short", "none"])))
    grouping = draw(st.sampled_from(groupings), label="group by")
    max_rows = draw(st.integers(1, 3), label="max_rows")
    if grouping is None:
        query = query.bound(max_rows=max_rows)
    else:
        column, keys = grouping
        max_groups = draw(st.integers(1, 3), label="max_groups")
        query = query.group_by(column, keys=keys).bound(max_groups=max_groups, max_rows=max_rows)
    # Aggregations: a count, and some of the others the columns allow.
    query = query.count()
    options: list[Callable[[Query], Query]] = [lambda q: q.count_distinct()]
    if "duration" in columns:
        options += [
            lambda q: q.sum("duration", bounds=(0.0, 100.0)),
            lambda q: q.mean("duration", bounds=(10.0, 100.0)),
        ]
    if "d2" in columns:
        options.append(lambda q: q.sum("d2", bounds=(-50.0, 200.0)))
    if "age" in columns:
        options.append(lambda q: q.sum("age", bounds=(0.0, 100.0)))
    if "weight" in columns:
        options.append(lambda q: q.sum("weight", bounds=(0.0, 5.0)))
    if "region" in columns:
        options.append(lambda q: q.count_distinct("region"))
    chosen = draw(st.lists(st.sampled_from(range(len(options))), max_size=2, unique=True))
    for index in chosen:
        query = options[index](query)
    return query


def _key_ok(key: Any) -> bool:
    return key is not None and key == key  # NULL and NaN keys never match


# ---------------------------------------------------------------------------- the check
def open_session(database: Database, engine: str = "duckdb") -> dp.Session:
    private, public = database.tables()
    return dp.Session.from_tables(
        private, privacy_unit="uid", public=public, budget=dp.PureDP(10.0), rng=1, engine=engine
    )


Exact = dict[tuple[Any, ...], list[int]]
Rows = dict[Any, Counter[tuple[Any, ...]]]


@dataclass(frozen=True)
class Run:
    """One query on one database, with one salt (one evaluation's keyed hashes)."""

    compiled: CompiledQuery  # at budget share 1.0
    exact: Exact  # the integers the engine returns (what the noise is added to)
    rows: Rows  # the joined view's rows, per person
    fan_out: int  # the most joined rows one row of the query's table gives (public)


def run(session: dp.Session, query: Query, rows: bool = True, salt: int = SALT) -> Run:
    view, stripped = session._view_for(query, salt)
    assert view._view is not None
    compiled = view._compile(stripped, 1.0, salt)
    exact = view._engine.aggregate(compiled.plan)
    per_person: Rows = {}
    if rows:
        unit = list(view.columns).index(view._view.unit)
        relation, params = view._view.relation, view._view.params
        for row in view._engine._execute(f"SELECT * FROM {relation} AS v", params):
            comparable = tuple("NaN" if isinstance(v, float) and v != v else v for v in row)
            per_person.setdefault(row[unit], Counter())[comparable] += 1
    return Run(compiled, exact, per_person, view._view.fan_out)


def check_stable(compiled: CompiledQuery, on_x: Exact, on_x_prime: Exact, what: str) -> None:
    """Per group, each statistic moves by at most its sensitivity; at most max_groups
    groups move; per statistic, the L1 distance over groups is at most max_groups times
    the per-group sensitivity."""
    plan = compiled.plan
    width = len(compiled.specs)
    zero = [0] * width
    keys = set(on_x) | set(on_x_prime)
    if plan.keys is not None:
        # Only public keys come out of the engine.
        assert keys <= set(plan.keys.keys), (keys, plan.keys.keys)
    moved = 0
    l1 = [0] * width
    for key in keys:
        a, b = on_x.get(key, zero), on_x_prime.get(key, zero)
        assert len(a) == len(b) == width
        diffs = [abs(int(u) - int(v)) for u, v in zip(a, b, strict=True)]
        for spec, diff in zip(compiled.specs, diffs, strict=True):
            assert spec.noise.groups == plan.max_groups
            assert diff <= spec.noise.sensitivity, (what, spec.aggregation, spec.role, key, a, b)
        moved += any(diffs)
        l1 = [s + d for s, d in zip(l1, diffs, strict=True)]
    assert moved <= plan.max_groups, (what, moved, plan.max_groups, on_x, on_x_prime)
    for spec, total in zip(compiled.specs, l1, strict=True):
        bound = plan.max_groups * spec.noise.sensitivity
        assert total <= bound, (what, spec.aggregation, spec.role, total, bound)


def sensitivities_are_the_bounds(compiled: CompiledQuery) -> None:
    """The sensitivity of each statistic is what ``bound`` says, whatever the joins."""
    plan = compiled.plan
    for spec in compiled.specs:
        rows = 1 if spec.statistic.op == "units" else plan.max_rows
        assert spec.noise.sensitivity == rows * spec.statistic.row_bound()


def neighbours_within_sensitivity(data: st.DataObject) -> None:
    database = data.draw(databases(), label="database")
    x, x_prime = open_session(database), open_session(database.without(0))
    removed = database.unit(0)
    for _ in range(QUERIES_PER_DATABASE):
        query = data.draw(queries(database), label="query")
        on_x, on_x_prime = run(x, query), run(x_prime, query)
        # Compilation reads public information only: the same plan on both neighbours.
        assert on_x.compiled == on_x_prime.compiled
        sensitivities_are_the_bounds(on_x.compiled)
        check_stable(on_x.compiled, on_x.exact, on_x_prime.exact, repr(query))
        # The joined view itself: the person's joined rows go, no one else's change,
        # and a person has at most fan_out joined rows per row of the query's table.
        assert removed not in on_x_prime.rows
        assert {p: r for p, r in on_x.rows.items() if p != removed} == on_x_prime.rows
        base_rows = database.base_rows(query.table)
        for person, rows in on_x.rows.items():
            if person is not None:
                assert rows.total() <= on_x.fan_out * base_rows[person], (repr(query), person)


@settings(FAST)
@given(data=st.data())
def test_neighbours_move_exact_integers_within_the_sensitivity(data: st.DataObject) -> None:
    neighbours_within_sensitivity(data)


@pytest.mark.slow
@settings(SLOW)
@given(data=st.data())
def test_neighbours_move_exact_integers_within_the_sensitivity_large(
    data: st.DataObject,
) -> None:
    neighbours_within_sensitivity(data)


# ---------------------------------------------------------------------------- Spark
def same_on_spark(data: st.DataObject) -> None:
    database = data.draw(databases(integer_nulls=True), label="database")
    duck, spark = open_session(database), open_session(database, engine="spark")
    for _ in range(2):
        query = data.draw(queries(database), label="query")
        on_duck, on_spark = run(duck, query, rows=False), run(spark, query, rows=False)
        assert on_duck.compiled == on_spark.compiled
        assert on_duck.exact == on_spark.exact, repr(query)


@settings(SPARK)
@given(data=st.data())
def test_spark_computes_duckdbs_integers(spark: Any, data: st.DataObject) -> None:
    same_on_spark(data)


@pytest.mark.slow
@settings(SPARK_SLOW)
@given(data=st.data())
def test_spark_computes_duckdbs_integers_large(spark: Any, data: st.DataObject) -> None:
    same_on_spark(data)


def test_truncation_keeps_the_same_rows_with_integer_nulls(spark: Any) -> None:
    # Found by this file: the keyed hash of a row with a NULL in an integer (or date,
    # timestamp) column was NULL, which DuckDB orders last and Spark first. NULLs now hash
    # as (0, is-NULL flag), and both engines keep the same rows, chosen by the salt.
    visits = pa.table({"uid": pa.array([1, 1], pa.int64()), "region_id": pa.array([None, 2])})
    people = pa.table({"uid": pa.array([1], pa.int64()), "age": pa.array([30], pa.int64())})
    query = (
        Query.from_table("people")
        .join("visits", on="uid", truncate=1)
        # Reads both tables, so it is applied after the join (a filter on visits alone
        # would run before truncation, and the NULL row would always be kept).
        .filter("region_id IS NULL OR age < 0")
        .bound(max_rows=1)
        .count()
    )
    kept = {}
    for engine in ("duckdb", "spark"):
        session = dp.Session.from_tables(
            {"people": people, "visits": visits},
            privacy_unit="uid",
            budget=dp.PureDP(1.0),
            rng=1,
            engine=engine,
        )
        salts = range(1, 9) if engine == "duckdb" else range(1, 4)
        kept[engine] = [run(session, query, rows=False, salt=salt).exact for salt in salts]
    assert kept["duckdb"][:3] == kept["spark"]
    # The salt chooses: the NULL row is kept under some salts and not others.
    assert len({str(k) for k in kept["duckdb"]}) == 2


# ---------------------------------------------------------------------------- per person
# Query.per_person (dpkit.analytics._per_person): the per-person rows are computed from
# one person's rows each, so removing a person removes that person's per-person rows and
# changes no other; the query's exact integers then move within its sensitivity, as for
# any other relation. The same joins as above, then a per-person step, then groups.


@st.composite
def per_person_queries(draw: st.DrawFn, database: Database) -> tuple[Query, bool]:
    """A query with a per-person step, and whether the step groups by a column too."""
    base = draw(st.sampled_from(["visits", "visits", "people"]), label="base")
    chain = draw(st.sampled_from(CHAINS[base]), label="joins")
    query = Query.from_table(base)
    columns = set(BASE_COLUMNS[base])
    for table, on, brought in chain:
        how = draw(st.sampled_from(["inner", "left"]), label="how")
        if table == "regions":
            query = query.join(table, on=on, how=how)
        else:
            query = query.join(table, on=on, how=how, truncate=draw(st.integers(1, 3)))
        columns |= set(brought)
    if "duration" in columns and draw(st.booleans(), label="filter before"):
        query = query.filter("duration >= 20")
    # By: nothing, or a key column (doubles with NaN and -0.0, NULLs, strings).
    by_options: list[tuple[str, ...]] = [()]
    by_options += [(c,) for c in ("kind", "pkind", "region_id", "home") if c in columns]
    by = draw(st.sampled_from(by_options), label="by")
    aggregates: dict[str, Any] = {"n": "count"}
    if "duration" in columns:
        aggregates["total"] = ("sum", "duration")
        aggregates["longest"] = ("max", "duration")
        aggregates["long_visits"] = ("count", "CASE WHEN duration > 50 THEN 1 END")
    if "age" in columns:
        aggregates["age"] = ("mean", "age")
    if "region" in columns:
        aggregates["first_region"] = ("min", "region")
    query = query.per_person(by=by, **aggregates)
    if draw(st.booleans(), label="filter after"):
        query = query.filter("n >= 2")
    max_rows = draw(st.integers(1, 3), label="max_rows")
    grouping = draw(st.sampled_from(["none", "bins", *(["by"] if by else [])]), label="groups")
    if grouping == "none":
        query = query.bound(max_rows=max_rows)
    elif grouping == "bins":
        query = query.group_by_bins("n", [0, 1, 2, 3, 5, 100]).bound(
            max_groups=draw(st.integers(1, 3)), max_rows=max_rows
        )
    else:
        query = query.group_by(by[0], keys="private").bound(
            max_groups=draw(st.integers(1, 3)), max_rows=max_rows
        )
    query = query.count().sum("n", bounds=(0.0, 6.0)).count_distinct()
    if "total" in aggregates:
        query = query.sum("total", bounds=(0.0, 400.0)).mean("longest", bounds=(0.0, 130.0))
        query = query.sum("long_visits", bounds=(0.0, 3.0))
    if "age" in aggregates:
        query = query.sum("age", bounds=(0.0, 99.0))
    return query, bool(by)


def per_person_rows(session: dp.Session, query: Query, salt: int = SALT) -> Rows:
    """The per-person rows a query reads, per person (as the engine holds the unit)."""
    view, _ = session._view_for(query, salt)
    unit = list(view.columns).index(view._unit)
    engine = view._engine
    rows: Rows = {}
    for row in engine._execute(f"SELECT * FROM {engine.relation} AS v", engine._relation_params):
        comparable = tuple("NaN" if isinstance(v, float) and v != v else v for v in row)
        rows.setdefault(row[unit], Counter())[comparable] += 1
    return rows


def exact_of(session: dp.Session, query: Query, salt: int = SALT) -> tuple[CompiledQuery, Exact]:
    view, stripped = session._view_for(query, salt)
    compiled = view._compile(stripped, 1.0, salt)
    return compiled, view._engine.aggregate(compiled.plan)


def per_person_within_sensitivity(data: st.DataObject) -> None:
    database = data.draw(databases(), label="database")
    budget = dp.ApproxDP(10.0, 1e-3)  # private keys for "by" groups
    private, public = database.tables()
    x, x_prime = (
        dp.Session.from_tables(p, privacy_unit="uid", public=public, budget=budget, rng=1)
        for p in (private, database.without(0).tables()[0])
    )
    removed = database.unit(0)
    for _ in range(QUERIES_PER_DATABASE):
        query, grouped = data.draw(per_person_queries(database), label="query")
        (compiled, on_x), (compiled_prime, on_x_prime) = (
            exact_of(x, query),
            exact_of(x_prime, query),
        )
        assert compiled == compiled_prime  # public information only
        sensitivities_are_the_bounds(compiled)
        check_stable(compiled, on_x, on_x_prime, repr(query))
        rows, rows_prime = per_person_rows(x, query), per_person_rows(x_prime, query)
        assert removed not in rows_prime
        assert {p: r for p, r in rows.items() if p != removed} == rows_prime
        assert None not in rows  # rows with no person are dropped
        if not grouped:
            assert all(r.total() == 1 for r in rows.values())


@settings(FAST, max_examples=8)
@given(data=st.data())
def test_per_person_rows_are_one_persons_and_move_within_the_sensitivity(
    data: st.DataObject,
) -> None:
    per_person_within_sensitivity(data)


@pytest.mark.slow
@settings(SLOW)
@given(data=st.data())
def test_per_person_rows_are_one_persons_and_move_within_the_sensitivity_large(
    data: st.DataObject,
) -> None:
    per_person_within_sensitivity(data)


def per_person_same_on_spark(data: st.DataObject) -> None:
    database = data.draw(databases(), label="database")
    private, public = database.tables()
    duck, spark = (
        dp.Session.from_tables(
            private,
            privacy_unit="uid",
            public=public,
            budget=dp.ApproxDP(10.0, 1e-3),
            rng=1,
            engine=engine,
        )
        for engine in ("duckdb", "spark")
    )
    for _ in range(2):
        query, _ = data.draw(per_person_queries(database), label="query")
        assert exact_of(duck, query) == exact_of(spark, query), repr(query)


@settings(SPARK, max_examples=1)
@given(data=st.data())
def test_per_person_spark_computes_duckdbs_integers(spark: Any, data: st.DataObject) -> None:
    per_person_same_on_spark(data)


@pytest.mark.slow
@settings(SPARK_SLOW)
@given(data=st.data())
def test_per_person_spark_computes_duckdbs_integers_large(spark: Any, data: st.DataObject) -> None:
    per_person_same_on_spark(data)
