"""The net under rule 1 of the Session's threat model: fail closed after the charge.

Rule 1 says that nothing fails after a query has been charged: every refusal happens
before, on public information. The rules that make that true are structural (typed
crossings, canonical keys, materialised sources, total expressions). This module is
the net for whatever they miss -- an engine or driver bug, out of memory, a missed
deadline. :func:`run_after_charge` runs steps 4-5 of a query so that any exception, of
any class, is turned into the same outcome: the caller's ``fail_closed`` charges the
rest of the scope's budget and locks the ledger, and :class:`~dpkit.errors.SessionLocked`
is raised *outside* the ``except`` block, so not even ``__context__`` holds the cause
(whose text could quote a row).

The net is not a privacy proof: a failure that depends on one row is not differentially
private at any price. It bounds what such a bug can leak to one failure per ledger,
where charge-then-fail allowed one per query, and at a price the analyst cannot choose.

With a ``deadline`` the answer -- result or failure -- comes exactly ``deadline``
seconds after the call started (``started``, a monotonic time): the *predictable
transactions* of Haeberlen, Pierce & Narayan, "Differential Privacy Under Fire"
(USENIX Security 2011). A query still running at the deadline is interrupted (the
engine's ``interrupt``) and fails closed.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import time
from collections.abc import Callable
from typing import TypeVar

from dpkit.errors import InvalidParameter, SessionLocked

__all__ = ["MAX_DEADLINE", "check_deadline", "locked_error", "run_after_charge"]

T = TypeVar("T")

#: The longest per-query deadline accepted, in seconds (a day).
MAX_DEADLINE = 86_400.0


class _DeadlineMissed(Exception):
    """A query ran past its deadline (it fails closed like any other failure)."""


def check_deadline(deadline: object, owner: str) -> float | None:
    """``deadline`` as seconds, or None; InvalidParameter (nothing spent) otherwise."""
    if deadline is None:
        return None
    if (
        isinstance(deadline, int | float)
        and not isinstance(deadline, bool)
        and 0.0 < deadline <= MAX_DEADLINE
    ):
        return float(deadline)
    raise InvalidParameter.for_parameter(
        "deadline", owner, f"None or seconds in (0, {MAX_DEADLINE:g}]", deadline
    )


def locked_error(failed_at: float, scope: str) -> SessionLocked:
    """The error of a locked ledger: the time and scope of its failure, nothing else."""
    when = datetime.datetime.fromtimestamp(failed_at, datetime.UTC).isoformat(timespec="seconds")
    return SessionLocked(
        f"This Session is locked: a query of scope {scope!r} failed after its charge, at "
        f"{when} (UTC). Its scope's remaining budget was charged, and every query on this "
        "ledger is refused from then on (the cause is not shown: it could depend on row "
        "values). Nothing more can be released from this ledger.",
        failed_at=failed_at,
        scope=scope,
    )


def run_after_charge(
    work: Callable[[], T],
    *,
    deadline: float | None,
    started: float,
    interrupt: Callable[[], None] | None,
    fail_closed: Callable[[], SessionLocked],
) -> T:
    """``work()``, or -- if it raises anything, or misses ``deadline`` -- the error
    that ``fail_closed()`` returns once it has charged the scope and locked the ledger.
    ``KeyboardInterrupt`` and ``SystemExit`` lock too, and are then re-raised."""
    stop = None
    try:
        result = work() if deadline is None else _within(work, started + deadline, interrupt)
    except BaseException as err:  # every class fails closed
        if not isinstance(err, Exception):
            stop = err
    else:
        return result
    # Out of the except block: the SessionLocked raised below has no __context__.
    locked = fail_closed()
    if stop is not None:
        raise stop
    raise locked


def _within(work: Callable[[], T], until: float, interrupt: Callable[[], None] | None) -> T:
    """``work()`` in a worker thread, answered (returned or raised) at ``until``."""
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = executor.submit(work)
    try:
        done, _ = concurrent.futures.wait([future], timeout=max(until - time.monotonic(), 0.0))
        if not done:
            if interrupt is not None:
                interrupt()
            _sleep_until(until)
            raise _DeadlineMissed
    finally:
        executor.shutdown(wait=False)
    _sleep_until(until)
    return future.result()


def _sleep_until(moment: float) -> None:
    while (left := moment - time.monotonic()) > 0:
        time.sleep(left)
