"""A batch's own statements, run several at a time on Spark (``engines._batch._each``):
results in the batch's order, and the failure sequential running would have raised."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from dpkit.analytics.engines._batch import _each
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine
from dpkit.errors import EngineError


def engine(concurrent: int) -> Any:
    return SimpleNamespace(concurrent_statements=concurrent)


def test_results_come_back_in_the_batch_order_whatever_ends_first() -> None:
    # The first items take longest, so they end last when four run at once.
    seen: set[str] = set()

    def work(k: int) -> int:
        seen.add(threading.current_thread().name)
        time.sleep(0.05 * (8 - k) / 8)
        return k * k

    assert _each(engine(4), list(range(8)), work) == [k * k for k in range(8)]
    assert len(seen) > 1  # they did run on several threads
    assert _each(engine(1), list(range(8)), work) == [k * k for k in range(8)]


@pytest.mark.parametrize("concurrent", [1, 4])
def test_the_first_failure_in_order_is_raised(concurrent: int) -> None:
    ran: list[int] = []
    lock = threading.Lock()

    def work(k: int) -> int:
        time.sleep(0.02 if k == 1 else 0.0)  # item 3 fails before item 1 does
        with lock:
            ran.append(k)
        if k in (1, 3):
            raise EngineError(f"statement {k}")
        return k

    with pytest.raises(EngineError, match="statement 1"):
        _each(engine(concurrent), list(range(6)), work)
    # Sequentially the batch stops at its first failure; at once, every started
    # statement ends before the failure is raised (nothing runs on behind it).
    assert sorted(ran) == ([0, 1] if concurrent == 1 else list(range(6)))


def test_duckdb_runs_one_statement_at_a_time_and_spark_four() -> None:
    assert DuckDBEngine.concurrent_statements == 1
    assert SparkEngine.concurrent_statements == 4
