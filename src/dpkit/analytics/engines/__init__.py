"""Engines: where a plan's exact integer aggregates are computed.

:class:`Engine` is the interface a Session needs; :class:`~.duckdb.DuckDBEngine` (the
default) and :class:`~.spark.SparkEngine` implement it on one SQL builder
(:class:`~._sql.SqlEngine`), so a third SQL engine is a dialect and a way to run a
statement. docs/architecture.md has the recipe.
"""

from dpkit.analytics.engines._base import NUMBER_TYPES, Engine, EngineResult, is_numeric, quote
from dpkit.analytics.engines.duckdb import DuckDBEngine

__all__ = ["NUMBER_TYPES", "DuckDBEngine", "Engine", "EngineResult", "is_numeric", "quote"]
