"""Suite-wide pytest configuration.

``--runslow``
    Tests marked ``@pytest.mark.slow`` (long statistical runs, large audits, Spark)
    are skipped unless this option is given. CI runs the default set, in which each
    slow check has a faithful smaller version; ``pytest --runslow`` runs everything.

Warnings are errors (``filterwarnings = ["error"]`` in pyproject.toml), except
:class:`dpkit.errors.InsecureRandomWarning`, which is ignored there because tests
pass seeded generators on purpose.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="also run tests marked slow (long statistical runs, large audits)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)
