"""TPC-H in SQL with differential privacy: dpkit's ``Session.sql`` against plain DuckDB,
SmartNoise SQL and Qrlew, per query.

The queries of TPC-H that have a DP form (Q1, Q3, Q5, Q6, Q10, Q12, Q13, Q14, Q18;
Q13 and Q18 through a subquery grouped by the privacy unit), written three times: in dpkit's
GoogleSQL DP dialect, in plain DuckDB SQL (the truth and the time floor), and in each
peer's dialect where the peer has one for it. Per query the script reports

* dpkit's time for ``session.sql(text)`` against the same non-private query in DuckDB,
  on the same machine, over the same tables held in memory (the ratio; goal: at most 3),
  and the time to open the Session once (``Session.from_duckdb`` over DuckDB's tables:
  copying them into its own database);
* the same query with each customer's contribution bounded by hand in plain SQL
  (:func:`bounded_sql`, the cheapest form we know of dpkit's bounding semantics, joined
  private tables truncated as dpkit truncates them; no noise): the floor of any
  evaluation that bounds contributions as dpkit does, its ratio to DuckDB, and dpkit's
  ratio to it (what dpkit adds above the floor);
* the median relative error of every system over (group, statistic) cells, pooled over
  ``--runs`` runs at the same epsilon: ``|released - true| / |true|`` over the cells
  whose true value is non-zero; a group the system did not release counts as error 1
  (answer 0). Released groups whose true value is 0 (public keys with no rows) are not
  in the median; the table counts them separately;
* the queries a peer cannot run, with its own error message.

Data
----
TPC-H at scale factor ``--scale`` from ``tpchgen-cli`` (PyPI, a Rust port of dbgen;
``pip install tpchgen-cli``; DuckDB's ``tpch`` extension would need a download this
workplace cannot make), written once to ``--data`` (default ``/tmp/tpch``) as Parquet.
The privacy unit is the customer. TPC-H's ``lineitem`` has no customer column, so the
curator attaches it once, offline: ``lineitem.l_custkey`` is ``orders.o_custkey`` of the
line's order (every private table must carry the unit; this is the data owner's step,
not the analyst's). DECIMAL columns are stored as DOUBLE (SmartNoise and Qrlew read
floats). ``orders``, ``lineitem`` and ``customer`` are private; ``nation``, ``region``,
``part`` and ``supplier`` are public reference data (not persons), and two small
public key tables come from TPC-H's specification, not from the data: ``flags`` (the
6 pairs of l_returnflag in {A, N, R} and l_linestatus in {F, O}) and ``shipmodes``
(the 7 ship modes); grouping by ``n_name`` uses the public ``nation`` table's keys.

Privacy parameters
------------------
epsilon = 1 per query for every system. dpkit uses pure DP where the group keys are
public (public tables) and ``delta = 1e-6`` where it selects keys privately (Q3).
SmartNoise and Qrlew have no public key sets: they release the groups that pass a noisy
threshold, so they run with ``delta = 1e-6`` throughout. The contribution bounds (per
customer: at most ``g`` groups and ``r`` rows per group; clamping bounds per value) are
public choices made from TPC-H's generator rules (a customer has at most ~40 orders of
at most 7 lines), the same for all: SmartNoise's ``max_ids`` (rows per customer in the
table) and Qrlew's ``max_multiplicity`` are ``g * r``; Qrlew's
``max_privacy_unit_groups`` is ``g``. dpkit's Q1 and Q1a bound the same way: at most
``g`` groups and ``g * r`` rows per customer in all (``max_total_rows_contributed``);
the other queries bound rows per group (``max_rows_contributed = r``).

Peer environments (they pin other pandas/numpy versions; outside the repository)::

    python3.11 -m venv /tmp/peer-venvs/smartnoise
    /tmp/peer-venvs/smartnoise/bin/pip install smartnoise-sql pyarrow
    python3.11 -m venv /tmp/peer-venvs/qrlew
    /tmp/peer-venvs/qrlew/bin/pip install pyqrlew duckdb pyarrow

Each peer runs in a subprocess of its venv (as ``bench_session_peers.py``), reading the
same Parquet files. SmartNoise runs on its pandas reader (it loads the table into an
in-memory SQLite database, included in its time); Qrlew rewrites the query into SQL
that DuckDB runs over the same tables (its schema comes from an empty SQLite copy of
the tables' schema with the clamping bounds declared, never from the data).

Run: ``python benchmarks/tpch_sql.py --scale 0.1 --quick`` (a few minutes) or
``python benchmarks/tpch_sql.py --scale 1`` (results in ``benchmarks/results/tpch_sql.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

VENVS = Path(os.environ.get("PEER_VENVS", "/tmp/peer-venvs"))
RESULTS = Path(__file__).resolve().parent / "results" / "tpch_sql.md"
EPSILON = 1.0
DELTA = 1e-6
PRIVATE = {"lineitem": "l_custkey", "orders": "o_custkey", "customer": "c_custkey"}
PUBLIC = ("nation", "region", "part", "supplier", "flags", "shipmodes")
SHIPMODES = ("AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK")

# Clamping bounds (public: TPC-H's generator rules). Quantity 1..50; retail price at
# most ~2,100, so an extended price at most 105,000; discount 0..0.10; tax 0..0.08.
QTY = "(0, 50)"
PRICE = "(0, 105000)"
DISC = "(0, 0.1)"
CHARGE = "(0, 113400)"


@dataclass(frozen=True)
class Bounds:
    groups: int  # groups per customer
    rows: int  # rows per customer and group

    @property
    def total(self) -> int:
        return self.groups * self.rows


@dataclass
class TpchQuery:
    """One query in every dialect (None: that system cannot express it; the reason)."""

    name: str
    title: str
    truth: str  # plain DuckDB SQL: the same query, non-private
    groups: tuple[str, ...]  # group columns of the output
    values: tuple[str, ...]  # the released statistics compared
    bounds: Bounds
    dpkit: str | None = None
    smartnoise: str | None = None  # table.column names are SmartNoise's tpch.<table>
    smartnoise_table: str = "lineitem"
    qrlew: str | None = None
    gap: str = ""  # why dpkit's grammar cannot express the original query
    note: str = ""  # how the DP form differs from TPC-H's text
    # Q14: promo_revenue = 100 * promo / revenue, computed from the released sums
    # (post-processing, the same for the truth and every system).
    ratio: bool = False
    # The same query with the customer's contribution bounded, written by hand in the
    # cheapest form of dpkit's bounding semantics (bounded_sql); None where the DP form
    # is already grouped by the customer (Q13; Q18's is written by hand).
    bounded: str | None = None


TABLE_OF_PREFIX = {
    "l": "lineitem",
    "o": "orders",
    "c": "customer",
    "s": "supplier",
    "n": "nation",
    "r": "region",
    "p": "part",
}


def qualify(text: str) -> str:
    """The columns of ON clauses qualified by their table (dpkit's ON wants both sides
    qualified; the column prefixes of TPC-H name the table)."""
    import re

    def one(match: re.Match[str]) -> str:
        left, right = match.group(1), match.group(2)
        return f"{TABLE_OF_PREFIX[left[0]]}.{left} = {TABLE_OF_PREFIX[right[0]]}.{right}"

    return re.sub(r"\b([a-z]_[a-z]+) = ([a-z]_[a-z]+)\b", one, text)


def _dp(options: str) -> str:
    return f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = {EPSILON:g}, {options})"


@dataclass(frozen=True)
class Value:
    """One released statistic of a hand-written bounded query: ``kind`` is "count",
    "sum" or "avg" of ``expression`` clamped to ``[low, high]``."""

    name: str
    kind: str
    expression: str = "1"
    low: float = 0.0
    high: float = 1.0


def bounded_sql(
    unit: str,
    groups: tuple[str, ...],
    from_where: str,
    values: list[Value],
    *,
    rows: int,
    max_groups: int = 1,
    total: int | None = None,
    truncate: tuple[tuple[str, str, str, str], ...] = (),
    persons: tuple[str, str] | None = None,
) -> str:
    """The query with each customer's contribution bounded as dpkit bounds it, in the
    cheapest SQL we know for those semantics (the floor any contribution-bounded
    evaluation pays): one ``GROUP BY`` (customer, group) computes each pair's rows and
    clamped sums; a pair of ``c`` rows above ``m = rows`` is scaled by ``m / c``
    (dpkit's step 2); a customer keeps ``max_groups`` pairs, chosen by DuckDB's own
    hash of the pair (a stand-in for dpkit's keyed hash: cheaper, so the floor stays a
    lower bound), by one window over the pairs, skipped where the query has no group;
    with ``total``, a customer whose kept rows exceed ``total`` has every pair
    scaled by the same factor (dpkit's step 3b). Each joined private table of
    ``truncate`` (table, its customer column, its join key, the query's filter on it
    alone) keeps at most one row per customer and key value (``join_truncate = 1``),
    the rows of the query's filter only, as dpkit truncates: the (customer, key) values
    with more rows are found by one ``GROUP BY`` (cheaper than dpkit's window count:
    0.15 against 0.26 s on orders at SF 1) and only their rows are ranked. With
    ``persons`` (a truncated table joined on the customer alone, and the SQL of the
    customers its filter keeps), the rows of the other tables are restricted to those
    customers first, as dpkit does (``_joins._selects_persons``). Left out, each of
    which dpkit pays on top: exact fixed-point integer sums (here DOUBLE), NULL and NaN
    guards, the noise and the accounting."""
    m, k = rows, max_groups
    g = ", ".join(groups)
    gc = g + ", " if groups else ""
    clamped = [
        f"least(greatest(CAST({v.expression} AS DOUBLE), {v.low!r}), {v.high!r}) AS __v{i}"
        for i, v in enumerate(values)
        if v.kind != "count"
    ]
    sums = [f"sum(__v{i}) AS __s{i}" for i, v in enumerate(values) if v.kind != "count"]
    pair_columns = ", ".join(["count(*) AS __c", *sums])
    pairs = f"SELECT __u, {gc}{pair_columns} FROM __rows GROUP BY __u" + (
        ", " + g if groups else ""
    )
    if groups:
        pairs += f" QUALIFY row_number() OVER (PARTITION BY __u ORDER BY hash(__u, {g})) <= {k}"
    scale = f"least(1.0, {m} / __c)"
    if total is not None:
        scale += f" * least(1.0, {total} / sum(least(__c, {m})) OVER (PARTITION BY __u))"
    scaled = [f"least(__c, {m}) AS __n"] if total is None else [f"__c * ({scale}) AS __n"]
    scaled += [f"__s{i} * ({scale}) AS __s{i}" for i, v in enumerate(values) if v.kind != "count"]
    outputs = []
    for i, v in enumerate(values):
        if v.kind == "count":
            outputs.append(f"sum(__n) AS {v.name}")
        elif v.kind == "sum":
            outputs.append(f"sum(__s{i}) AS {v.name}")
        else:
            outputs.append(f"sum(__s{i}) / sum(__n) AS {v.name}")
    ctes = []
    if persons is not None:
        assert " WHERE " in from_where
        from_where = from_where.replace(" WHERE ", f" WHERE {unit} IN ({persons[1]}) AND ", 1)
    for table, person, key, where in truncate:
        if persons is not None and table != persons[0]:
            where = f"{where} AND {person} IN ({persons[1]})"
        kept = f"(SELECT * FROM {table} WHERE {where})"
        by = person if key == person else f"{person}, {key}"
        over = (
            f"__x_{table} AS MATERIALIZED (SELECT {by} FROM {kept} AS __k "
            f"GROUP BY {by} HAVING count(*) > 1)"
        )
        on = f"USING ({by})"
        ranked = (
            f"SELECT __r.* FROM {kept} AS __r SEMI JOIN __x_{table} {on} QUALIFY "
            f"row_number() OVER (PARTITION BY {by} ORDER BY hash(__r)) <= 1"
        )
        ctes += [
            over,
            f"__t_{table} AS (SELECT __a.* FROM {kept} AS __a ANTI JOIN __x_{table} {on} "
            f"UNION ALL {ranked})",
        ]
        from_where = from_where.replace(f"JOIN {table} ON", f"JOIN __t_{table} AS {table} ON")
    scan = f"SELECT {unit} AS __u, {gc}{', '.join(['1 AS __one', *clamped])} {from_where}"
    return (
        f"WITH {''.join(c + ', ' for c in ctes)}__rows AS ({scan}), __pairs AS ({pairs}), "
        f"__scaled AS (SELECT {gc}{', '.join(scaled)} FROM __pairs) "
        f"SELECT {gc}{', '.join(outputs)} FROM __scaled" + (f" GROUP BY {g}" if groups else "")
    )


Q1_FILTER = "l_shipdate <= DATE '1998-09-02'"
Q1_AGGS_SQL = """
    SUM(l_quantity) AS sum_qty,
    SUM(l_extendedprice) AS sum_base_price,
    SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
    SUM(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
    AVG(l_quantity) AS avg_qty,
    AVG(l_extendedprice) AS avg_price,
    AVG(l_discount) AS avg_disc,
    COUNT(*) AS count_order"""
Q1A_AGGS_SQL = """
    SUM(l_quantity) AS sum_qty,
    AVG(l_quantity) AS avg_qty,
    AVG(l_discount) AS avg_disc,
    COUNT(*) AS count_order"""
REVENUE = "l_extendedprice * (1 - l_discount)"


def queries() -> list[TpchQuery]:
    b1 = Bounds(4, 40)
    q1 = TpchQuery(
        "Q1",
        "pricing summary report",
        truth=f"SELECT l_returnflag, l_linestatus, {Q1_AGGS_SQL} FROM lineitem "
        f"WHERE {Q1_FILTER} GROUP BY l_returnflag, l_linestatus",
        groups=("l_returnflag", "l_linestatus"),
        values=(
            "sum_qty",
            "sum_base_price",
            "sum_disc_price",
            "sum_charge",
            "avg_qty",
            "avg_price",
            "avg_disc",
            "count_order",
        ),
        bounds=b1,
        dpkit=_dp(
            f"max_groups_contributed = {b1.groups}, max_total_rows_contributed = {b1.total}, "
            "group_keys = 'flags'"
        )
        + f"""
    l_returnflag, l_linestatus,
    SUM(l_quantity, contribution_bounds_per_row => {QTY}) AS sum_qty,
    SUM(l_extendedprice, contribution_bounds_per_row => {PRICE}) AS sum_base_price,
    SUM({REVENUE}, contribution_bounds_per_row => {PRICE}) AS sum_disc_price,
    SUM({REVENUE} * (1 + l_tax), contribution_bounds_per_row => {CHARGE}) AS sum_charge,
    AVG(l_quantity, contribution_bounds_per_row => {QTY}) AS avg_qty,
    AVG(l_extendedprice, contribution_bounds_per_row => {PRICE}) AS avg_price,
    AVG(l_discount, contribution_bounds_per_row => {DISC}) AS avg_disc,
    COUNT(*) AS count_order
FROM lineitem WHERE {Q1_FILTER}
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
        smartnoise=f"SELECT l_returnflag, l_linestatus, {Q1_AGGS_SQL} FROM tpch.lineitem "
        "WHERE l_shipdate <= '1998-09-02' GROUP BY l_returnflag, l_linestatus",
        qrlew=f"SELECT l_returnflag, l_linestatus, {Q1_AGGS_SQL} FROM lineitem "
        "WHERE l_shipdate <= '1998-09-02' GROUP BY l_returnflag, l_linestatus",
    )
    q1a = TpchQuery(
        "Q1a",
        "Q1's quantities and discounts (common ground)",
        truth=f"SELECT l_returnflag, l_linestatus, {Q1A_AGGS_SQL} FROM lineitem "
        f"WHERE {Q1_FILTER} GROUP BY l_returnflag, l_linestatus",
        groups=("l_returnflag", "l_linestatus"),
        values=("sum_qty", "avg_qty", "avg_disc", "count_order"),
        bounds=b1,
        dpkit=_dp(
            f"max_groups_contributed = {b1.groups}, max_total_rows_contributed = {b1.total}, "
            "group_keys = 'flags'"
        )
        + f"""
    l_returnflag, l_linestatus,
    SUM(l_quantity, contribution_bounds_per_row => {QTY}) AS sum_qty,
    AVG(l_quantity, contribution_bounds_per_row => {QTY}) AS avg_qty,
    AVG(l_discount, contribution_bounds_per_row => {DISC}) AS avg_disc,
    COUNT(*) AS count_order
FROM lineitem WHERE {Q1_FILTER} GROUP BY l_returnflag, l_linestatus""",
        smartnoise=f"SELECT l_returnflag, l_linestatus, {Q1A_AGGS_SQL} FROM tpch.lineitem "
        "WHERE l_shipdate <= '1998-09-02' GROUP BY l_returnflag, l_linestatus",
        qrlew=f"SELECT l_returnflag, l_linestatus, {Q1A_AGGS_SQL} FROM lineitem "
        "WHERE l_shipdate <= '1998-09-02' GROUP BY l_returnflag, l_linestatus",
        note="not a TPC-H query: the aggregates of Q1 that SmartNoise accepts (it refuses "
        "sums of expressions, and its noise-scale check refuses the price columns' bound "
        "105,000 at epsilon 1)",
    )
    b3 = Bounds(2, 7)
    q3_from = (
        "FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
        "JOIN customer ON l_custkey = c_custkey "
    )
    q3 = TpchQuery(
        "Q3",
        "shipping priority, per order date",
        truth=f"SELECT o_orderdate, SUM({REVENUE}) AS revenue {q3_from}"
        "WHERE c_mktsegment = 'BUILDING' AND o_orderdate < DATE '1995-03-15' "
        "AND l_shipdate > DATE '1995-03-15' GROUP BY o_orderdate",
        groups=("o_orderdate",),
        values=("revenue",),
        bounds=b3,
        dpkit=_dp(
            f"delta = {DELTA:g}, max_groups_contributed = {b3.groups}, "
            f"max_rows_contributed = {b3.rows}, join_truncate = 1"
        )
        + f"""
    o_orderdate, SUM({REVENUE}, contribution_bounds_per_row => {PRICE}) AS revenue
{qualify(q3_from)}
WHERE c_mktsegment = 'BUILDING' AND o_orderdate < DATE '1995-03-15'
  AND l_shipdate > DATE '1995-03-15'
GROUP BY o_orderdate""",
        qrlew=f"SELECT o_orderdate, SUM({REVENUE}) AS revenue {q3_from}"
        "WHERE c_mktsegment = 'BUILDING' AND o_orderdate < '1995-03-15' "
        "AND l_shipdate > '1995-03-15' GROUP BY o_orderdate",
        smartnoise=None,
        note="TPC-H groups by l_orderkey (one customer per group: nothing a DP release "
        "can show) and keeps the top 10; the DP form groups by o_orderdate (keys selected "
        "privately), all groups",
    )
    b5 = Bounds(1, 10)
    q5_from = (
        "FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
        "JOIN customer ON l_custkey = c_custkey "
        "JOIN supplier ON l_suppkey = s_suppkey AND c_nationkey = s_nationkey "
        "JOIN nation ON s_nationkey = n_nationkey "
        "JOIN region ON n_regionkey = r_regionkey "
    )
    # dpkit drops a joined table's key columns (s_nationkey after the supplier join),
    # so nation joins on the customer's nation key, equal to it by the ON above.
    q5_from_dp = qualify(q5_from).replace(
        "supplier.s_nationkey = nation", "customer.c_nationkey = nation"
    )
    q5_where = (
        "WHERE r_name = 'ASIA' AND o_orderdate >= DATE '1994-01-01' "
        "AND o_orderdate < DATE '1995-01-01' "
    )
    q5 = TpchQuery(
        "Q5",
        "local supplier volume",
        truth=f"SELECT n_name, SUM({REVENUE}) AS revenue {q5_from}{q5_where}GROUP BY n_name",
        groups=("n_name",),
        values=("revenue",),
        bounds=b5,
        dpkit=_dp(
            f"max_groups_contributed = {b5.groups}, max_rows_contributed = {b5.rows}, "
            "join_truncate = 1"
        )
        + f"""
    n_name, SUM({REVENUE}, contribution_bounds_per_row => {PRICE}) AS revenue
{q5_from_dp}
{q5_where}
GROUP BY n_name ORDER BY revenue DESC""",
        qrlew=f"SELECT n_name, SUM({REVENUE}) AS revenue {q5_from}"
        + q5_where.replace("DATE ", "")
        + "GROUP BY n_name",
        note="keys: the 25 nations (public); 20 are outside ASIA (true revenue 0)",
    )
    b6 = Bounds(1, 10)
    q6_where = (
        "WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
        "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"
    )
    q6 = TpchQuery(
        "Q6",
        "forecasting revenue change",
        truth=f"SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem {q6_where}",
        groups=(),
        values=("revenue",),
        bounds=b6,
        dpkit=_dp(f"max_rows_contributed = {b6.rows}")
        + f"""
    SUM(l_extendedprice * l_discount, contribution_bounds_per_row => (0, 10500)) AS revenue
FROM lineitem {q6_where}""",
        smartnoise="SELECT SUM(l_extendedprice * l_discount) AS revenue FROM tpch.lineitem "
        + q6_where.replace("DATE ", ""),
        qrlew="SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem "
        + q6_where.replace("DATE ", ""),
    )
    b10 = Bounds(1, 10)
    q10_from = (
        "FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
        "JOIN customer ON l_custkey = c_custkey "
        "JOIN nation ON c_nationkey = n_nationkey "
    )
    q10_where = (
        "WHERE o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1994-01-01' "
        "AND l_returnflag = 'R' "
    )
    q10 = TpchQuery(
        "Q10",
        "returned item reporting, per nation",
        truth=f"SELECT n_name, SUM({REVENUE}) AS revenue {q10_from}{q10_where}GROUP BY n_name",
        groups=("n_name",),
        values=("revenue",),
        bounds=b10,
        dpkit=_dp(
            f"max_groups_contributed = {b10.groups}, max_rows_contributed = {b10.rows}, "
            "join_truncate = 1"
        )
        + f"""
    n_name, SUM({REVENUE}, contribution_bounds_per_row => {PRICE}) AS revenue
{qualify(q10_from)}
{q10_where}
GROUP BY n_name ORDER BY revenue DESC""",
        qrlew=f"SELECT n_name, SUM({REVENUE}) AS revenue {q10_from}"
        + q10_where.replace("DATE ", "")
        + "GROUP BY n_name",
        note="TPC-H lists the top 20 customers (one customer per group); the DP form "
        "groups by the customer's nation",
    )
    b12 = Bounds(2, 10)
    q12_where = (
        "WHERE l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate "
        "AND l_shipdate < l_commitdate AND l_receiptdate >= DATE '1994-01-01' "
        "AND l_receiptdate < DATE '1995-01-01' "
    )
    high = "CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END"
    low = (
        "CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END"
    )
    q12_from = "FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
    q12 = TpchQuery(
        "Q12",
        "shipping modes and order priority",
        truth=f"SELECT l_shipmode, SUM({high}) AS high_line_count, SUM({low}) AS "
        f"low_line_count {q12_from}{q12_where}GROUP BY l_shipmode",
        groups=("l_shipmode",),
        values=("high_line_count", "low_line_count"),
        bounds=b12,
        dpkit=_dp(
            f"max_groups_contributed = {b12.groups}, max_rows_contributed = {b12.rows}, "
            "join_truncate = 1, group_keys = 'shipmodes'"
        )
        + f"""
    l_shipmode,
    SUM({high}, contribution_bounds_per_row => (0, 1)) AS high_line_count,
    SUM({low}, contribution_bounds_per_row => (0, 1)) AS low_line_count
{qualify(q12_from)}
{q12_where}
GROUP BY l_shipmode ORDER BY l_shipmode""",
        qrlew=f"SELECT l_shipmode, SUM({high}) AS high_line_count, SUM({low}) AS "
        f"low_line_count {q12_from}" + q12_where.replace("DATE ", "") + "GROUP BY l_shipmode",
        note="keys: the 7 ship modes (public); 5 are filtered out (true count 0)",
    )
    b14 = Bounds(1, 10)
    promo = f"CASE WHEN p_type LIKE 'PROMO%' THEN {REVENUE} ELSE 0 END"
    q14_where = "WHERE l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'"
    q14 = TpchQuery(
        "Q14",
        "promotion effect",
        truth=f"SELECT SUM({promo}) AS promo, SUM({REVENUE}) AS revenue "
        f"FROM lineitem JOIN part ON l_partkey = p_partkey {q14_where}",
        groups=(),
        values=("promo_revenue",),
        bounds=b14,
        dpkit=_dp(f"max_rows_contributed = {b14.rows}")
        + f"""
    SUM({promo}, contribution_bounds_per_row => {PRICE}) AS promo,
    SUM({REVENUE}, contribution_bounds_per_row => {PRICE}) AS revenue
{qualify("FROM lineitem JOIN part ON l_partkey = p_partkey")}
{q14_where}""",
        qrlew=f"SELECT SUM({promo}) AS promo, SUM({REVENUE}) AS revenue "
        "FROM lineitem JOIN part ON l_partkey = p_partkey " + q14_where.replace("DATE ", ""),
        ratio=True,
        gap="an expression of aggregates (100 * SUM(..) / SUM(..)) is not a SELECT item: "
        "the two sums are released and divided afterwards (post-processing)",
    )
    q13_sql = (
        "SELECT c_count, COUNT(*) AS custdist FROM (SELECT c_custkey, COUNT(o_orderkey) AS "
        "c_count FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment "
        "NOT LIKE '%special%requests%' GROUP BY c_custkey) AS c_orders GROUP BY c_count"
    )
    # Q13's DP form: the per-customer count is a subquery grouped by the privacy unit
    # (Query.per_person); TPC-H's extra ON condition on orders becomes a CASE inside the
    # COUNT (the same counts: a customer whose orders all match still counts at 0).
    # join_truncate 64: orders kept per customer (TPC-H gives each customer at most ~40
    # at SF 1; a public cap, not read from the data).
    b13 = Bounds(1, 1)
    q13 = TpchQuery(
        "Q13",
        "customer distribution",
        truth=q13_sql,
        groups=("c_count",),
        values=("custdist",),
        bounds=b13,
        dpkit=_dp(
            f"delta = {DELTA:g}, max_groups_contributed = {b13.groups}, "
            f"max_rows_contributed = {b13.rows}, join_truncate = 64"
        )
        + """
    c_count, COUNT(*) AS custdist
FROM (SELECT c_custkey,
             COUNT(CASE WHEN o_comment NOT LIKE '%special%requests%' THEN o_orderkey END)
               AS c_count
      FROM customer LEFT OUTER JOIN orders ON customer.c_custkey = orders.o_custkey
      GROUP BY c_custkey) AS c_orders
GROUP BY c_count""",
        qrlew=q13_sql,
        note="the per-customer count is a subquery in FROM grouped by the privacy unit; "
        "TPC-H's ON condition on o_comment is a CASE inside the COUNT (same counts); "
        "c_count keys selected privately",
    )
    q18_sql = (
        "SELECT COUNT(*) AS n FROM orders WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem "
        "GROUP BY l_orderkey HAVING SUM(l_quantity) > 300)"
    )
    # Q18's DP form: the orders of more than 300 units, per customer and order (a
    # subquery grouped by the privacy unit and the order), counted. join_truncate 7: an
    # order has at most 7 lines in TPC-H; max_rows_contributed 4 large orders per customer.
    b18 = Bounds(1, 4)
    q18 = TpchQuery(
        "Q18",
        "large volume orders, counted",
        truth=q18_sql,
        groups=(),
        values=("n",),
        bounds=b18,
        dpkit=_dp(f"max_rows_contributed = {b18.rows}, join_truncate = 7")
        + """
    COUNT(*) AS n
FROM (SELECT o_custkey, o_orderkey
      FROM orders JOIN lineitem ON orders.o_orderkey = lineitem.l_orderkey
      GROUP BY o_custkey, o_orderkey HAVING SUM(l_quantity) > 300) AS big_orders""",
        qrlew=q18_sql,
        note="TPC-H lists one row per customer and order (no DP form releases it); the DP "
        "form counts the orders of more than 300 units, as a subquery in FROM grouped by "
        "customer and order with HAVING (TPC-H's IN (SELECT ... HAVING) reads lineitem "
        "across customers: not a per-person subquery)",
    )
    # The hand-written bounded floor of each query (bounded_sql): dpkit's options above,
    # the same clamping bounds; Q1 and Q1a bound a customer's rows in total (rows per
    # group default to the total, as dpkit's SQL does).
    qty, price, disc = (0.0, 50.0), (0.0, 105000.0), (0.0, 0.1)
    q1_values = [
        Value("sum_qty", "sum", "l_quantity", *qty),
        Value("sum_base_price", "sum", "l_extendedprice", *price),
        Value("sum_disc_price", "sum", REVENUE, *price),
        Value("sum_charge", "sum", f"{REVENUE} * (1 + l_tax)", 0.0, 113400.0),
        Value("avg_qty", "avg", "l_quantity", *qty),
        Value("avg_price", "avg", "l_extendedprice", *price),
        Value("avg_disc", "avg", "l_discount", *disc),
        Value("count_order", "count"),
    ]
    q1_groups = ("l_returnflag", "l_linestatus")
    q1_from = f"FROM lineitem WHERE {Q1_FILTER}"
    q1.bounded = bounded_sql(
        "l_custkey", q1_groups, q1_from, q1_values,
        rows=b1.total, max_groups=b1.groups, total=b1.total,
    )  # fmt: skip
    q1a_values = [v for v in q1_values if v.name in q1a.values]
    q1a.bounded = bounded_sql(
        "l_custkey", q1_groups, q1_from, q1a_values,
        rows=b1.total, max_groups=b1.groups, total=b1.total,
    )  # fmt: skip
    revenue = [Value("revenue", "sum", REVENUE, *price)]
    q3.bounded = bounded_sql(
        "l_custkey", ("o_orderdate",), q3_from + "WHERE c_mktsegment = 'BUILDING' AND "
        "o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'", revenue,
        rows=b3.rows, max_groups=b3.groups,
        truncate=(
            ("orders", "o_custkey", "o_orderkey", "o_orderdate < DATE '1995-03-15'"),
            ("customer", "c_custkey", "c_custkey", "c_mktsegment = 'BUILDING'"),
        ),
        persons=("customer", "SELECT c_custkey FROM customer WHERE c_mktsegment = 'BUILDING'"),
    )  # fmt: skip

    def orders_in(start: str, end: str) -> tuple[tuple[str, str, str, str], ...]:
        """Truncated orders of the dates [start, end) and customers (Q5, Q10)."""
        dates = f"o_orderdate >= DATE '{start}' AND o_orderdate < DATE '{end}'"
        customers = ("customer", "c_custkey", "c_custkey", "TRUE")
        return ("orders", "o_custkey", "o_orderkey", dates), customers

    q5.bounded = bounded_sql(
        "l_custkey", ("n_name",), q5_from + q5_where, revenue,
        rows=b5.rows, max_groups=b5.groups, truncate=orders_in("1994-01-01", "1995-01-01"),
    )  # fmt: skip
    q6.bounded = bounded_sql(
        "l_custkey", (), f"FROM lineitem {q6_where}",
        [Value("revenue", "sum", "l_extendedprice * l_discount", 0.0, 10500.0)], rows=b6.rows,
    )  # fmt: skip
    q10.bounded = bounded_sql(
        "l_custkey", ("n_name",), q10_from + q10_where, revenue,
        rows=b10.rows, max_groups=b10.groups, truncate=orders_in("1993-10-01", "1994-01-01"),
    )  # fmt: skip
    q12.bounded = bounded_sql(
        "l_custkey", ("l_shipmode",), q12_from + q12_where,
        [Value("high_line_count", "sum", high), Value("low_line_count", "sum", low)],
        rows=b12.rows, max_groups=b12.groups,
        truncate=(("orders", "o_custkey", "o_orderkey", "TRUE"),),
    )  # fmt: skip
    q14.bounded = bounded_sql(
        "l_custkey", (), f"FROM lineitem JOIN part ON l_partkey = p_partkey {q14_where}",
        [Value("promo", "sum", promo, *price), *revenue], rows=b14.rows,
    )  # fmt: skip
    # Q18's DP form is a per-customer subquery, not bounded_sql's shape: written by hand.
    # lineitem truncated to 7 rows per customer and order (the ranked rows chosen by
    # DuckDB's hash), the subquery's orders of more than 300 units (DOUBLE sums), at most
    # b18.rows of them per customer.
    q18_over = (
        "SELECT l_custkey, l_orderkey FROM lineitem GROUP BY l_custkey, l_orderkey "
        "HAVING count(*) > 7"
    )
    q18.bounded = (
        f"WITH __x AS MATERIALIZED ({q18_over}), "
        "__t AS (SELECT l_custkey, l_orderkey, l_quantity FROM lineitem ANTI JOIN __x "
        "USING (l_custkey, l_orderkey) UNION ALL SELECT __r.l_custkey, __r.l_orderkey, "
        "__r.l_quantity FROM lineitem AS __r SEMI JOIN __x USING (l_custkey, l_orderkey) "
        "QUALIFY row_number() OVER (PARTITION BY l_custkey, l_orderkey ORDER BY hash(__r)) "
        "<= 7), "
        "__big AS (SELECT o_custkey, o_orderkey FROM orders JOIN __t AS lineitem "
        "ON o_orderkey = l_orderkey AND o_custkey = l_custkey "
        "GROUP BY o_custkey, o_orderkey HAVING SUM(l_quantity) > 300) "
        f"SELECT sum(least(__c, {b18.rows})) AS n "
        "FROM (SELECT o_custkey, count(*) AS __c FROM __big GROUP BY o_custkey) AS __pairs"
    )
    return [q1, q1a, q3, q5, q6, q10, q12, q14, q13, q18]


# --- data --------------------------------------------------------------------------


def tpchgen() -> str:
    found = os.environ.get("TPCHGEN") or shutil.which("tpchgen-cli")
    if found:
        return found
    for candidate in (
        Path(sys.executable).parent / "tpchgen-cli",
        Path("/tmp/tpchgen-venv/bin/tpchgen-cli"),
    ):
        if candidate.exists():
            return str(candidate)
    raise SystemExit(
        "tpchgen-cli not found: pip install tpchgen-cli (in any venv) and put it on PATH, "
        "or set TPCHGEN to its path."
    )


def prepare(data: Path, scale: float) -> Path:
    """The curated tables for ``scale`` under ``data/sf<scale>`` (made once)."""
    import duckdb

    out = data / f"sf{scale:g}"
    if (out / "done").exists():
        return out
    raw = data / f"raw-sf{scale:g}"
    if not (raw / "lineitem.parquet").exists():
        raw.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [tpchgen(), "parquet", "-s", f"{scale:g}", f"--output-dir={raw}"], check=True
        )
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()

    def columns(table: str) -> str:
        described = con.sql(f"DESCRIBE SELECT * FROM '{raw}/{table}.parquet'").fetchall()
        return ", ".join(
            f"CAST({c} AS DOUBLE) AS {c}" if kind.startswith("DECIMAL") else c
            for c, kind, *_ in described
        )

    for table in ("orders", "customer", "nation", "region", "part", "supplier"):
        con.sql(
            f"COPY (SELECT {columns(table)} FROM '{raw}/{table}.parquet') "
            f"TO '{out}/{table}.parquet'"
        )
    # The curator's step: attach the privacy unit (the order's customer) to each line.
    con.sql(
        f"COPY (SELECT {columns('lineitem')}, o.o_custkey AS l_custkey "
        f"FROM '{raw}/lineitem.parquet' JOIN '{raw}/orders.parquet' o "
        f"ON l_orderkey = o.o_orderkey ORDER BY l_orderkey, l_linenumber) "
        f"TO '{out}/lineitem.parquet'"
    )
    # Public key tables from TPC-H's specification (not read from the data).
    con.sql(
        "COPY (SELECT f AS l_returnflag, s AS l_linestatus FROM (VALUES ('A'), ('N'), ('R')) "
        "a(f), (VALUES ('F'), ('O')) b(s) ORDER BY ALL) "
        f"TO '{out}/flags.parquet'"
    )
    modes = ", ".join(f"('{m}')" for m in SHIPMODES)
    con.sql(
        f"COPY (SELECT m AS l_shipmode FROM (VALUES {modes}) t(m)) TO '{out}/shipmodes.parquet'"
    )
    (out / "done").write_text("ok\n")
    return out


# --- error ---------------------------------------------------------------------------


def _post(rows: list[dict[str, Any]], ratio: bool) -> list[dict[str, Any]]:
    """Q14's answer from its two released sums: 100 * promo / revenue."""
    if not ratio:
        return rows
    for row in rows:
        promo, revenue = row.get("promo"), row.get("revenue")
        ok = promo is not None and revenue not in (None, 0)
        row["promo_revenue"] = 100.0 * float(promo) / float(revenue) if ok else None
    return rows


def _key(row: dict[str, Any], groups: tuple[str, ...]) -> tuple[str, ...]:
    """Group keys as text; dates as YYYY-MM-DD whatever type or JSON form they came in."""
    import re

    out = []
    for g in groups:
        text = str(row.get(g))
        if re.match(r"\d{4}-\d{2}-\d{2}", text):
            text = text[:10]
        out.append(text)
    return tuple(out)


def cell_errors(
    truth: list[dict[str, Any]], released: list[dict[str, Any]], query: TpchQuery
) -> tuple[list[float], int, int]:
    """Relative errors of the cells with a non-zero true value (a missing group: 1),
    the number of groups released, and how many of those have no true row."""
    true_rows = {_key(r, query.groups): r for r in truth}
    out_rows = {_key(r, query.groups): r for r in released}
    errors = []
    for key, row in true_rows.items():
        for value in query.values:
            t = row.get(value)
            if t is None or float(t) == 0.0:
                continue
            got = out_rows.get(key, {}).get(value)
            if got is None or got != got:  # missing group or NaN
                errors.append(1.0)
            else:
                errors.append(abs(float(got) - float(t)) / abs(float(t)))
    empty = sum(
        1
        for key in out_rows
        if key not in true_rows
        or all(true_rows[key].get(v) in (None, 0, 0.0) for v in query.values)
    )
    return errors, len(out_rows), empty


# --- dpkit and DuckDB (this interpreter) ---------------------------------------------


def _rows(frame: Any, names: tuple[str, ...]) -> list[dict[str, Any]]:
    records = frame.to_dict("records")
    return [{k: r.get(k) for k in names if k in r} for r in records]


def run_dpkit(
    directory: Path, todo: list[TpchQuery], runs: int, truth: dict[str, list[dict[str, Any]]]
) -> tuple[dict[str, Any], float]:
    import duckdb

    import dpkit as dp

    plain = duckdb.connect()
    for t in (*PRIVATE, *PUBLIC):
        plain.execute(f"CREATE TABLE {t} AS SELECT * FROM '{directory}/{t}.parquet'")
    # dpkit reads the same tables, in DuckDB's own format as DuckDB does (from Parquet
    # paths it would scan the files at every query, which DuckDB's in-memory tables
    # do not: 90 ms of Q6's 0.1 s).
    start = time.perf_counter()
    session = dp.Session.from_duckdb(
        plain,
        list(PRIVATE),
        privacy_unit=PRIVATE,
        public=list(PUBLIC),
        budget=dp.ApproxDP(1e6, 1e-2),
    )
    opened = time.perf_counter() - start
    out: dict[str, Any] = {}
    for q in todo:
        names = (*q.groups, *q.values, "promo", "revenue")
        if q.dpkit is None:
            if q.truth:
                truth[q.name] = _post(_rows(plain.sql(q.truth).df(), names), q.ratio)
            continue
        try:
            plain.sql(q.truth).fetchall()  # warm-up
            floor = []
            for _ in range(max(runs, 3)):
                t0 = time.perf_counter()
                truth[q.name] = _post(_rows(plain.sql(q.truth).df(), names), q.ratio)
                floor.append(time.perf_counter() - t0)
            bounded = []
            if q.bounded is not None:
                plain.sql(q.bounded).fetchall()  # warm-up
                for _ in range(max(runs, 3)):
                    t0 = time.perf_counter()
                    plain.sql(q.bounded).fetchall()
                    bounded.append(time.perf_counter() - t0)
            seconds, released = [], []
            for _ in range(runs):
                t0 = time.perf_counter()
                result = session.sql(q.dpkit)
                seconds.append(time.perf_counter() - t0)
                released.append(_post(_rows(result.dataframe, names), q.ratio))
            out[q.name] = {
                "seconds": seconds,
                "floor": floor,
                "bounded": bounded,
                "released": released,
            }
        except Exception as err:  # a failure is a finding: reported in the table
            out[q.name] = {"error": f"{type(err).__name__}: {err}".splitlines()[0][:300]}
    return out, opened


# --- peers (subprocesses) ------------------------------------------------------------

SMARTNOISE = """
import json, re, sys, time
import pyarrow.parquet as pq
import snsql
spec = json.loads(sys.argv[1])
out, frames, readers = {}, {}, {}
for q in spec["queries"]:
    name, table, bounds = q["name"], q["table"], q["bounds"]
    try:
        t0 = time.perf_counter()
        path = spec["dir"] + "/" + table + ".parquet"
        # Only the columns the query names (and the unit): the whole of lineitem in
        # SQLite takes ~15 GB at SF 1.
        used = tuple(
            c for c in pq.read_schema(path).names
            if c == spec["units"][table] or re.search(r"\\b" + c + r"\\b", q["sql"])
        )
        if (table, used) not in frames:
            frames.clear()
            readers.clear()
            frames[(table, used)] = pq.read_table(path, columns=list(used)).to_pandas()
        df = frames[(table, used)]
        columns = {}
        for c, kind in zip(df.columns, df.dtypes):
            k = str(kind)
            if c == spec["units"][table]:
                columns[c] = {"type": "int", "private_id": True}
            elif k.startswith("int"):
                columns[c] = {"type": "int"}
            elif k.startswith("float"):
                low, high = spec["ranges"].get(c, (0.0, 1e6))
                columns[c] = {"type": "float", "lower": low, "upper": high}
            else:
                columns[c] = {"type": "string"}
        # max_ids: rows per customer in the table (reservoir-sampled down to it).
        meta = {"tpch": {"tpch": {table: {
            "max_ids": bounds, "row_privacy": False, "censor_dims": True,
            "sample_max_ids": True, **columns}}}}
        # SmartNoise spends Privacy(epsilon) on each mechanism (a count, each sum, the
        # threshold): its own cost report, on a probe of 100 rows (which also checks
        # the query), scales it down so the query's total is the benchmark's.
        privacy = snsql.Privacy(epsilon=spec["epsilon"], delta=spec["delta"])
        probe = snsql.from_df(df.head(100).copy(), privacy=privacy, metadata=meta)
        eps, delta = probe.get_privacy_cost(q["sql"])
        privacy = snsql.Privacy(
            epsilon=spec["epsilon"] ** 2 / eps, delta=spec["delta"] ** 2 / delta)
        if bounds not in readers:
            # The pandas reader copies the table into an in-memory SQLite database.
            readers[bounds] = snsql.from_df(df, privacy=privacy, metadata=meta)
        reader = readers[bounds]
        reader.privacy = privacy
        cost = [float(x) for x in reader.get_privacy_cost(q["sql"])]
        setup = time.perf_counter() - t0
        runs, seconds = [], []
        for _ in range(spec["runs"]):
            t0 = time.perf_counter()
            res = reader.execute_df(q["sql"])
            seconds.append(time.perf_counter() - t0)
            runs.append(json.loads(res.to_json(orient="records", date_format="iso")))
        out[name] = {"released": runs, "seconds": seconds, "setup": setup, "cost": cost}
    except Exception as err:
        out[name] = {"error": (type(err).__name__ + ": " + str(err)).splitlines()[0][:300]}
print("@@" + json.dumps(out))
"""

QRLEW = """
import json, sys, time
import duckdb, sqlalchemy as sa, pyqrlew as qrl
spec = json.loads(sys.argv[1])
con = duckdb.connect()
kinds = {"BIGINT": "INTEGER", "INTEGER": "INTEGER", "DOUBLE": "REAL", "VARCHAR": "TEXT",
         "DATE": "DATE"}
# Qrlew reads a schema through SQLAlchemy; an empty SQLite copy of the tables' schema
# gives it the columns and types, never the data. Qrlew's Dataset also carries each
# table's row count (its from_database counts the rows): set to the true counts.
engine = sa.create_engine("sqlite://")
t0 = time.perf_counter()
with engine.begin() as c:
    for t in spec["tables"]:
        con.execute(f"CREATE TABLE {t} AS SELECT * FROM '{spec['dir']}/{t}.parquet'")
        cols = con.execute(f"DESCRIBE {t}").fetchall()
        c.exec_driver_sql(f"CREATE TABLE {t} (" + ", ".join(
            f"{n} {kinds[k]}" for n, k, *_ in cols) + ")")
loaded = time.perf_counter() - t0
empty = qrl.Dataset.from_database("tpch", engine)
size = json.loads(empty.size)
for table in size["statistics"]["union"]["fields"]:
    rows = str(con.execute(f"SELECT count(*) FROM {table['name']}").fetchone()[0])
    struct = table["statistics"]["struct"]
    struct["size"] = rows
    for column in struct["fields"]:
        stats = column["statistics"]
        stats[stats["name"].lower()]["size"] = rows
described = str(empty).split("\\nSchema: ")[0].removeprefix("Dataset: ")
dataset = qrl.Dataset.from_str(described, empty.schema, json.dumps(size))
for table, column, low, high in spec["ranges"]:
    dataset = dataset.with_range(None, table, column, low, high)
# Tables left out of the privacy unit are public.
unit = [(t, [], c) for t, c in spec["units"].items()]
out = {}
for q in spec["queries"]:
    try:
        runs, seconds = [], []
        for _ in range(spec["runs"]):
            t0 = time.perf_counter()
            relation = dataset.relation(q["sql"])
            dp = relation.rewrite_with_differential_privacy(
                dataset, unit, {"epsilon": spec["epsilon"], "delta": spec["delta"]},
                max_multiplicity=float(q["bounds"]), max_privacy_unit_groups=q["groups"])
            sql = dp.relation().to_query()
            frame = con.execute(sql).df()
            seconds.append(time.perf_counter() - t0)
            runs.append(json.loads(frame.to_json(orient="records", date_format="iso")))
        out[q["name"]] = {"released": runs, "seconds": seconds, "setup": loaded}
    except BaseException as err:  # a Rust panic is a BaseException
        if isinstance(err, KeyboardInterrupt):
            raise
        out[q["name"]] = {"error": (type(err).__name__ + ": " + str(err)).splitlines()[0][:300]}
print("@@" + json.dumps(out))
"""

RANGES = {
    "l_quantity": (0.0, 50.0),
    "l_extendedprice": (0.0, 105000.0),
    "l_discount": (0.0, 0.1),
    "l_tax": (0.0, 0.08),
    "o_totalprice": (0.0, 600000.0),
    "c_acctbal": (-1000.0, 10000.0),
}


def run_peer(
    name: str, directory: Path, todo: list[TpchQuery], runs: int, timeout: float
) -> dict[str, Any]:
    python = VENVS / name / "bin" / "python"
    if not python.exists():
        return {q.name: {"error": f"no venv at {python} (see the docstring)"} for q in todo}
    if name == "smartnoise":
        spec = {
            "dir": str(directory),
            "epsilon": EPSILON,
            "delta": DELTA,
            "runs": runs,
            "units": PRIVATE,
            "ranges": RANGES,
            "queries": [
                {
                    "name": q.name,
                    "sql": q.smartnoise,
                    "table": q.smartnoise_table,
                    "bounds": q.bounds.total,
                }
                for q in todo
                if q.smartnoise
            ],
        }
        code = SMARTNOISE
    else:
        table_of = {"l": "lineitem", "o": "orders", "c": "customer"}
        spec = {
            "dir": str(directory),
            "epsilon": EPSILON,
            "delta": DELTA,
            "runs": runs,
            "units": PRIVATE,
            "tables": [*PRIVATE, *PUBLIC],
            "ranges": [(table_of[c[0]], c, lo, hi) for c, (lo, hi) in RANGES.items()],
            "queries": [
                {
                    "name": q.name,
                    "sql": q.qrlew,
                    "bounds": q.bounds.total,
                    "groups": q.bounds.groups,
                }
                for q in todo
                if q.qrlew
            ],
        }
        code = QRLEW
    try:
        done = subprocess.run(
            [str(python), "-c", textwrap.dedent(code), json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {q.name: {"error": f"timed out after {timeout:.0f} s"} for q in todo}
    marker = [line for line in done.stdout.splitlines() if line.startswith("@@")]
    if not marker:
        if len(spec["queries"]) > 1:
            # A Rust panic can abort Qrlew's whole process: one query a process, then.
            out: dict[str, Any] = {}
            for q in todo:
                if q.name in {x["name"] for x in spec["queries"]}:
                    out.update(run_peer(name, directory, [q], runs, timeout))
            return out
        lines = (done.stderr or done.stdout).strip().splitlines()
        first = next((x for x in lines if "panicked" in x or "Error" in x), "")
        tail = " | ".join([first, *lines[-1:]])
        return {q.name: {"error": f"peer process died: {tail[:300]}"} for q in todo}
    return json.loads(marker[-1][2:])


# --- report --------------------------------------------------------------------------


@dataclass
class Row:
    query: TpchQuery
    cells: dict[str, str] = field(default_factory=dict)


def summarize(
    q: TpchQuery, truth: list[dict[str, Any]], result: dict[str, Any] | None
) -> tuple[str, float | None]:
    if result is None:
        return "not expressible", None
    if "error" in result:
        return "cannot run", None
    errors: list[float] = []
    released, empty = [], []
    for rows in result["released"]:
        e, n, z = cell_errors(truth, _post([dict(r) for r in rows], q.ratio), q)
        errors += e
        released.append(n)
        empty.append(z)
    if not errors:
        return "no cells", None
    median = statistics.median(errors)
    groups = f"{statistics.median(released):g} groups"
    if any(empty):
        groups += f", {statistics.median(empty):g} with no rows"
    return f"{median:.3g} ({groups})", median


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def versions(python: Path, packages: list[str]) -> str:
    code = (
        "import importlib.metadata as m, sys\n"
        f"for p in {packages!r}:\n"
        "    try: print(p, m.version(p))\n"
        "    except m.PackageNotFoundError: pass\n"
        "print('python', sys.version.split()[0])\n"
    )
    if not python.exists():
        return "absent"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    return ", ".join(out.stdout.strip().splitlines())


TITLE = "# TPC-H in DP SQL"


def write_section(text: str, scale: float) -> None:
    """Replace this scale's section of the results file, keeping the other scales'."""
    import re

    sections: dict[float, str] = {}
    if RESULTS.exists():
        old = RESULTS.read_text(encoding="utf-8")
        for part in old.split(TITLE)[1:]:
            found = re.search(r"\(SF ([0-9.]+)\)", part.splitlines()[0])
            if found:
                sections[float(found.group(1))] = TITLE + part.rstrip() + "\n"
    sections[scale] = text.rstrip() + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    body = "\n".join(sections[k] for k in sorted(sections, reverse=True))
    RESULTS.write_text(body, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--data", type=Path, default=Path("/tmp/tpch"))
    parser.add_argument("--runs", type=int, default=5, help="DP runs per query and system")
    parser.add_argument("--quick", action="store_true", help="2 runs, shorter peer timeout")
    parser.add_argument("--only", nargs="*", help="query names (Q1 Q6 ...)")
    parser.add_argument("--peers", nargs="*", default=["smartnoise", "qrlew"])
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per peer")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    runs = 2 if args.quick else args.runs
    timeout = min(args.timeout, 600.0) if args.quick else args.timeout

    load_before = uptime()
    start = time.perf_counter()
    directory = prepare(args.data, args.scale)
    print(f"data: {directory} ({time.perf_counter() - start:.1f} s)", flush=True)
    todo = [q for q in queries() if not args.only or q.name in args.only]
    truth: dict[str, list[dict[str, Any]]] = {}
    dpkit, opened = run_dpkit(directory, todo, runs, truth)
    print(f"dpkit: Session opened in {opened:.1f} s", flush=True)
    for name, result in dpkit.items():
        print(f"  {name}: {result.get('error') or 'ok'}", flush=True)
    peers: dict[str, dict[str, Any]] = {}
    for peer in args.peers:
        t0 = time.perf_counter()
        peers[peer] = run_peer(peer, directory, todo, runs, timeout)
        print(f"{peer}: {time.perf_counter() - t0:.1f} s", flush=True)
        for name, result in peers[peer].items():
            print(f"  {name}: {result.get('error') or 'ok'}", flush=True)

    table = [
        "| query | dpkit s | DuckDB s | × DuckDB | bounded SQL s | bounded × DuckDB "
        "| dpkit × bounded | dpkit error | SmartNoise error | Qrlew error "
        "| SmartNoise s | Qrlew s |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|",
    ]
    answered = {"dpkit": 0, "smartnoise": 0, "qrlew": 0}
    failures: list[str] = []
    notes: list[str] = []
    for q in todo:
        res = dpkit.get(q.name) if q.dpkit else None
        if q.dpkit is None:
            cells = ["", "", "", "", "", "", "not expressible (below)"]
        elif "error" in res:
            cells = ["", "", "", "", "", "", "dpkit failed"]
            failures.append(f"- {q.name}, dpkit: `{res['error']}`")
        else:
            seconds = statistics.median(res["seconds"])
            floor = statistics.median(res["floor"])
            text, _ = summarize(q, truth.get(q.name, []), res)
            answered["dpkit"] += 1
            first = res["seconds"][0]
            cells = [f"{seconds:.3f} ({first:.3f})", f"{floor:.3f}", f"{seconds / floor:.1f}"]
            if res["bounded"]:
                bounded = statistics.median(res["bounded"])
                cells += [f"{bounded:.3f}", f"{bounded / floor:.1f}", f"{seconds / bounded:.1f}"]
            else:
                cells += ["", "", ""]
            cells.append(text)
        times = []
        for peer in ("smartnoise", "qrlew"):
            sql = q.smartnoise if peer == "smartnoise" else q.qrlew
            got = peers.get(peer, {}).get(q.name) or {}
            times.append(f"{statistics.median(got['seconds']):.3f}" if got.get("seconds") else "")
            got = peers.get(peer, {}).get(q.name)
            if peer not in peers:
                cells.append("not run")
            elif sql is None:
                # SmartNoise SQL 1.0.10: its validator raises "Support for JOIN queries
                # is currently disabled", and its pandas reader takes one table.
                joins = " JOIN " in q.truth
                reason = ("no JOIN" if joins else "one table") if peer == "smartnoise" else ""
                reason = reason or "not written"
                why = reason
                if peer == "smartnoise":
                    why = (
                        "its validator: 'Support for JOIN queries is currently disabled'"
                        if joins
                        else "a second table in a subquery; its pandas reader takes one table"
                    )
                cells.append(f"cannot run ({reason})")
                failures.append(f"- {q.name}, {peer}: not attempted ({why})")
            elif got is None or "error" in got:
                cells.append("cannot run")
                failures.append(f"- {q.name}, {peer}: `{(got or {}).get('error', 'no result')}`")
            else:
                text, _ = summarize(q, truth.get(q.name, []), got)
                answered[peer] += 1
                cells.append(text)
        table.append(f"| {q.name} {q.title} | " + " | ".join(cells + times) + " |")
        if q.note or q.gap:
            notes.append(f"- {q.name}: " + "; ".join(x for x in (q.note, q.gap) if x))
    load_after = uptime()
    header = [
        f"{TITLE}: dpkit vs DuckDB, SmartNoise SQL, Qrlew (SF {args.scale:g})",
        "",
        f"{datetime.now(tz=UTC):%Y-%m-%d %H:%M} UTC; {platform.platform()}; "
        f"{os.cpu_count()} CPUs. Produced by `python benchmarks/tpch_sql.py "
        + " ".join(sys.argv[1:])
        + f"`. Load before: `{load_before}`; after: `{load_after}`.",
        "",
        f"epsilon = {EPSILON:g} per query for every system ({runs} runs each); error: median "
        "relative error over (group, statistic) cells with a non-zero true value, pooled "
        "over runs (a group not released counts as 1). dpkit s: `session.sql` (the "
        f"Session opened once, in {opened:.1f} s); DuckDB s: the same query, non-private, "
        "over the same tables in memory (the Session opened with `from_duckdb` on them); "
        "in brackets, the first run of the statement (the later runs reuse the joined "
        "view's schema described in the first). "
        "bounded SQL s: the same query with each customer's contribution bounded by hand, "
        "in the cheapest SQL we know for dpkit's bounding semantics (`bounded_sql`: the "
        "pairs' counts and clamped sums scaled to the rows bound, the groups bound by one "
        "window over the pairs, joined private tables truncated to one row per customer "
        "and key; no noise, DOUBLE sums): the floor of any evaluation that bounds "
        "contributions as dpkit does (Q18's, a per-customer subquery, written by hand: "
        "lineitem truncated to 7 rows per customer and order, the orders of more than 300 "
        "units, at most 4 per customer); empty for Q13 (the DP form is already grouped by "
        "the customer). "
        "SmartNoise s: its pandas reader's execute (SQLite); "
        "Qrlew s: rewriting plus running its SQL in DuckDB. SmartNoise's Privacy(epsilon) "
        "is spent by each mechanism, so it is scaled down by its own cost report to a total "
        f"of epsilon = {EPSILON:g}, delta = {DELTA:g} per query; Qrlew splits "
        f"(epsilon, delta) = ({EPSILON:g}, {DELTA:g}) itself (half to its threshold, half to "
        "Gaussian noise).",
        "",
        *table,
        "",
        f"Queries run: dpkit {answered['dpkit']}, SmartNoise {answered['smartnoise']}, "
        f"Qrlew {answered['qrlew']} (of {len(todo)} queries; Q1a is not TPC-H's).",
        "",
        "How the DP forms differ from TPC-H, and what dpkit's grammar cannot say:",
        "",
        *notes,
        "",
        "Failures (each system's own message):",
        "",
        *(failures or ["- none"]),
        "",
        "Versions:",
        "",
        "- dpkit venv: " + versions(Path(sys.executable), ["dpkit", "duckdb", "sqlglot"]),
        "- smartnoise venv: "
        + versions(VENVS / "smartnoise/bin/python", ["smartnoise-sql", "pandas", "sqlalchemy"]),
        "- qrlew venv: "
        + versions(VENVS / "qrlew/bin/python", ["pyqrlew", "duckdb", "sqlalchemy"]),
        "",
    ]
    text = "\n".join(header)
    print()
    print(text)
    if not args.no_write:
        write_section(text, args.scale)
        print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
