"""Joins in a Session over several tables: the joined view a query reads, and why it is
stable.

A query over several tables (``Query.from_table("visits").join("regions", on=...)``)
reads one relation, the **joined view**, built here in SQL from the Session's tables
(:mod:`dpkit.analytics._catalog`); every later step -- filters, derived columns, groups,
contribution bounding, aggregates -- is the single-table path, run over the joined rows
(:mod:`dpkit.analytics.engines._sql`). So the joined view must be a stable
transformation whose per-person output is bounded by public numbers.

Neighbouring databases
    Two databases are neighbours when one is the other with **one person added or
    removed, with all their rows in every private table** (the privacy unit columns of
    all private tables hold the same ids: one person, one id). Public tables are the
    same in both: they are public, read once at creation and never change for the
    Session's life. Every guarantee of a Session over several tables is about this
    relation (the single-table Session's "add/remove one person" is its special case).

The joined rows of one person
    The query's first table (``from_table``) is private; its privacy unit column is the
    joined view's privacy unit, and every joined row belongs to the person of the row of
    that table it extends. Each join is one of:

    1. **Private table joined with a public table** (inner or left, on any keys). A
       joined row is a row of the person's plus public columns, so the person's joined
       rows depend on that person's rows (and the public table) only: the
       transformation is *row-by-row* in the private rows. Each private row meets at
       most ``M`` public rows, where ``M`` -- the public table's largest number of rows
       sharing one key -- is public (read from the public table, shown by ``explain``);
       a public table with duplicate keys multiplies a person's rows by up to ``M``
       before the contribution bound (a left join keeps a row with no match: at most
       ``max(M, 1)``). With ``M = 1`` this is a lookup. This is Tumult Analytics'
       public join and a "stability ``M``" join in the FLEX view (Johnson, Near & Song,
       "Towards Practical Differential Privacy for SQL Queries", VLDB 2018: the
       elastic sensitivity of a join with a public table is its key's largest
       frequency there); dpkit bounds the person's contribution *after* the join, so
       ``M`` enters the cost, not the noise.

    2. **Two private tables** (``people`` joined with ``visits``), on the privacy unit
       or on another key (``orders`` joined with ``lineitem`` on ``orderkey``, the unit
       being the customer): the join keys are compared **and** the two rows must
       belong to the same person -- the privacy units are part of the join condition.
       A pair of rows of two different persons never joins: such a row would belong to
       two persons, and removing either would change the other's rows, which no bound
       per person controls (the many-to-many blow-up that FLEX's elastic sensitivity
       and R2T's truncation -- Dong, Fang, Yi, Tao & Machanavajjhala, SIGMOD 2022 --
       exist to bound). On correct data (the unit a function of the key, e.g. each
       order belongs to one customer) the condition removes nothing. Before the join,
       each person keeps at most ``truncate`` (public) of their rows of the joined
       table *per value of the join keys*, those of smallest keyed hash of the row (a
       fresh secret salt per query; ties broken by the row's canonical values:
       deterministic, so the same on DuckDB and Spark): a rule on that person's rows
       alone -- Tumult's truncation before a private join (``DropExcess``). So each row
       meets at most ``truncate`` rows, and the join's size is at most ``truncate`` times
       the rows before it: bounded by public numbers before anything runs (rule 3 of the
       threat model), never discovered at run time. With an inner join, the query's
       filter terms that read this table's columns alone are applied to its rows first
       (:func:`_pushed_filters`): a row-level filter of the person's own rows, so the
       truncation that follows is still a rule on that person's rows. When that table
       is joined on the privacy unit alone (a table of persons' attributes), the
       persons its filtered rows belong to are the only ones a joined row can belong
       to: the base table's and every other private table's rows are restricted to
       them first, whole persons left out (:func:`_selects_persons`).

    In both cases adding or removing one person adds or removes that person's joined
    rows and changes no other person's: the joined view is stable in the sense the
    single-table path needs (each person's rows are a function of that person's rows).
    **Contribution bounding happens after the joins**, per person, on the joined rows
    (``Query.bound``: ``max_groups`` groups, ``max_rows`` rows per group), so the
    sensitivity of every statistic is what ``bound`` says, whatever the joins did -- the
    multiplicities and truncations bound the cost, not the noise. (Bounding *before* a
    join with duplicate public keys would let a person's rows be multiplied by ``M``
    after the bound: the planted bug the audit of tests/statistical/audit catches.)

Keys and rule 2 (the engine's equality is the only equality)
    Join keys and privacy units are compared in their canonical form, computed in SQL
    (:mod:`dpkit.analytics._canonical`: byte-wise strings whatever the collation, one
    zero, NaN as missing, dates and timestamps as integers no time zone touches). The
    two sides of a key must have the same canonical category (an INTEGER with a
    BIGINT, a VARCHAR with a VARCHAR, ...), checked on the schemas; NULL (and NaN)
    keys never match.

Partitions
    A sub-Session of ``Session.partition(column, keys, budgets, table=T)`` sees, in
    every private table, only the persons assigned to its part (a person's part is
    decided on their rows of ``T``, by the keyed-hash rule of the single-table
    partition), and in ``T`` only the rows with ``column = key``. Adding or removing a
    person changes one part, so the parts compose in parallel as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpkit.analytics._canonical import crossing_type, key_category, to_engine
from dpkit.analytics._catalog import Catalog, TableInfo
from dpkit.analytics._plan import PartScope
from dpkit.analytics.engines._hash import SMALL_INDEX, TypedPart
from dpkit.analytics.query import Join, Query
from dpkit.errors import DataError, DPError, InvalidParameter

__all__ = ["JoinStep", "JoinedView", "joined_view"]

#: Key categories whose values the truncation hash mixes in (integers after canonical
#: SQL: cheap exact arithmetic).
_CHEAP = ("integer", "date", "timestamp", "timestamptz")

_OWNER = "Query.join"


@dataclass(frozen=True)
class JoinStep:
    """One join as ``explain`` shows it (public information only)."""

    table: str
    how: str
    on: tuple[tuple[str, str], ...]
    public: bool
    #: Most rows of ``table`` one row can meet: ``M`` (public) or ``truncate`` (private).
    fan_out: int
    columns: tuple[str, ...]

    def describe(self) -> str:
        keys = ", ".join(a if a == b else f"{a} = {b}" for a, b in self.on)
        if self.public:
            what = (
                f"public table, at most {self.fan_out} row(s) per key: each row meets "
                f"at most {self.fan_out}"
            )
            if self.fan_out > 1:
                what += " (duplicate keys multiply a person's rows before the bound)"
        else:
            what = (
                f"private table, same person only, at most {self.fan_out} row(s) per "
                "person and key kept (keyed hash) before the join"
            )
        return f"{self.how} join {self.table} on ({keys}): {what}"


@dataclass(frozen=True)
class JoinedView:
    """The relation a query over several tables reads (module docstring)."""

    relation: str
    params: tuple[Any, ...]
    unit: str
    base: str
    steps: tuple[JoinStep, ...]
    #: Most joined rows one row of the base table can give (product of the fan-outs).
    fan_out: int
    #: Columns of the joined tables left out (no canonical form to break ties on).
    dropped: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line for a result's notes."""
        joined = "; ".join(
            f"{s.how} join {s.table} ({'public' if s.public else 'private'}, at most "
            f"{s.fan_out} per {'key' if s.public else 'person'})"
            for s in self.steps
        )
        return (
            f"Rows read: {self.base}"
            + (f", {joined}" if joined else "")
            + "; contribution bounds applied to the joined rows, per person."
        )

    def lines(self) -> tuple[str, ...]:
        """``explain``'s description of the joins."""
        out = [f"from {self.base} (private; privacy unit {self.unit!r})"]
        out += ["  " + s.describe() for s in self.steps]
        if self.steps:
            out.append(
                f"  each row of {self.base} gives at most {self.fan_out} joined row(s); "
                "contribution bounds apply to the joined rows, per person"
            )
        out += [f"  left out (no canonical form): {c}" for c in self.dropped]
        return tuple(out)


