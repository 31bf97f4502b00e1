"""GoogleSQL's differential-privacy SELECT, translated into a :class:`Query`.

The SQL front door decides nothing about privacy: a statement becomes the same
:class:`~dpkit.analytics.Query` the Python builder makes (tables, joins, filters,
derived columns, groups, bounds, aggregations) and a query budget, and the Session runs
that query on the one path (compile -> prepare -> charge -> run -> release). No SQL
text of the analyst reaches an engine: expressions are re-rendered from SQLGlot's tree
and then pass the same allowlisted-expression check as the builder's
(:mod:`dpkit.analytics._expr`). docs/sql.md lists the dialect, every OPTIONS key and
the differences from BigQuery.

The grammar::

    [EXPLAIN] SELECT WITH DIFFERENTIAL_PRIVACY [OPTIONS (key = value, ...)]
        item, ...
    FROM table [[AS] alias]
        [[INNER | LEFT] JOIN table [[AS] alias] (USING (col, ...) | ON a.x = b.y [AND ...])]...
    [WHERE condition]
    [GROUP BY column or expression, ...]
    [ORDER BY output column [ASC | DESC], ...] [LIMIT n]

An item is a group column or one of ``COUNT(*)``, ``COUNT(DISTINCT unit)``,
``COUNT(DISTINCT x)``, ``COUNT(x)``, ``SUM``, ``AVG``, ``VAR_POP``/``VARIANCE``,
``STDDEV``/``STDDEV_POP``, ``PERCENTILE_CONT(x, q)``, ``MEDIAN``, ``MIN``, ``MAX``, with
``contribution_bounds_per_row => (low, high)`` (or ``contribution_bounds_per_group``)
where bounds are needed. ORDER BY and LIMIT apply to the released rows (post-processing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from dpkit.accounting.guarantees import ApproxDP, Guarantee, PureDP
from dpkit.analytics._compile import filter_column_names, validated_rows
from dpkit.analytics._expr import validate_expression
from dpkit.analytics._order import ORDER_KINDS
from dpkit.analytics._sql_clause import Clause, SqlError, position_of, split_clause
from dpkit.analytics.engines import is_numeric
from dpkit.analytics.query import (
    MAX_CONTRIBUTION_BOUND,
    KeySelection,
    KeySet,
    Query,
    TableKeys,
)
from dpkit.errors import DPError, EngineError

__all__ = ["SqlStatement", "TableView", "translate"]

#: OPTIONS keys dpkit reads (docs/sql.md).
OPTIONS = (
    "epsilon",
    "delta",
    "max_groups_contributed",
    "max_rows_contributed",
    "max_total_rows_contributed",
    "privacy_unit_column",
    "group_keys",
    "join_truncate",
    "key_selection_delta",
    "confidence",
)

_AGGREGATES = (
    "COUNT",
    "SUM",
    "AVG",
    "VAR_POP",
    "VARIANCE",
    "STDDEV",
    "STDDEV_POP",
    "PERCENTILE_CONT",
    "MEDIAN",
    "MIN",
    "MAX",
    "VAR_SAMP",
    "STDDEV_SAMP",
    "APPROX_QUANTILES",
)
_BOUNDS_KEYS = ("contribution_bounds_per_row", "contribution_bounds_per_group")


_JOIN_ARGS = ("this", "on", "using", "side", "kind")


@dataclass(frozen=True)
class _Source:
    """A table of the FROM clause, as its qualified columns resolve."""

    base: bool
    schema: Mapping[str, str]
    #: Its join keys (and a private table's unit): column -> the joined rows' column.
    keys: Mapping[str, str]
    how: str
    #: Its columns not in the joined rows under their own name.
    hidden: set[str]


@dataclass(frozen=True)
class TableView:
    """What the translator may know of a table: public information only."""

    schema: Mapping[str, str]
    public: bool
    unit: str | None


@dataclass
class SqlStatement:
    """A translated statement: the query (None for a SELECT over public tables only),
    its budget, and what to do to the released rows."""

    text: str
    explain: bool
    query: Query | None
    budget: Guarantee | None
    confidence: float | None = None
    #: Output renames: result column -> name the statement gave it.
    renames: dict[str, str] = field(default_factory=dict)
    #: Aggregations released as variances whose square root the statement asked for.
    square_roots: tuple[str, ...] = ()
    #: (output column, descending) pairs, applied to the released rows.
    order_by: tuple[tuple[str, bool], ...] = ()
    limit: int | None = None
    #: The output columns the statement names, in order.
    columns: tuple[str, ...] = ()


@cache
def _dialect() -> Any:
    """BigQuery's dialect with the aggregates parsed as plain calls (SQLGlot checks
    their argument counts, which the DP forms exceed). Made once: building a dialect
    class builds its tokenizer's tries (~2 ms, a sixth of a small query's time)."""
    from sqlglot.dialects.bigquery import BigQuery

    functions = {k: v for k, v in BigQuery.Parser.FUNCTIONS.items() if k not in _AGGREGATES}

    parser: Any = BigQuery.Parser

    class DPSQL(BigQuery):
        class Parser(parser):  # type: ignore[misc]
            FUNCTIONS = functions

    return DPSQL


class _Translator:
    def __init__(
        self,
        clause: Clause,
        text: str,
        tables: Mapping[str, TableView],
        single: bool,
        joined_schema: Callable[[Query], Mapping[str, str]],
        typed: Callable[[Query, tuple[tuple[str, str], ...]], Mapping[str, str]] | None = None,
    ) -> None:
        self.clause = clause
        self.text = text
        self.tables = tables
        self.single = single
        self.joined_schema = joined_schema
        self.typed = typed
        #: Derived column name -> the statement's node it was made from (for positions).
        self.origins: dict[str, Any] = {}
        #: (column, argument node, function) of the aggregates that need a number.
        self.numbers: list[tuple[str, Any, str]] = []
        #: The clause whose conditions check_types is typing (named in its errors).
        self.condition_clause = "WHERE"
        self.aliases: dict[str, str] = {}
        self.schema: Mapping[str, str] = {}
        self.unit: str | None = None
        self.derived: list[tuple[str, str]] = []
        self.sources: dict[str, _Source] = {}
        self.base_columns: set[str] = set()
        self.single_unit = next(iter(tables.values())).unit if single else None
        #: The subquery being read (errors without a position of their own use its).
        self.context: Any = None

    # ------------------------------------------------------------------ errors
    def error(self, message: str, node: Any = None, at: int | None = None) -> SqlError:
        start = at if at is not None else (position_of(node) if node is not None else None)
        if start is None and self.context is not None:
            # A node without a located token (DISTINCT, GROUP BY ALL): the subquery's.
            start = position_of(self.context)
        return SqlError(message, self.text, start)

    def option_error(self, key: str, message: str) -> SqlError:
        return SqlError(message, self.text, self.clause.positions.get(key))

    # ------------------------------------------------------------------ tables
    def table(self, node: Any) -> tuple[str, TableView]:
        from sqlglot import exp

        if (
            not isinstance(node, exp.Table)
            or not isinstance(node.this, exp.Identifier)
            or any(v for k, v in node.args.items() if k not in ("this", "alias"))
        ):
            # Only a table's name (and an alias): no subquery, table function, schema,
            # sample, time travel... (an allowlist: found by the adversarial review).
            raise self.error(
                "FROM and JOIN read the Session's tables by name (with an optional alias); "
                "a subquery, table function, sample or qualified name is not allowed.",
                node,
            )
        if self.alias_columns(node):
            raise self.error(
                "A column list after a table's alias is not supported: the columns keep "
                "their names.",
                node.args["alias"],
            )
        name = node.name
        if self.single:
            view = next(iter(self.tables.values()))
            return name, view
        if name not in self.tables:
            raise self.error(f"Unknown table {name!r}. Tables: {sorted(self.tables)}.", node)
        return name, self.tables[name]

    def register_alias(self, node: Any, name: str, source: _Source) -> None:
        alias = node.alias or name
        if alias.casefold() in {a.casefold() for a in self.aliases}:
            raise self.error(f"The name {alias!r} is used twice in FROM.", node)
        self.aliases[alias] = name
        self.sources[alias.casefold()] = source

    def resolve(self, node: Any, output: Mapping[str, Any] | set[str]) -> str:
        """A column reference -> its name in the joined rows (``output``), checking that
        a qualified one is that table's column there (not another table's)."""
        name, qualifier = str(node.name), node.table
        if qualifier:
            source = self.sources.get(qualifier.casefold())
            if source is None:
                raise self.error(f"Unknown table or alias {qualifier!r}.", node)
            if name in source.keys:
                if source.how == "left":
                    raise self.error(
                        f"{qualifier}.{name} is a key of a LEFT JOIN: the joined rows keep "
                        "the left side's value, which is not NULL where nothing matches. "
                        f"Test a match with another column of {qualifier}.",
                        node,
                    )
                return source.keys[name]
            if name not in source.schema or name not in output or name in source.hidden:
                raise self.error(
                    f"Table {qualifier!r} has no column {name!r} in the joined rows.", node
                )
            if source.base is False and name in self.base_columns:
                raise self.error(f"{qualifier}.{name} is not in the joined rows.", node)
            return name
        if name not in output:
            # A key column of an inner join's right side, written unqualified: the joined
            # rows hold the left side's (equal) value under the left side's name.
            for source in self.sources.values():
                if name in source.keys and source.how != "left":
                    return source.keys[name]
            raise self.error(f"Unknown column {name!r}. Columns: {sorted(output)}.", node)
        return name

    def column(self, node: Any) -> str:
        """A column reference -> its name in the joined rows."""
        return self.resolve(node, self.schema)

    def expression(self, node: Any) -> str:
        """SQL of an expression with columns unqualified and checked (DuckDB's dialect,
        dpkit's canonical SQL; the allowlist check follows at compile time)."""
        from sqlglot import exp

        if isinstance(node, exp.Column):
            # A bare column (COUNT(t.x)): the loop below replaces children only.
            node = exp.column(self.column(node), quoted=True)
        for child in list(node.walk()):
            if isinstance(child, exp.Length):
                # BigQuery's LENGTH renders for DuckDB as a CASE over TYPEOF, which the
                # allowlist refuses: the plain function it means.
                child.replace(exp.Anonymous(this="LENGTH", expressions=[child.this]))
        for child in list(node.walk()):
            if isinstance(child, exp.Column):
                resolved = self.column(child)
                child.replace(exp.column(resolved, quoted=True))
            elif isinstance(child, exp.Anonymous) and child.name.upper() in _AGGREGATES:
                raise self.error("An aggregate cannot be used here.", child)
            elif isinstance(child, exp.Subquery | exp.Select) and child is not node:
                raise self.error(
                    "A subquery would read a table row by row; it is not allowed.", child
                )
        try:
            rendered = str(node.sql(dialect="duckdb"))
        except RecursionError:
            raise self.error("The expression is nested too deeply.", node) from None
        known = {*self.schema, *(name for name, _ in self.derived)}
        try:
            # The builder's allowlist, checked now for a position (again at compile).
            validate_expression(rendered, known, "SQL")
        except (DPError, RecursionError) as err:
            message = str(err) if isinstance(err, DPError) else "nested too deeply"
            raise self.error(message, node) from None
        return rendered

    def fresh(self, base: str) -> str:
        taken = {c.casefold() for c in self.schema} | {n.casefold() for n, _ in self.derived}
        name, i = base, 1
        while name.casefold() in taken:
            i += 1
            name = f"{base}_{i}"
        return name

    def check_types(
        self,
        query: Query,
        derived: list[tuple[str, str]],
        conditions: list[tuple[str, Any]],
        numbers: list[tuple[str, Any, str]] | None = None,
    ) -> None:
        """Type the statement's expressions where they stand, so that a type error is
        a :class:`SqlError` at its place in the statement (issue 30, item 5).

        The expressions are bound by the engine the query will run on (DuckDB's or
        Spark's binder, through ``typed``: the schema only, no row read), in the form
        the Session's compiler gives them (:func:`validated_rows`), and judged by the
        compiler's rules: a WHERE is BOOLEAN, SUM/AVG/... read a number. The Session
        checks all of it again when it compiles; this only finds the place. An
        expression that binds alone but not with the others is left to that check."""
        if self.typed is None:
            return
        numbers = self.numbers if numbers is None else numbers
        rendered, filters, known, _ = validated_rows(
            derived, [sql for sql, _ in conditions], self.schema, "SQL"
        )
        names = filter_column_names(len(filters), known)
        pieces = [(name, sql, self.origins.get(name)) for name, sql in rendered]
        pieces += [
            (name, sql, node)
            for name, sql, (_, node) in zip(names, filters, conditions, strict=True)
        ]
        if not pieces and not numbers:
            return
        try:
            types = dict(self.typed(query, tuple((name, sql) for name, sql, _ in pieces)))
        except EngineError:
            for name, sql, node in pieces:
                try:
                    self.typed(query, ((name, sql),))
                except EngineError as err:
                    raise self.error(_engine_reason(err), node) from None
            return
        for name, (_, node) in zip(names, conditions, strict=True):
            found = types.get(name)
            if found is not None and found.upper() != "BOOLEAN":
                raise self.error(
                    f"{self.condition_clause} takes a condition (a comparison, IS NULL, IN, "
                    f"LIKE, AND/OR...); this expression is of type {found}.",
                    node,
                )
        for column, node, function in numbers:
            found = types.get(column)
            if found is not None and not is_numeric(found):
                raise self.error(f"{function} needs a number; this is of type {found}.", node)

    # ------------------------------------------------------------------ statement
    def run(self, tree: Any) -> SqlStatement:
        from sqlglot import exp

        if not isinstance(tree, exp.Select):
            raise self.error("Give one SELECT statement.", tree, at=self.clause.select_at)
        if tree.args.get("with_") or tree.args.get("with"):
            raise self.error("WITH (common table expressions) is not supported.", tree)
        allowed = ("expressions", "from_", "from", "joins", "where", "group", "order", "limit")
        for key, value in tree.args.items():
            if key not in allowed and value:
                # An allowlist (OFFSET, WINDOW, HAVING, QUALIFY, DISTINCT, AS STRUCT...
                # would otherwise be dropped silently: found by the adversarial review).
                first = value[0] if isinstance(value, list) else value
                at = first if isinstance(first, exp.Expression) else tree
                raise self.error(f"{key.upper()} is not supported in a DP SELECT.", at)
        group = tree.args.get("group")
        if group is not None and any(v for k, v in group.args.items() if k != "expressions"):
            raise self.error("GROUP BY takes columns and expressions only.", group)
        for join in tree.args.get("joins") or []:
            extra = [k for k, v in join.args.items() if v and k not in _JOIN_ARGS]
            if extra:
                raise self.error(f"{extra[0].upper()} is not supported in a JOIN.", join)
        from_ = tree.args.get("from_") or tree.args.get("from")
        if from_ is None:
            raise self.error("A DP SELECT reads a table: add FROM.", tree)
        query = self.from_clause(from_, tree.args.get("joins") or [])
        if self.single:
            self.unit = self.single_unit
        self.schema = dict(self.joined_schema(query))
        options = self.clause.options
        unit_option = options.get("privacy_unit_column")
        if unit_option is not None and str(unit_option) != self.unit:
            raise self.option_error(
                "privacy_unit_column",
                f"privacy_unit_column is {unit_option!s} but the Session's privacy unit "
                f"is {self.unit!r}.",
            )
        where = tree.args.get("where")
        filters = [self.expression(where.this.copy())] if where is not None else []
        groups = self.group_by(tree.args.get("group"), self.select_aliases(tree))
        statement = SqlStatement(self.text, self.clause.explain, None, None)
        aggregations: list[tuple[Any, Callable[[Query], Query]]] = []
        named: list[tuple[str, Any]] = []
        columns: list[str] = []
        for item in tree.expressions:
            alias = item.alias if isinstance(item, exp.Alias) else None
            node = item.this if isinstance(item, exp.Alias) else item
            if isinstance(node, exp.Anonymous) and node.name.upper() in _AGGREGATES:
                name, add = self.aggregate(node, alias, statement)
                aggregations.append((node, add))
                named.append((name, node))
                columns.append(alias or name)
                continue
            if isinstance(node, exp.Star):
                raise self.error("SELECT * would release rows; name aggregates.", node)
            key = self.group_item(node, groups)
            if alias and alias != key:
                statement.renames[key] = alias
            columns.append(alias or key)
        if not aggregations:
            raise self.error("A DP SELECT needs at least one aggregate (COUNT(*), SUM...).", tree)
        self.check_output_names(tree, columns, [name for name, _ in named])
        conditions = [(filters[0], where.this)] if where is not None else []
        self.check_types(query, self.derived, conditions)
        for name, expression in self.derived:
            query = query.with_column(name, expression)
        for condition in filters:
            query = query.filter(condition)
        if groups:
            query = query.group_by(*groups.values(), **self.keys(groups))
        query = self.bound(query, bool(groups))
        for node, add in aggregations:
            try:
                query = add(query)
            except DPError as err:  # a duplicate name, a bad level: the builder's words
                message = str(err).replace("; pass name=.", ": give one another name (AS).")
                raise self.error(message, node) from None
            self.check_total_bound(query, bool(groups), node)
        statement.query = query
        statement.budget = self.budget()
        statement.confidence = self.confidence()
        statement.columns = tuple(columns)
        self.order_and_limit(tree, statement)
        return statement

    def from_clause(self, from_: Any, joins: list[Any]) -> Query:
        from sqlglot import exp

        if isinstance(from_.this, exp.Subquery):
            return self.per_person(from_.this, joins)
        base_name, base = self.table(from_.this)
        self.register_alias(from_.this, base_name, _Source(True, base.schema, {}, "", set()))
        self.base_columns = set(base.schema)
        if base.public and not self.single:
            raise self.error(
                f"A DP SELECT starts FROM a private table; {base_name!r} is public.",
                from_.this,
            )
        self.unit = base.unit
        query = Query() if self.single else Query.from_table(base_name)
        known = set(base.schema)
        for join in joins:
            if self.single:
                raise self.error(
                    "This Session has one table; joins need Session.from_tables.", join
                )
            side = (join.side or "").upper()
            kind = (join.kind or "").upper()
            if (
                side not in ("", "LEFT")
                or kind not in ("", "INNER", "OUTER")
                or join.args.get("method")
            ):
                raise self.error("Only [INNER] JOIN and LEFT [OUTER] JOIN are supported.", join)
            name, view = self.table(join.this)
            pairs = self.join_keys(join, name, view, known)
            how: Literal["inner", "left"] = "left" if side == "LEFT" else "inner"
            keys = {right: left for left, right in pairs}
            hidden = set(keys)
            if not view.public and view.unit is not None:
                keys.setdefault(view.unit, str(self.unit))
                hidden.add(view.unit)
            self.register_alias(join.this, name, _Source(False, view.schema, keys, how, hidden))
            truncate = None
            if not view.public:
                value = self.clause.options.get("join_truncate")
                if value is None:
                    raise self.error(
                        f"Joining the private table {name!r} needs OPTIONS (join_truncate = "
                        "k): how many rows of each person in it a row may meet.",
                        join.this,
                    )
                truncate = self.count_option("join_truncate")
            try:
                query = query.join(
                    name,
                    dict(pairs),
                    how=how,
                    truncate=truncate,
                )
            except DPError as err:
                raise self.error(str(err), join) from None
            known |= {c for c in view.schema if c not in hidden}
        return query

    # ------------------------------------------------------------------ per person
    def per_person(self, node: Any, joins: list[Any]) -> Query:
        """``FROM (SELECT unit, ..., AGG(x) AS name FROM ... GROUP BY unit, ...
        [HAVING ...]) AS alias``: the per-person step (Query.per_person). A subquery
        that does not group by the privacy unit would read a private table row by row
        and is refused."""
        from sqlglot import exp

        if joins:
            raise self.error(
                "A JOIN after a subquery is not supported: join inside the subquery.", joins[0]
            )
        extra = [k for k, v in node.args.items() if v and k not in ("this", "alias")]
        inner = node.this
        self.context = node
        if self.alias_columns(node):
            raise self.error(
                "A column list after the subquery's alias is not supported: name the "
                "columns inside (AS name).",
                node.args["alias"],
            )
        if extra or not isinstance(inner, exp.Select):
            raise self.error("A subquery in FROM is one SELECT ... GROUP BY (with an alias).", node)
        allowed = ("expressions", "from_", "from", "joins", "where", "group", "having")
        for key, value in inner.args.items():
            if key not in allowed and value:
                first = value[0] if isinstance(value, list) else value
                at = first if isinstance(first, exp.Expression) else inner
                raise self.error(f"{key.upper()} is not supported in a subquery.", at)
        from_ = inner.args.get("from_") or inner.args.get("from")
        if from_ is None:
            raise self.error("The subquery reads a table: add FROM.", inner)
        if isinstance(from_.this, exp.Subquery):
            raise self.error("Subqueries in FROM nest one level deep.", from_.this)
        query = self.from_clause(from_, inner.args.get("joins") or [])
        if self.single:
            self.unit = self.single_unit
        unit = self.unit
        group = inner.args.get("group")
        unit_first = (
            f"A subquery in FROM must GROUP BY the privacy unit column {unit!r}: each of "
            "its rows is then one person's aggregate. Any other subquery would read a "
            "private table row by row."
        )
        if unit is None:
            raise self.error(
                "A subquery in FROM aggregates per person, and this Session has no privacy "
                "unit (each row is a person): select from the table directly.",
                node,
            )
        if group is None or any(v for k, v in group.args.items() if k != "expressions"):
            raise self.error(unit_first, group if group is not None else inner)
        self.schema = dict(self.joined_schema(query))
        where = inner.args.get("where")
        if where is not None:
            condition_sql = self.expression(where.this.copy())
            self.check_types(query, [], [(condition_sql, where.this)])
            query = query.filter(condition_sql)
        by: list[str] = []
        grouped_by_unit = False
        for item in group.expressions:
            if not isinstance(item, exp.Column):
                raise self.error("A subquery in FROM groups by columns only.", item)
            name = self.column(item)
            if name == unit:
                grouped_by_unit = True
            elif name not in by:
                by.append(name)
        if not grouped_by_unit:
            raise self.error(unit_first, group)
        aggregates: dict[str, str | tuple[str, str]] = {}
        nodes: dict[str, Any] = {}
        calls: dict[str, str] = {}
        for item in inner.expressions:
            alias = item.alias if isinstance(item, exp.Alias) else None
            value = item.this if isinstance(item, exp.Alias) else item
            if isinstance(value, exp.Column):
                name = self.column(value)
                if name != unit and name not in by:
                    raise self.error(
                        "A selected column must be in GROUP BY or inside an aggregate.", value
                    )
                if alias and alias != name:
                    raise self.error(
                        "A group column of a subquery keeps its name; rename it outside.", item
                    )
                continue
            if not (isinstance(value, exp.Anonymous) and value.name.upper() in _AGGREGATES):
                raise self.error(
                    "A subquery selects its GROUP BY columns and aggregates (AS name).", value
                )
            if not alias:
                raise self.error("Name each aggregate of the subquery (AS name).", value)
            if alias.casefold() in {n.casefold() for n in [unit, *by, *aggregates]}:
                raise self.error(f"The subquery's column {alias!r} is named twice.", item)
            aggregates[alias] = self.person_aggregate(value)
            nodes[alias] = value
            calls.setdefault(value.sql(), alias)
        having = inner.args.get("having")
        condition = having.this.copy() if having is not None else None
        if isinstance(condition, exp.Literal | exp.Binary) and not isinstance(
            condition, exp.Predicate | exp.Connector
        ):
            # A number, a string or arithmetic is no condition (the compiler would say
            # so too, without a position).
            raise self.error(
                "HAVING takes a condition (a comparison, IS NULL, IN, AND/OR...).", having
            )
        if condition is not None:
            # An aggregate in HAVING is the subquery's column of the same call, or one
            # more (hidden) column of the per-person rows.
            for call in list(condition.find_all(exp.Anonymous)):
                if call.name.upper() not in _AGGREGATES:
                    continue
                found = calls.get(call.sql())
                if found is None:
                    taken = {n.casefold() for n in [unit, *by, *aggregates]}
                    name, i = "having_1", 1
                    while name.casefold() in taken:
                        i += 1
                        name = f"having_{i}"
                    aggregates[name] = self.person_aggregate(call)
                    calls[call.sql()] = found = name
                replacement = exp.column(found, quoted=True)
                if call is condition:  # HAVING MAX(flag): the condition is the call
                    condition = replacement
                else:
                    call.replace(replacement)
        if not aggregates:
            raise self.error("The subquery needs at least one aggregate (AS name).", inner)
        # SUM and AVG of one person's rows read numbers: typed here, for the place.
        summed: list[tuple[str, str]] = []
        numbers: list[tuple[str, Any, str]] = []
        for alias, spec in aggregates.items():
            if isinstance(spec, tuple) and spec[0] in ("sum", "mean") and alias in nodes:
                name = self.fresh(f"{alias}_value")
                summed.append((name, spec[1]))
                self.origins[name] = nodes[alias]
                numbers.append((name, nodes[alias], "SUM" if spec[0] == "sum" else "AVG"))
        self.check_types(query, summed, [], numbers)
        try:
            query = query.per_person(aggregates, by=by)
        except DPError as err:
            raise self.error(str(err), inner) from None
        # The statement around the subquery reads the per-person rows, by the alias.
        try:
            self.schema = dict(self.joined_schema(query))
        except DPError as err:  # an aggregate's type, say: the builder's words
            raise self.error(str(err), inner) from None
        self.aliases, self.sources = {}, {}
        self.register_alias(node, "(subquery)", _Source(True, self.schema, {}, "", set()))
        self.base_columns = set(self.schema)
        if condition is not None:
            having_sql = self.expression(condition)
            self.condition_clause = "HAVING"
            self.check_types(query, [], [(having_sql, having)])
            self.condition_clause = "WHERE"
            query = query.filter(having_sql)
        return query

    @staticmethod
    def alias_columns(node: Any) -> bool:
        """Whether ``node``'s alias renames its columns (``AS t(a, b)``)."""
        alias = node.args.get("alias")
        return bool(alias is not None and alias.args.get("columns"))

    def person_aggregate(self, node: Any) -> str | tuple[str, str]:
        """An aggregate of one person's rows: ``"count"`` or ``(kind, expression)``."""
        from sqlglot import exp

        function = node.name.upper()
        kinds = {"COUNT": "count", "SUM": "sum", "AVG": "mean", "MIN": "min", "MAX": "max"}
        if function not in kinds:
            raise self.error(
                f"{function} is not an aggregate of one person's rows; use COUNT, SUM, AVG, "
                "MIN or MAX in a subquery (the DP aggregates go in the outer SELECT).",
                node,
            )
        if len(node.expressions) != 1 or isinstance(node.expressions[0], exp.Kwarg):
            raise self.error(
                f"{function} in a subquery takes one argument and no bounds (it is one "
                "person's own value; the outer SELECT bounds it).",
                node,
            )
        argument = node.expressions[0]
        if any(isinstance(n, exp.Order) for n in argument.walk()):
            raise self.error(f"ORDER BY inside {function}(...) is not supported.", node)
        if isinstance(argument, exp.Star):
            if function != "COUNT":
                raise self.error(f"{function}(*) is not an aggregate.", argument)
            return "count"
        if isinstance(argument, exp.Distinct):
            raise self.error(f"{function}(DISTINCT ...) is not supported in a subquery.", node)
        return kinds[function], self.expression(argument.copy())

    def join_keys(
        self, join: Any, name: str, view: TableView, known: set[str]
    ) -> list[tuple[str, str]]:
        from sqlglot import exp

        using = join.args.get("using")
        if using:
            return [(c.name, c.name) for c in using]
        condition = join.args.get("on")
        if condition is None:
            raise self.error("A JOIN needs USING (...) or ON a.x = b.y.", join)
        terms = []
        stack = [condition]
        while stack:
            node = stack.pop()
            if isinstance(node, exp.And):
                stack += [node.this, node.expression]
            elif isinstance(node, exp.EQ) and all(
                isinstance(side, exp.Column) for side in (node.this, node.expression)
            ):
                terms.append(node)
            else:
                raise self.error(
                    "ON must be equalities of columns joined by AND (a.x = b.y AND ...).", node
                )
        joined_alias = (join.this.alias or name).casefold()
        pairs = []
        for term in reversed(terms):
            sides = [term.this, term.expression]
            mine = [self._of_joined(c, joined_alias, view, known) for c in sides]
            if sorted(mine) != [False, True]:
                raise self.error(
                    f"Each ON equality compares a column of {joined_alias!r} with a column "
                    "of an earlier table (qualify a column whose table is ambiguous).",
                    term,
                )
            right, left = (sides[0], sides[1]) if mine[0] else (sides[1], sides[0])
            if right.name not in view.schema:
                raise self.error(f"Table {name!r} has no column {right.name!r}.", right)
            pairs.append((self.resolve(left, known), right.name))
        return pairs

    def _of_joined(self, column: Any, alias: str, view: TableView, known: set[str]) -> bool:
        """Whether an ON column belongs to the table being joined: by its qualifier, or
        -- unqualified -- by which side has a column of that name (GoogleSQL's rule)."""
        if column.table:
            return bool(column.table.casefold() == alias)
        name = str(column.name)
        earlier = name in known or any(name in s.keys for s in self.sources.values())
        if (name in view.schema) == earlier:
            raise self.error(
                f"The ON column {name!r} is ambiguous or unknown: qualify it (t.{name}).",
                column,
            )
        return name in view.schema

    def check_output_names(self, tree: Any, columns: list[str], aggregates: list[str]) -> None:
        """Output names distinct ignoring case, and no group column named like an
        aggregate's columns (``n``, ``n_low``...): the rename would overwrite a release
        (found by the adversarial review)."""
        seen: set[str] = set()
        for name in columns:
            if name.casefold() in seen:
                raise self.error(f"Two output columns are named {name!r}; rename one (AS).", tree)
            seen.add(name.casefold())
        groups = [c for c in columns if c not in aggregates]
        for group in groups:
            for aggregate in aggregates:
                folded, other = group.casefold(), aggregate.casefold()
                if folded == other or folded.startswith(other + "_"):
                    raise self.error(
                        f"The group column {group!r} is named like the columns of the "
                        f"aggregate {aggregate!r} ({aggregate}_low, ...); rename it (AS).",
                        tree,
                    )

    def select_aliases(self, tree: Any) -> dict[str, Any]:
        """The SELECT list's aliased expressions that are not aggregates: alias ->
        expression (GROUP BY may name them, as in BigQuery)."""
        from sqlglot import exp

        out = {}
        for item in tree.expressions:
            if isinstance(item, exp.Alias) and not (
                isinstance(item.this, exp.Anonymous) and item.this.name.upper() in _AGGREGATES
            ):
                out[item.alias] = item.this
        return out

    def group_by(self, group: Any, aliases: Mapping[str, Any] | None = None) -> dict[str, str]:
        """GROUP BY items -> {SQL text of the item: group column name}. An unqualified
        name that is no column but a SELECT alias groups by the aliased expression (a
        column of that name wins, as in standard SQL)."""
        from sqlglot import exp

        out: dict[str, str] = {}
        if group is None:
            return out
        for node in group.expressions:
            if (
                isinstance(node, exp.Column)
                and not node.table
                and node.name not in self.schema
                and aliases
                and node.name in aliases
            ):
                node = aliases[node.name]
            if isinstance(node, exp.Column):
                out[node.sql()] = self.column(node)
            elif isinstance(node, exp.Literal):
                raise self.error("GROUP BY a position is not supported; name the column.", node)
            else:
                text = node.sql()
                name = self.fresh("group_" + str(len(out) + 1))
                self.derived.append((name, self.expression(node.copy())))
                self.origins[name] = node
                out[text] = name
        return out

    def group_item(self, node: Any, groups: Mapping[str, str]) -> str:
        from sqlglot import exp

        if isinstance(node, exp.Column):
            name = self.column(node)
            if name in groups.values():
                return name
        elif node.sql() in groups:
            return groups[node.sql()]
        raise self.error("A selected column must be in GROUP BY or inside an aggregate.", node)

    def keys(self, groups: Mapping[str, str]) -> dict[str, Any]:
        """Public keys (OPTIONS group_keys, or the public table the group columns come
        from) or private key selection."""
        columns = tuple(groups.values())
        option = self.clause.options.get("group_keys")
        if isinstance(option, list):
            return {"keys": self.listed_keys(option, columns)}
        if option is not None:
            text = str(option)
            if text in self.tables and not self.single:
                return {"keys": TableKeys(text, columns)}
            raise self.option_error(
                "group_keys", f"group_keys names a public table; {text!r} is not one."
            )
        for table_name in self.aliases.values():
            view = self.tables.get(table_name)
            if (
                view is not None
                and view.public
                and not self.single
                and all(c in view.schema for c in columns)
            ):
                return {"keys": KeySet.from_table(table_name, *columns)}
        delta = self.clause.options.get("key_selection_delta")
        selection = KeySelection() if delta is None else KeySelection(delta=float(delta))
        return {"keys": "private", "selection": selection}

    def listed_keys(self, listed: list[Any], columns: tuple[str, ...]) -> KeySet:
        """The KEYS hint: ``group_keys = [v, ...]`` (one group column) or
        ``[(v, w), ...]`` (several), public keys written in the statement."""
        try:
            if len(columns) == 1 and not any(isinstance(v, tuple) for v in listed):
                return KeySet.from_values(**{columns[0]: listed})
            if all(isinstance(v, tuple) and len(v) == len(columns) for v in listed):
                return KeySet.from_tuples(columns, listed)
        except DPError as err:
            raise self.option_error("group_keys", str(err)) from None
        raise self.option_error(
            "group_keys",
            "group_keys = [...] lists the groups: values for one group column, tuples "
            f"(a, b, ...) for several; this statement groups by {', '.join(columns)}.",
        )

    def bound(self, query: Query, grouped: bool) -> Query:
        """Contribution bounds: ``max_groups_contributed`` (default 1, as BigQuery),
        ``max_rows_contributed`` (dpkit's: rows per group; default 1, or the total: a
        person's rows in a group count as their average, so their contribution lies
        within the per-row bounds) and ``max_total_rows_contributed`` (rows over all
        groups, ``Query.bound(max_total_rows=)``)."""
        groups = self.count_option("max_groups_contributed")
        rows = self.count_option("max_rows_contributed")
        total = self.count_option("max_total_rows_contributed")
        if self.unit is None:
            return query
        return query.bound(
            max_groups=(groups or 1) if grouped else None,
            max_rows=rows or (None if total else 1),
            max_total_rows=total,
        )

    def check_total_bound(self, query: Query, grouped: bool, node: Any) -> None:
        """Refuse, at ``node``, an aggregate that a binding total bound cannot bound (the
        compiler's rule, ``_binding_total``, stated with a position)."""
        total = query.max_total_rows
        if self.unit is None or total is None or not grouped or not query.aggregations:
            return
        groups, rows = query.max_groups or 1, query.max_rows or total
        agg = query.aggregations[-1]
        per_group = agg.kind in ORDER_KINDS or (
            agg.kind == "count_distinct" and agg.column is not None
        )
        if groups >= 2 and total < groups * rows and per_group:
            raise self.error(
                f"max_total_rows_contributed = {total} cannot bound this aggregate: it keeps "
                "its values per group, and a total bound applies to COUNT, SUM, AVG and "
                "the variances. Drop the option, set it to at least max_groups_contributed "
                f"* max_rows_contributed = {groups * rows}, or run this aggregate in a "
                "statement of its own.",
                node,
            )

    def count_option(self, key: str) -> int | None:
        """A contribution bound of OPTIONS: absent, or an integer in [1, 2^31] (the
        builder's range, ``Query.bound``), refused at the option otherwise -- NULL
        too: GoogleSQL's NULL switches bounding off, which dpkit never does."""
        if key not in self.clause.options:
            return None
        value = self.clause.options[key]
        if (
            value is None
            or isinstance(value, bool)
            or not isinstance(value, int)
            or not 1 <= value <= MAX_CONTRIBUTION_BOUND
        ):
            shown = "NULL" if value is None else repr(value)
            raise self.option_error(
                key, f"{key} must be an integer in [1, {MAX_CONTRIBUTION_BOUND}]; got {shown}."
            )
        return value

    def budget(self) -> Guarantee | None:
        options = self.clause.options
        epsilon, delta = options.get("epsilon"), options.get("delta", 0)
        for key, value in (("epsilon", epsilon), ("delta", delta)):
            if isinstance(value, bool | str):
                raise self.option_error(key, f"{key} must be a number; got {value!r}.")
        if epsilon is None:
            if "delta" in options:
                raise self.option_error("delta", "delta is given without epsilon.")
            return None
        try:
            if delta:
                return ApproxDP(float(epsilon), float(delta))
            return PureDP(float(epsilon))
        except (DPError, TypeError, ValueError) as err:
            raise self.option_error("epsilon", f"Invalid budget: {err}") from None

    def confidence(self) -> float | None:
        value = self.clause.options.get("confidence")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise self.option_error("confidence", f"confidence must be in (0, 1); got {value!r}.")
        return float(value)

    # ------------------------------------------------------------------ aggregates
    def aggregate(
        self, node: Any, alias: str | None, statement: SqlStatement
    ) -> tuple[str, Callable[[Query], Query]]:
        from sqlglot import exp

        function = node.name.upper()
        positional, named = [], {}
        for argument in node.expressions:
            if isinstance(argument, exp.Kwarg):
                key = argument.this.name.lower()
                if key not in _BOUNDS_KEYS:
                    raise self.error(f"Unknown argument {key!r} of {function}.", argument)
                named[key] = self.bounds(argument.expression, function)
            else:
                positional.append(argument)
        if len(named) > 1:
            raise self.error(f"{function}: give one of {', '.join(_BOUNDS_KEYS)}.", node)
        bounds = next(iter(named.values()), None)
        if function in ("VAR_SAMP", "STDDEV_SAMP", "APPROX_QUANTILES"):
            replacement = {"VAR_SAMP": "VAR_POP", "STDDEV_SAMP": "STDDEV_POP"}.get(
                function, "PERCENTILE_CONT"
            )
            raise self.error(f"{function} is not supported; use {replacement}.", node)
        if function == "COUNT":
            return self.count(node, positional, alias, bounds)
        if not positional:
            raise self.error(f"{function} needs a column.", node)
        if bounds is None:
            raise self.error(
                f"{function} needs bounds: {function}(x, contribution_bounds_per_row => "
                "(low, high)), public limits that each value is clamped to.",
                node,
            )
        column = self.argument(positional[0], alias, function)
        self.numbers.append((column, positional[0], function))
        name = alias or f"{function.lower()}_{column}"
        if function in ("SUM", "AVG", "VAR_POP", "VARIANCE", "STDDEV", "STDDEV_POP"):
            if len(positional) != 1:
                raise self.error(f"{function} takes one column and its bounds.", node)
            method = {"SUM": "sum", "AVG": "mean"}.get(function, "variance")
            if function.startswith("STDDEV"):
                statement.square_roots += (name,)
            return name, lambda q: getattr(q, method)(column, bounds=bounds, name=name)
        if function in ("MIN", "MAX", "MEDIAN"):
            if len(positional) != 1:
                raise self.error(f"{function} takes one column and its bounds.", node)
            method = function.lower()
            return name, lambda q: getattr(q, method)(column, bounds=bounds, name=name)
        # PERCENTILE_CONT(x, q)
        if (
            len(positional) != 2
            or not isinstance(positional[1], exp.Literal)
            or positional[1].is_string
        ):
            raise self.error("PERCENTILE_CONT(x, q, bounds) takes a level q in [0, 1].", node)
        level = float(positional[1].this)
        if not 0.0 <= level <= 1.0:
            raise self.error("The level of PERCENTILE_CONT must be in [0, 1].", positional[1])
        return name, lambda q: q.quantile(column, level, bounds=bounds, name=name)

    def count(
        self,
        node: Any,
        positional: list[Any],
        alias: str | None,
        bounds: tuple[float, float] | None,
    ) -> tuple[str, Callable[[Query], Query]]:
        from sqlglot import exp

        if bounds is not None:
            raise self.error(
                "COUNT needs no bounds: a person's rows are bounded by max_rows_contributed.",
                node,
            )
        if len(positional) != 1:
            raise self.error("COUNT takes one argument.", node)
        argument = positional[0]
        if isinstance(argument, exp.Star):
            name = alias or "count"
            return name, lambda q: q.count(name=name)
        if isinstance(argument, exp.Distinct):
            if len(argument.expressions) != 1:
                raise self.error("COUNT(DISTINCT ...) takes one column.", argument)
            inner = argument.expressions[0]
            if isinstance(inner, exp.Column) and self.column(inner) == self.unit:
                name = alias or "count_distinct"
                return name, lambda q: q.count_distinct(name=name)
            column = self.argument(inner, alias, "COUNT")
            name = alias or f"count_distinct_{column}"
            return name, lambda q: q.count_distinct(column, name=name)
        # COUNT(x): rows where x is not NULL, as a sum of 0/1 (one row adds at most 1).
        indicator = self.fresh(f"{alias or 'count'}_not_null")
        value = self.expression(argument.copy())
        self.derived.append((indicator, f"CASE WHEN ({value}) IS NULL THEN 0 ELSE 1 END"))
        self.origins[indicator] = argument
        name = alias or f"count_{argument.sql()}"
        return name, lambda q: q.sum(indicator, bounds=(0.0, 1.0), name=name)

    def argument(self, node: Any, alias: str | None, function: str) -> str:
        """An aggregate's column: a column name, or a derived column of an expression."""
        from sqlglot import exp

        if isinstance(node, exp.Column):
            return self.column(node)
        name = self.fresh(f"{(alias or function.lower())}_value")
        self.derived.append((name, self.expression(node.copy())))
        self.origins[name] = node
        return name

    def bounds(self, node: Any, function: str) -> tuple[float, float]:
        from sqlglot import exp

        values = []
        items = node.expressions if isinstance(node, exp.Tuple) else []
        for item in items:
            sign = 1.0
            if isinstance(item, exp.Neg):
                sign, item = -1.0, item.this
            if not isinstance(item, exp.Literal) or item.is_string:
                break
            values.append(sign * float(item.this))
        if len(values) != 2 or len(items) != 2:
            raise self.error(f"{function}: bounds are (low, high), two numbers.", node)
        return (values[0], values[1])

    # ------------------------------------------------------------------ output
    def order_and_limit(self, tree: Any, statement: SqlStatement) -> None:
        from sqlglot import exp

        order = tree.args.get("order")
        if order is not None:
            pairs = []
            for item in order.expressions:
                target = item.this
                if not isinstance(target, exp.Column) or target.table:
                    raise self.error("ORDER BY names output columns.", item)
                if target.name not in statement.columns:
                    raise self.error(
                        f"ORDER BY {target.name!r}: not an output column "
                        f"({list(statement.columns)}).",
                        target,
                    )
                pairs.append((target.name, bool(item.args.get("desc"))))
            statement.order_by = tuple(pairs)
        limit = tree.args.get("limit")
        if limit is not None:
            value = limit.expression
            if not isinstance(value, exp.Literal) or value.is_string or not value.this.isdigit():
                raise self.error("LIMIT takes a whole number.", limit)
            statement.limit = int(value.this)


def _engine_reason(err: EngineError) -> str:
    """The engine's own words for a binding error, without its restatement of dpkit's
    internal SQL (DuckDB's ``LINE 1: ...`` context, Spark's plan)."""
    message = str(err)
    for prefix in ("cannot run the query: ", "cannot run the query:"):
        if prefix in message:
            message = message.split(prefix, 1)[1]
            break
    first = message.strip().splitlines()[0] if message.strip() else "a type error"
    return f"The engine cannot type this expression: {first.strip()}"


def translate(
    text: str,
    tables: Mapping[str, TableView],
    *,
    single: bool,
    joined_schema: Callable[[Query], Mapping[str, str]],
    public_names: list[str],
    typed: Callable[[Query, tuple[tuple[str, str], ...]], Mapping[str, str]] | None = None,
) -> SqlStatement:
    """Translate one statement (module docstring). ``tables``: the Session's tables
    (one, with ``single``, whatever its name in FROM); ``joined_schema``: the columns a
    query's joined rows have (the Session computes them, public information only);
    ``typed``: the types of derived columns on those rows, bound by the engine (a
    binding error is an :class:`~dpkit.errors.EngineError`), for errors' positions."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    clause = split_clause(text)
    for key in clause.options:
        if key not in OPTIONS:
            raise SqlError(
                f"Unknown option {key!r}. Options: {', '.join(OPTIONS)}.",
                text,
                clause.positions[key],
            )
    try:
        statements = sqlglot.parse(clause.rest, read=_dialect())
    except RecursionError:
        raise SqlError("The statement is nested too deeply to parse.", text) from None
    except ParseError as err:
        errors = getattr(err, "errors", None) or [{}]
        first = errors[0]
        start = first.get("start_context") and None
        line, col = first.get("line"), first.get("col")
        if line and col:
            lines = text.splitlines(keepends=True)
            start = sum(len(x) for x in lines[: line - 1]) + col - 1
        description = first.get("description") or str(err).splitlines()[0]
        raise SqlError(f"Cannot parse the statement: {description}", text, start) from None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise SqlError("Give exactly one statement.", text)
    tree: Any = statements[0]
    translator = _Translator(clause, text, tables, single, joined_schema, typed)
    if not clause.private:
        read = [t.name for t in tree.find_all(exp.Table)]
        private = [n for n in read if single or n not in public_names]
        if private or not read:
            node = next((t for t in tree.find_all(exp.Table) if t.name in private), tree)
            raise translator.error(
                "Every SELECT over a private table must be SELECT WITH DIFFERENTIAL_PRIVACY.",
                node,
            )
        return SqlStatement(text, clause.explain, None, None)
    return translator.run(tree)


def finish_result(result: Any, statement: SqlStatement) -> Any:
    """The released rows as the statement asked: square roots of the variances of
    STDDEV, output names, ORDER BY and LIMIT -- post-processing of the release."""
    import dataclasses

    import numpy as np

    columns = dict(result.columns)
    for name in statement.square_roots:
        variance = np.asarray(columns[name], dtype=float)
        root = np.sqrt(np.clip(variance, 0.0, None))
        if f"{name}_se" in columns:
            se = np.asarray(columns[f"{name}_se"], dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                columns[f"{name}_se"] = np.where(root > 0, se / (2.0 * root), np.nan)
        for suffix in ("_low", "_high"):
            if f"{name}{suffix}" in columns:
                bound = np.asarray(columns[f"{name}{suffix}"], dtype=float)
                columns[f"{name}{suffix}"] = np.sqrt(np.clip(bound, 0.0, None))
        columns[name] = root
    renamed = {statement.renames.get(k, k): v for k, v in columns.items()}
    groups = tuple(statement.renames.get(g, g) for g in result.group_columns)
    if statement.order_by and renamed:
        keys = [np.asarray(renamed[c]) for c, _ in reversed(statement.order_by)]
        order = np.arange(len(next(iter(renamed.values()))))
        for (column, descending), values in zip(reversed(statement.order_by), keys, strict=True):
            ranked = np.argsort(values[order], kind="stable")
            order = order[ranked[::-1]] if descending else order[ranked]
            del column
        renamed = {k: np.asarray(v)[order] for k, v in renamed.items()}
    if statement.limit is not None:
        renamed = {k: np.asarray(v)[: statement.limit] for k, v in renamed.items()}
    return dataclasses.replace(result, columns=renamed, group_columns=groups)
