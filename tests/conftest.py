"""Suite-wide pytest configuration.

``spark`` fixture
    One local Spark (``local[2]``, client JIT compiler only: see the fixture) for the
    whole run, for the Spark engine's tests. It
    needs a Java runtime: without one the tests that use it are skipped with the
    reason locally, and fail under CI (``CI`` set), where .ci/run installs Java 17.

``--runslow``
    Tests marked ``@pytest.mark.slow`` (long statistical runs, large audits, Spark)
    are skipped unless this option is given. CI runs the default set, in which each
    slow check has a faithful smaller version; ``pytest --runslow`` runs everything.
    This includes tests/golden/test_references.py, which recomputes every stored golden
    reference (below) and requires the stored value bit for bit.

``--refresh-references``
    Slow exact references (mpmath and nested scipy quadrature) decorated with
    ``tests._references.golden_reference`` are read from ``tests/golden/references/``.
    This option computes them live instead and rewrites the files of the modules run
    (``pytest --refresh-references --runslow -n 0 FILES``; one process only, so two
    workers never write the same file). See tests/_references.py.

One BLAS/OpenMP thread per test process
    The default run has two worker processes on a 2-core machine; NumPy's and SciPy's
    BLAS would otherwise start one thread per core in each, and the oversubscribed
    threads made a BLAS-heavy fit 1.5-8x slower (tests/learn/test_vs_diffprivlib.py).
    Set below, before the libraries start their pools (``OMP_NUM_THREADS`` and friends,
    for this process and the ones it starts) and for those already loaded
    (threadpoolctl). A value the caller set is kept.

Warnings are errors (``filterwarnings = ["error"]`` in pyproject.toml), except
:class:`dpkit.errors.InsecureRandomWarning`, which is ignored there because tests
pass seeded generators on purpose.
"""

from __future__ import annotations

import os
import shutil
import sys

# Spark's Python workers run this interpreter, whoever starts the first SparkSession of
# the run: a documentation example (tests/test_docs.py) builds its own before the
# ``spark`` fixture, and the workers then ran ``python3`` from PATH -- without this
# environment's packages when the tests run from a virtual environment that is not
# activated (a UDF test failed after the docs test in one process).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from collections.abc import Iterator
from typing import Any

import pytest

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="also run tests marked slow (long statistical runs, large audits)",
    )
    parser.addoption(
        "--refresh-references",
        action="store_true",
        default=False,
        help="compute golden references live and rewrite tests/golden/references/ (-n 0)",
    )


def pytest_configure(config: pytest.Config) -> None:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn's dependency; absent, the variables above do it
        pass
    else:
        threadpool_limits(limits=int(os.environ["OMP_NUM_THREADS"]))
    if config.getoption("--refresh-references"):
        from tests._references import RefreshPlugin

        config.pluginmanager.register(RefreshPlugin(), "golden-references-refresh")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        message = "Spark needs a Java 17 runtime (apt install openjdk-17-jre-headless)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must install it (.ci/run) so the Spark tests run.")
        pytest.skip(message)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("dpkit-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        # The tests' tables are small and the JVM short-lived: its time goes to
        # warming up, not to long loops. The client compiler only (C1) and one GC
        # thread halved a Session workload's time (61 and 54 s against 32 and 29 s,
        # nine queries on a 300-row table from a cold JVM, 2 cores); the JIT level
        # changes no result (Java's arithmetic is the same at every level).
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