def _q(engine: Any, name: str) -> str:
    return str(engine.q(name))


@dataclass(frozen=True)
class _Truncation:
    """A private table's truncation before its join (:meth:`_Builder.truncated`)."""

    info: TableInfo
    columns: list[str]
    keys: list[str]
    cap: int
    #: The query's filter terms on this table alone, applied first (_pushed_filters).
    where: list[str]
    how: str


@dataclass(frozen=True)
class _Joined:
    """One join of the joined view, rendered once every join is known."""

    info: TableInfo
    alias: str
    kind: str
    on: str
    truncation: _Truncation | None


def _selects_persons(truncation: _Truncation) -> bool:
    """Whether the filters of an inner join with a private table joined on its unit
    alone restrict every other table's rows to the persons it keeps.

    Why the joined view is the same: with an inner join, every joined row meets a row
    of this table of the same person among those where the filters hold (the privacy
    units are part of every private join's condition; truncation keeps at least one
    row of each person and key that has one). So the rows of a person with no such
    row join nothing, and leaving them out of the other tables before anything else
    changes no joined row. Every other person's rows are all still there, and
    truncation (per person and key) and partitions (a person's part comes from their
    own rows) treat them as before: each person's rows are still a function of that
    person's rows alone, so stability is untouched.

    Why only a table joined on its unit alone: a table of one row per person (a
    person's attributes: TPC-H's customer and its market segment) is the cheap, and
    usually selective, set of persons to read again; a filter on another table (an
    order's date) keeps most persons and would cost a scan of that table for nothing.
    On TPC-H Q3 at SF 1 DuckDB's statement went 0.148 -> 0.114 s: the lineitem and
    orders of the other market segments are dropped before their truncation and join
    (benchmarks/results/tpch_sql.md)."""
    return (
        truncation.how == "inner"
        and bool(truncation.where)
        and set(truncation.keys) == {truncation.info.unit}
    )


