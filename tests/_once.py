"""A value computed once per test run, also when pytest-xdist splits a module.

``--dist worksteal`` (pyproject.toml) hands a worker that runs out of tests half of the
other worker's queue, so one module's tests may run on both workers, and a
module-scoped fixture then runs on each: an expensive one (a describe of several real
tables, 14-18 s) was paid twice in a full run's junit. :func:`once_per_run` makes the
first worker compute it and the other read the same value.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import TypeVar

import pytest

try:
    import fcntl
except ImportError:  # not POSIX: each worker computes for itself
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")


def once_per_run(name: str, compute: Callable[[], T], factory: pytest.TempPathFactory) -> T:
    """``compute()``, run by one pytest-xdist worker of this test run and read by the others.

    The first worker computes under an exclusive lock on a file in the run's shared
    temporary directory and pickles the result there; a worker that comes later waits
    for the lock and reads it. Same computation, same inputs: the tests see the same
    values. ``name`` must say everything the value depends on (seeds, options). Without
    xdist (``-n 0``) or without ``fcntl``, it just computes.
    """
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # set by xdist in its workers
    if run is None or fcntl is None:
        return compute()
    # Workers' base temporary directories (.../pytest-N/popen-gwK) share this run's root;
    # the run's id in the name keeps a file of another run (a reused --basetemp) unread.
    path = factory.getbasetemp().parent / f"{name}-{run}.pickle"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if path.exists():
            value: T = pickle.loads(path.read_bytes())
            return value
        value = compute()
        path.write_bytes(pickle.dumps(value))
        return value
