"""Attacks on the shared statements of a batch (``dpkit describe``'s stages; issue 34):
one row that every query's filter drops must not make the batch fail after its charge.

A query's own statement filters first, so an expression that raises on some value --
on Spark, ``date_trunc`` of a DATE past the year ~294,000 overflows ("long overflow";
so did ``epoch`` until a fix found by the same review) -- is never evaluated on a row
the filter drops. A shared statement computes every query's
values side by side, so the attacker plants such a row where each query's filter
excludes it and watches whether the Session locks (a one-row oracle, and the whole
budget gone). Found by an adversarial review of the shared counts per bin
(``engines._batch.row_bins_sql``); the same attacks broke the older shared sums, with
and without a privacy unit.
"""

from __future__ import annotations

from typing import Any

import pytest

import dpkit as dp
from dpkit.analytics import Query
from dpkit.analytics._shared_scan import evaluate_many

pytestmark = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomWarning")

#: A DATE Spark's date_trunc overflows on, in a row whose "ok" is false.
PLANTED = "make_date(300000, 1, 1)"
#: Seconds since 1970 of the week the date is in: raises on PLANTED on Spark.
WEEK = "epoch(date_trunc('week', \"d\"))"
ORDINARY = "DATE '2022-03-01'"

ATTACKS = {
    # A derived binned column over the date: the shared statement computed every
    # query's bin index on every row.
    "derived binned column": [
        Query()
        .filter('"ok"')
        .with_column("e", WEEK)
        .group_by_bins("e", [0.0, 1.6e9, 1.7e9, 2e9])
        .count(),
        Query().group_by_bins("x", [0.0, 2.0, 4.0]).count(),
    ],
    # Two filters sharing WEEK after "ok" AND: subexpression elimination hoisted
    # it out of the AND's right-hand side.
    "filters sharing an expression": [
        Query().filter(f'"ok" AND {WEEK} > 0').group_by_bins("x", [0.0, 1.5, 4.0]).count(),
        Query().filter(f'"ok" AND {WEEK} > 1').group_by_bins("x", [0.0, 2.0, 4.0]).count(),
    ],
    "sums with filters sharing an expression": [
        Query().filter(f'"ok" AND {WEEK} > 0').count(),
        Query().filter(f'"ok" AND {WEEK} > 1').count(),
    ],
    # A derived column in a sum (the shared row-level sums): computed on every row.
    "sum of a derived column": [
        Query().filter('"ok"').with_column("e", WEEK).sum("e", bounds=(0.0, 2e9)),
        Query().count(),
    ],
    "derived column twice in a filter": [
        Query().with_column("e", WEEK).filter('"ok" AND "e" > 0 AND "e" < 3e9').count(),
        Query().count(),
    ],
    # The same with a privacy unit (the shared per-person sums).
    "per-person sums of a derived column": [
        Query().bound(max_rows=1).filter('"ok"').with_column("e", WEEK).sum("e", bounds=(0.0, 2e9)),
        Query().bound(max_rows=1).count(),
    ],
}
WITH_UNIT = {"per-person sums of a derived column"}


def table(spark: Any, third_date: str) -> Any:
    return spark.sql(
        "SELECT * FROM VALUES (1, 1.0D, DATE '2020-01-01', true), "
        f"(2, 2.0D, DATE '2021-06-01', true), (3, 3.0D, {third_date}, false) AS t(p, x, d, ok)"
    )


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_row_every_filter_drops_does_not_lock_a_batch(spark: Any, attack: str) -> None:
    released = []
    for third_date in (PLANTED, ORDINARY):  # neighbours: the planted row, or not
        unit = "p" if attack in WITH_UNIT else None
        session = dp.Session.from_spark(
            table(spark, third_date), privacy_unit=unit, budget=dp.ZCDP(1.0), rng=3
        )
        requests = [(query, dp.ZCDP(0.1)) for query in ATTACKS[attack]]
        results = evaluate_many(session, requests)  # SessionLocked before the fix
        released.append([r.to_pandas().to_dict("list") for r in results])
        assert session.spent == dp.ZCDP(0.2)
    assert len(released[0]) == len(released[1]) == 2