class _Builder:
    """Writes the joined view's SQL for one engine (its dialect hooks)."""

    def __init__(
        self, engine: Any, catalog: Catalog, partitions: Sequence[PartScope], salt: int
    ) -> None:
        self.engine = engine
        self.catalog = catalog
        self.partitions = tuple(partitions)
        self.salt = salt

    def canon(self, sql: str, type_name: str) -> str:
        return str(self.engine.canonical_key_sql(sql, type_name))

    # --------------------------------------------------------------- partitions
    def visible(self, info: TableInfo, depth: int | None = None) -> tuple[str, list[Any]]:
        """SQL of the rows of ``info`` a (sub-)Session sees: all of them, or with
        partitions, the persons assigned to the part at each level (module docstring)."""
        depth = len(self.partitions) if depth is None else depth
        sql, params = f"SELECT * FROM {info.relation}", list[Any]()
        if info.public:
            return sql, params
        assert info.unit is not None
        for level in range(depth):
            part = self.partitions[level]
            assert part.table is not None
            owner = self.catalog.table(part.table, "Session.partition")
            column_type = owner.schema[part.column]
            conditions, extra = [], list[Any]()
            if owner.name == info.name:
                c = self.canon(_q(self.engine, part.column), column_type)
                conditions.append(f"{c} = ?")
                extra.append(to_engine(part.key, key_category(column_type) or ""))
            assigned, assigned_params = self._assigned(owner, part, level, column_type)
            unit = self.canon(_q(self.engine, info.unit), info.schema[info.unit])
            conditions.append(f"{unit} IN ({assigned})")
            extra += assigned_params
            sql = f"SELECT * FROM ({sql}) AS __p WHERE " + " AND ".join(conditions)
            params += extra
        return sql, params

    def _assigned(
        self, owner: TableInfo, part: PartScope, level: int, column_type: str
    ) -> tuple[str, list[Any]]:
        """SQL of the canonical units whose row of smallest (H(salt, unit, column),
        column) among their rows of ``owner`` visible at ``level`` is in the part."""
        assert owner.unit is not None
        source, params = self.visible(owner, level)
        unit_type = owner.schema[owner.unit]
        u = self.canon(_q(self.engine, owner.unit), unit_type)
        c = self.canon(_q(self.engine, part.column), column_type)
        keyed = self.engine._hash(part.salt)
        linear = keyed.linear(
            [
                TypedPart("__pu", crossing_type(unit_type)),
                TypedPart("__pc", crossing_type(column_type)),
            ]
        )
        pairs = (
            f"(SELECT __pu, __pc, {linear} AS __hl FROM (SELECT {u} AS __pu, {c} AS __pc FROM "
            f"({source}) AS __q) AS __q2 WHERE __pu IS NOT NULL AND __pc IS NOT NULL) AS __r0"
        )
        sql = (
            f"SELECT __pu FROM ({keyed.finished(pairs, '__hl', '__h')}) AS __r GROUP BY __pu "
            f"HAVING min_by(__pc, {self.engine.pair('__h', '__pc')}) = ?"
        )
        key = to_engine(part.key, key_category(column_type) or "")
        return sql, [*params, key]

    # --------------------------------------------------------------- truncation
    def truncated(
        self,
        info: TableInfo,
        columns: Sequence[str],
        keys: Sequence[str],
        cap: int,
        where: Sequence[str] = (),
        persons: Sequence[tuple[str, list[Any]]] = (),
    ) -> tuple[str, list[Any]]:
        """SQL of each person's at most ``cap`` rows of ``info`` per value of the join
        ``keys`` among those where every condition of ``where`` holds (the query's
        filters on this table alone, :func:`_pushed_filters`), those of smallest keyed
        hash of the row (ties by the row's canonical values): a rule on the person's
        rows. ``persons``: sets of persons (:meth:`persons`) the rows' person must be
        in -- whole persons' rows left out, which changes no other person's."""
        assert info.unit is not None
        source, params = self.visible(info)
        unit_sql = self.canon(_q(self.engine, info.unit), info.schema[info.unit])
        conditions = [f"{unit_sql} IS NOT NULL"]
        if where:
            table = self.engine.with_relation(info.relation)
            conditions += [f"({table.expression(w)})" for w in where]
        for persons_sql, persons_params in persons:
            conditions.append(f"{unit_sql} IN ({persons_sql})")
            params = [*params, *persons_params]
        per = [self.canon(_q(self.engine, k), info.schema[k]) for k in keys if k != info.unit]
        parts = [TypedPart(unit_sql, crossing_type(info.schema[info.unit]))]
        order: list[str] = []
        for column in columns:
            type_name = info.schema[column]
            x = _q(self.engine, column)
            canonical = self.canon(x, type_name)
            order += self._order_keys(x, canonical, type_name)
            if column == info.unit or key_category(type_name) not in _CHEAP:
                continue
            # The hash mixes the integer-like columns (exact integer arithmetic, cheap); a
            # string's md5 or a double's exact limbs cost ~10x more per row (measured on
            # TPC-H orders: 3.6 s for 1.5M rows hashing every column, benchmarks/
            # results/tpch_sql.md). Rows that tie are then ordered by every canonical
            # value, so the choice is deterministic all the same. A NULL hashes as (0, is
            # NULL): the limbs have no NULL case, and a NULL hash would be ordered apart
            # by DuckDB and Spark (found by the stability tests).
            parts.append(TypedPart(f"coalesce({canonical}, 0)", crossing_type(type_name)))
            parts.append(
                TypedPart(f"(CASE WHEN {canonical} IS NULL THEN 1 ELSE 0 END)", SMALL_INDEX)
            )
        keyed = self.engine._hash(self.salt)
        selected = ", ".join(_q(self.engine, c) for c in columns)
        ranked = ", ".join(["__dpkit_h ASC NULLS FIRST", *order])
        keys = ["__dpkit_tu", *(f"__dpkit_tk{i}" for i in range(len(per)))]
        partition = ", ".join(keys)
        # The columns by name (never *): a table column may not shadow dpkit's own
        # (names starting with __dpkit are refused at creation, _catalog).
        per_keys = "".join(f", {p} AS __dpkit_tk{i}" for i, p in enumerate(per))
        rows = (
            f"SELECT {selected}, {unit_sql} AS __dpkit_tu{per_keys} FROM ({source}) AS __t "
            f"WHERE {' AND '.join(conditions)}"
        )
        # A person's rows of one key value that are at most ``cap`` are all kept, as
        # the ranking would keep them (their ranks are 1..n <= cap): only the others are
        # ranked. The same rows as ranking every row, without sorting the rows of the
        # persons within the cap (TPC-H's orders, one row per order: no sort at all).
        # The (person, key) values with more than ``cap`` rows are found by one GROUP BY
        # (the same groups as a window partitioned by them: the keys are canonical, and
        # NULL matches NULL in the joins below as in a partition); the rows of the
        # others pass an anti join with that set, usually empty, and only the rows of
        # the values in it are ranked. Measured on TPC-H SF 1 orders: 0.19 s, against
        # 0.36 s for a window count over every row and 0.49 s for ranking every row.
        # The keyed hash orders only the ranked rows, so it is computed on them alone,
        # after the semi join, from their selected columns (every column it mixes is
        # one of them), and finished in projections (KeyedHash.finished): written once,
        # not in each of the four copies of the rows. With it TPC-H Q10's statement
        # went from 28 to 13 KB of SQL, and DuckDB's parsing, binding and planning of it
        # shrank with it (issue 30). The kept rows are the same.
        over = (
            f"SELECT {partition} FROM ({rows}) AS __h GROUP BY {partition} "
            f"HAVING count(*) > {int(cap)}"
        )
        on = " AND ".join(f"__h.{k} IS NOT DISTINCT FROM __x.{k}" for k in keys)
        engine = self.engine
        over_cap = f"SELECT __h.* FROM ({rows}) AS __h {engine.semi_join} ({over}) AS __x ON {on}"
        linear = (
            f"(SELECT __s.*, {keyed.linear(parts)} AS __dpkit_hl FROM ({over_cap}) AS __s) AS __l"
        )
        hashed = keyed.finished(linear, "__dpkit_hl", "__dpkit_h")
        sql = (
            f"SELECT {selected} FROM ({rows}) AS __h {engine.anti_join} ({over}) AS __x "
            f"ON {on} UNION ALL SELECT {selected} FROM ({hashed}) AS __o QUALIFY "
            f"row_number() OVER (PARTITION BY {partition} ORDER BY {ranked}) <= {int(cap)}"
        )
        return sql, [*params, *params, *params, *params]

    def persons(self, info: TableInfo, where: Sequence[str]) -> tuple[str, list[Any]]:
        """SQL of the canonical units (persons) with a row of ``info`` that the
        (sub-)Session sees and where every condition of ``where`` holds, and its
        parameters (:func:`_person_filters`)."""
        assert info.unit is not None
        source, params = self.visible(info)
        unit_sql = self.canon(_q(self.engine, info.unit), info.schema[info.unit])
        table = self.engine.with_relation(info.relation)
        conditions = [f"{unit_sql} IS NOT NULL", *(f"({table.expression(w)})" for w in where)]
        return f"SELECT {unit_sql} FROM ({source}) AS __t WHERE {' AND '.join(conditions)}", params

    @staticmethod
    def _order_keys(x: str, canonical: str, type_name: str) -> list[str]:
        """ORDER BY terms making rows that tie on them equal in every canonical value
        (and, for doubles, in NULL/NaN and the sign of zero; temporal values also by
        themselves): a deterministic choice on every engine."""
        category = key_category(type_name)
        terms = [f"{canonical} ASC NULLS FIRST"]
        if category == "double":
            flag = f"CASE WHEN {x} IS NULL THEN 0 WHEN isnan({x}) THEN 1 ELSE 2 END"
            sign = f"CASE WHEN {x} = 0 AND atan2({x}, -1.0) < 0 THEN 1 ELSE 0 END"
            terms = [f"{flag} ASC", *terms, f"{sign} ASC"]
        elif category in ("date", "timestamp", "timestamptz"):
            terms.append(f"{x} ASC NULLS FIRST")
        return terms


