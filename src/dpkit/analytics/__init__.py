"""Budgeted analytics over tables: Session, queries, public keys.

``Session`` owns a table (DuckDB), a privacy unit, a budget and a persistent ledger;
``Query`` builds an immutable query; ``KeySet`` holds public group keys;
``KeySelection`` configures private key selection.
"""

from dpkit.analytics._release import (
    Explanation,
    OrderExplanation,
    QueryResult,
    SmallGroupWarning,
    StatisticExplanation,
)
from dpkit.analytics.query import (
    Aggregation,
    KeySelection,
    KeySet,
    PrivateBounds,
    Query,
)
from dpkit.analytics.session import Session

__all__ = [
    "Aggregation",
    "Explanation",
    "KeySelection",
    "KeySet",
    "OrderExplanation",
    "PrivateBounds",
    "Query",
    "QueryResult",
    "Session",
    "SmallGroupWarning",
    "StatisticExplanation",
]
