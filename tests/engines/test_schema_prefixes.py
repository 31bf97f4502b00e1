"""An engine's schema of derived columns: one description answers every prefix.

The compiler asks for the schema of a query's derived columns with its filters, then
without them (``dpkit.analytics._compile``); the engine remembers each prefix of a
described chain (``SqlEngine._remember_schema``). A remembered prefix must be what the
engine itself says of that prefix, types and order -- also where a derived column reads
an earlier one, where a name differs from a column's only in case, and for a chain whose
names the engine reports otherwise (nothing is derived from it then).
"""

from __future__ import annotations

import duckdb
import pandas as pd

import dpkit as dp

CHAIN = (
    ("half", '"x" / 2'),
    ("label", "CASE WHEN \"half\" > 1 THEN 'big' ELSE 'small' END"),
    ("when", "DATE '2020-01-01' + CAST(\"k\" AS INTEGER)"),
    ("flag", '"label" = \'big\' AND "k" > 0'),
)


def _engine() -> object:
    frame = pd.DataFrame({"x": [1.5, 2.5, None], "k": [1, 2, 3], "name": ["a", "b", "c"]})
    return dp.Session.from_pandas(frame, budget=dp.PureDP(1.0))._engine


def test_every_prefix_is_what_the_engine_describes() -> None:
    engine = _engine()
    whole = engine.schema(CHAIN)  # type: ignore[attr-defined]
    assert list(whole)[-len(CHAIN) :] == [name for name, _ in CHAIN]
    for k in range(len(CHAIN)):
        remembered = engine.schema(CHAIN[:k])  # type: ignore[attr-defined]
        fresh = _engine().schema(CHAIN[:k])  # type: ignore[attr-defined]
        assert list(remembered.items()) == list(fresh.items()), k


def test_a_chain_described_with_other_names_remembers_no_prefix() -> None:
    connection = duckdb.connect()
    connection.execute("CREATE TABLE t AS SELECT 1 AS a")
    engine = dp.analytics.engines.DuckDBEngine(connection, "t")
    # Report the derived column under another name, as an engine might: the prefix
    # cannot be told from the description, so it is asked for again.
    engine._remember_schema((("b", '"a" + 1'),), [("a", "INTEGER"), ("B2", "INTEGER")])
    assert () not in engine._schema_cache
    assert engine.schema(()) == {"a": "INTEGER"}