def joined_view(
    query: Query,
    catalog: Catalog,
    engine: Any,
    partitions: Sequence[PartScope],
    salt: int,
) -> tuple[JoinedView, dict[str, str]]:
    """The joined view ``query`` reads (its base table and joins), and its schema.

    Public information only (schemas, public tables, the query): a refusal here spends
    nothing and is the same on every database of the schema.
    """
    builder = _Builder(engine, catalog, partitions, salt)
    used = _used_columns(query)
    base_name = _base_table(query, catalog)
    base = catalog.table(base_name, "Query.from_table")
    if base.public:
        raise InvalidParameter(
            f"Query.from_table: {base_name!r} is a public table. A query starts from a "
            f"private table ({catalog.private_names()}) and may join public ones; a "
            "public table can be read directly (Session.public_query)."
        )
    assert base.unit is not None
    # Output column -> (alias, column, type), in order; names compared ignoring case
    # (the engines resolve names that way).
    origin: dict[str, tuple[str, str, str]] = {c: ("__t0", c, t) for c, t in base.schema.items()}
    # Each join's table, rendered once every join is known (the persons' sets below).
    joined: list[_Joined] = []
    steps: list[JoinStep] = []
    dropped: list[str] = []
    fan_out = 1
    for index, join in enumerate(query.joins, start=1):
        alias = f"__t{index}"
        right = catalog.table(join.table, _OWNER)
        if right.name == base.name or any(s.table == right.name for s in steps):
            raise InvalidParameter(
                f"{_OWNER}: {right.name!r} is already in the query; a table joins once."
            )
        conditions = []
        for left_column, right_column in join.on:
            left_alias, left_name, left_type = _column(origin, left_column, "left")
            if right_column not in right.schema:
                raise DataError(
                    f"{_OWNER}: {right.name!r} has no column {right_column!r}. Columns: "
                    f"{list(right.schema)}."
                )
            right_type = right.schema[right_column]
            _same_category(left_column, left_type, right.name, right_column, right_type)
            left_sql = builder.canon(f"{left_alias}.{_q(engine, left_name)}", left_type)
            right_sql = builder.canon(f"{alias}.{_q(engine, right_column)}", right_type)
            conditions.append(f"{left_sql} = {right_sql}")
        keys_right = {r for _, r in join.on}
        if right.public:
            if join.truncate is not None:
                raise InvalidParameter(
                    f"{_OWNER}: truncate= applies to a join with a private table; "
                    f"{right.name!r} is public (its multiplicity per key is known)."
                )
            multiplicity = catalog.multiplicity(right.name, [r for _, r in join.on], _OWNER)
            step_fan_out = multiplicity
            default = [c for c in right.schema if c not in keys_right]
            columns = _chosen(join, right, default, set())
            truncation = None
            shown = multiplicity
        else:
            assert right.unit is not None
            if join.truncate is None:
                raise InvalidParameter(
                    f"{_OWNER}: joining the private table {right.name!r} needs truncate=: "
                    "how many rows of each person in it one row may meet (e.g. 1 for a "
                    "table with one row per person). It bounds the join's size by public "
                    "numbers before it runs."
                )
            _same_category(
                base.unit, base.schema[base.unit], right.name, right.unit, right.schema[right.unit]
            )
            unit_left = builder.canon(f"__t0.{_q(engine, base.unit)}", base.schema[base.unit])
            unit_right = builder.canon(
                f"{alias}.{_q(engine, right.unit)}", right.schema[right.unit]
            )
            conditions.append(f"{unit_left} = {unit_right}")
            orderable = [c for c in right.schema if key_category(right.schema[c]) is not None]
            dropped += [f"{right.name}.{c}" for c in right.schema if c not in orderable]
            default = [c for c in orderable if c not in keys_right and c != right.unit]
            columns = _chosen(join, right, default, {right.unit})
            unorderable = [c for c in columns if c not in orderable]
            if unorderable:
                raise InvalidParameter(
                    f"{_OWNER}: columns {unorderable} of the private table {right.name!r} "
                    "have no canonical form, so the rows kept by truncation could not be "
                    "chosen deterministically; leave them out (columns=)."
                )
            if used is not None:
                # Only what the query reads: the truncation window carries and ranks
                # these columns (rows that tie on them are alike for this query).
                columns = [c for c in columns if c in used]
            needed = list(dict.fromkeys([right.unit, *keys_right, *columns]))
            pushed = _pushed_filters(query, right, origin, columns, join.how)
            truncation = _Truncation(
                right, needed, [r for _, r in join.on], join.truncate, pushed, join.how
            )
            step_fan_out = join.truncate
            shown = join.truncate
        for column in columns:
            clash = [c for c in origin if c.casefold() == column.casefold()]
            if clash:
                raise InvalidParameter(
                    f"{_OWNER}: column {column!r} of {right.name!r} clashes with "
                    f"{clash[0]!r}, already in the rows; bring other columns with "
                    "columns=[...]."
                )
            origin[column] = (alias, column, right.schema[column])
        kind = "LEFT JOIN" if join.how == "left" else "JOIN"
        joined.append(_Joined(right, alias, f" {kind} ", " AND ".join(conditions), truncation))
        fan_out *= max(step_fan_out, 1) if join.how == "left" else step_fan_out
        steps.append(JoinStep(right.name, join.how, join.on, right.public, shown, tuple(columns)))
    # Persons some joined row could belong to (_person_filters), and the rows of every
    # other private table restricted to them.
    persons = {
        j.alias: builder.persons(j.info, j.truncation.where)
        for j in joined
        if j.truncation is not None and _selects_persons(j.truncation)
    }
    base_sql, params = builder.visible(base)
    if persons:
        unit = builder.canon(_q(engine, base.unit), base.schema[base.unit])
        base_sql = f"SELECT * FROM ({base_sql}) AS __b WHERE " + " AND ".join(
            f"{unit} IN ({sql})" for sql, _ in persons.values()
        )
        params += [p for _, extra in persons.values() for p in extra]
    from_sql = f"({base_sql}) AS __t0"
    for j in joined:
        if j.truncation is None:
            right_sql, right_params = builder.visible(j.info)
        else:
            t = j.truncation
            others = [sets for alias, sets in persons.items() if alias != j.alias]
            right_sql, right_params = builder.truncated(
                t.info, t.columns, t.keys, t.cap, t.where, others
            )
        from_sql += f"{j.kind}({right_sql}) AS {j.alias} ON {j.on}"
        params += right_params
    selected = ", ".join(
        f"{alias}.{_q(engine, column)} AS {_q(engine, name)}"
        for name, (alias, column, _) in origin.items()
    )
    relation = f"(SELECT {selected} FROM {from_sql})"
    schema = {name: type_name for name, (_, _, type_name) in origin.items()}
    view = JoinedView(
        relation=relation,
        params=tuple(params),
        unit=base.unit,
        base=base.name,
        steps=tuple(steps),
        fan_out=fan_out,
        dropped=tuple(dropped),
    )
    return view, schema


def _pushed_filters(
    query: Query, right: TableInfo, origin: dict[str, Any], columns: Sequence[str], how: str
) -> list[str]:
    """The conditions of the query's filters (its top-level ``AND`` terms) that read
    columns of the private table ``right`` only, in their checked total form, applied to
    ``right``'s rows *before* truncation: so truncation keeps up to ``truncate`` rows
    among those the query reads, not among all rows (TPC-H Q3: the orders of the
    period, not any order), and the engine joins fewer rows. An inner join only: under
    a LEFT JOIN a row whose matches all fail would be kept with NULLs (another answer).
    The filters still apply to the joined rows after; a row-level filter of a person's
    own rows before truncation keeps truncation a rule on that person's rows."""
    import sqlglot
    from sqlglot import exp

    from dpkit.analytics._expr import validate_expression
    from dpkit.analytics._total_filter import with_total_terms_bare

    step = query.per_person_step
    filters = step.filters if step is not None else query.filters
    derived = {n for n, _ in (step.derived if step is not None else query.derived)}
    if how != "inner" or not filters:
        return []
    own = {c for c in columns if c not in origin}
    pushed = []
    for text in filters:
        try:
            tree = sqlglot.parse_one(text, read="duckdb")
        except (sqlglot.errors.ParseError, RecursionError):
            continue  # the compiler refuses it, with its reason
        terms = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
        for term in terms:
            names = {c.name for c in term.find_all(exp.Column)}
            if any(c.table for c in term.find_all(exp.Column)):
                continue
            if not names or not names <= own or names & derived:
                continue
            try:
                text = term.sql(dialect="duckdb")
                checked = validate_expression(text, own, "Query.filter")
                pushed.append(with_total_terms_bare(checked, text, right.schema))
            except (DPError, RecursionError):  # refused where the whole filter is checked
                continue
    return pushed


def _used_columns(query: Query) -> set[str] | None:
    """The column names a query reads (filters, derived columns, groups, bins,
    aggregations, join keys), or None for all of them: a query without aggregations
    (the SQL front door asks for the joined schema before adding them), or one whose
    expressions do not parse here (the compiler will say why)."""
    import sqlglot
    from sqlglot import exp

    if not query.aggregations:
        return None
    used: set[str] = set(query.group_columns)
    used |= {source for _, source, _ in query.bins}
    used |= {a.column for a in query.aggregations if a.column is not None}
    used |= {left for join in query.joins for left, _ in join.on}
    expressions = [*query.filters, *(e for _, e in query.derived)]
    step = query.per_person_step
    if step is not None:
        # The per-person step reads the joined rows (the query after it reads its
        # output, whose names are not joined columns: harmless here).
        used |= set(step.by)
        expressions += [*step.filters, *(e for _, e in step.derived)]
        expressions += [e for _, _, e in step.aggregates if e is not None]
    for expression in expressions:
        try:
            tree = sqlglot.parse_one(expression, read="duckdb")
        except (sqlglot.errors.ParseError, RecursionError):
            return None
        used |= {column.name for column in tree.find_all(exp.Column)}
    return used


def _base_table(query: Query, catalog: Catalog) -> str:
    if query.table is not None:
        return query.table
    private = catalog.private_names()
    if len(private) == 1:
        return private[0]
    raise InvalidParameter(
        f"Session.evaluate: this Session has several private tables ({private}); name the "
        "one the query reads: Query.from_table(name)."
    )


def _column(origin: dict[str, tuple[str, str, str]], name: str, side: str) -> tuple[str, str, str]:
    if name not in origin:
        raise DataError(
            f"{_OWNER}: unknown {side} join column {name!r}. Columns so far: {list(origin)}."
        )
    return origin[name]


def _same_category(left: str, left_type: str, table: str, right: str, right_type: str) -> None:
    left_category, right_category = key_category(left_type), key_category(right_type)
    if left_category == right_category == "decimal" and _decimal(left_type) != _decimal(right_type):
        # DuckDB would compare them in a common DECIMAL type, a cast that fails on large
        # values (past 38 digits) or rounds: found by the adversarial review.
        raise InvalidParameter(
            f"{_OWNER}: cannot compare {left!r} ({left_type}) with {table}.{right} "
            f"({right_type}): DECIMAL join keys must have the same precision and scale "
            "(compared exactly, never through a cast that could fail or round)."
        )
    if left_category is None or right_category is None or left_category != right_category:
        raise InvalidParameter(
            f"{_OWNER}: cannot compare {left!r} ({left_type}) with {table}.{right} "
            f"({right_type}): join keys are compared in one canonical form, which needs "
            "the same kind of value on both sides (integers, floating-point numbers, "
            "decimals, strings, booleans, dates or timestamps)."
        )


def _decimal(type_name: str) -> str:
    return type_name.upper().replace(" ", "")


def _chosen(join: Join, right: TableInfo, default: list[str], forbidden: set[str]) -> list[str]:
    if join.columns is None:
        return default
    for column in join.columns:
        if column not in right.schema:
            raise DataError(
                f"{_OWNER}: {right.name!r} has no column {column!r}. Columns: {list(right.schema)}."
            )
        if column in forbidden:
            raise InvalidParameter(
                f"{_OWNER}: {column!r} is the privacy unit of {right.name!r}; the joined "
                "rows carry the query table's unit."
            )
    return list(join.columns)
