"""``import dpkit`` and the ``dpkit`` command stay light: no SciPy statistics or
optimisation, no plotting, no query engine is imported until a function needs it.

These tests look at *which* modules a fresh interpreter imports
(``python -X importtime``), never at how long it took: timings depend on the machine
and its load, the module list does not.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

# Each of these costs from ~0.1 s (sqlglot) to ~1.5 s (scipy.stats) to import.
HEAVY = ("scipy.stats", "scipy.optimize", "matplotlib", "duckdb", "pandas", "sqlglot")


def imported_modules(code: str) -> set[str]:
    """Names of the modules a fresh interpreter imports while running ``code``."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    modules = set()
    for line in result.stderr.splitlines():
        # "import time:  self [us] | cumulative | name", nested names indented.
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                modules.add(name)
    assert modules, "no -X importtime output: cannot check the imports"
    return modules


def heavy_among(modules: set[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The entries of ``heavy`` imported, themselves or through a submodule."""
    return [h for h in heavy if any(m == h or m.startswith(h + ".") for m in modules)]


def test_import_dpkit_imports_no_heavy_module() -> None:
    modules = imported_modules("import dpkit")
    assert "dpkit" in modules
    assert heavy_among(modules) == []


def test_import_dpkit_loads_no_subpackage_until_used() -> None:
    # Issue 34: every module was loaded up front (~0.2 s more than numpy and duckdb).
    code = (
        "import sys, dpkit\n"
        "print(sorted(m for m in sys.modules if m.startswith('dpkit.')))\n"
        "dpkit.PureDP(1.0)\n"
        "print('dpkit.accounting' in sys.modules, 'dpkit.learn' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    first, second = result.stdout.splitlines()
    assert first == "['dpkit._version', 'dpkit.errors']"
    assert second == "True False"


def test_public_api_is_usable_after_a_light_import() -> None:
    code = (
        "import dpkit as dp\n"
        "r = dp.laplace(1.0, epsilon=1.0, sensitivity=1.0, rng=dp.random.as_random(0))\n"
        "assert r.value == r.value\n"
    )
    modules = imported_modules("import warnings; warnings.simplefilter('ignore')\n" + code)
    assert heavy_among(modules) == []


def test_cli_help_imports_neither_scipy_nor_the_session() -> None:
    modules = imported_modules("from dpkit.cli.main import app")
    assert heavy_among(modules, (*HEAVY, "scipy", "dpkit.analytics", "dpkit.data")) == []


def test_the_check_sees_a_heavy_import() -> None:
    """Power check: the same check flags a heavy module once something imports it."""
    modules = imported_modules("import dpkit, scipy.stats, dpkit.analytics")
    found = heavy_among(modules, (*HEAVY, "dpkit.analytics"))
    assert "scipy.stats" in found
    assert "dpkit.analytics" in found


@pytest.mark.parametrize("name", ["Session", "KeySet", "Query", "analytics"])
def test_lazy_names_resolve(name: str) -> None:
    import dpkit
    import dpkit.analytics

    expected = dpkit.analytics if name == "analytics" else getattr(dpkit.analytics, name)
    assert getattr(dpkit, name) is expected
    assert name in dir(dpkit)


def test_every_public_name_is_importable() -> None:
    import dpkit

    missing = [name for name in dpkit.__all__ if not hasattr(dpkit, name)]
    assert missing == []
    namespace: dict[str, object] = {}
    exec("from dpkit import *", namespace)
    assert set(dpkit.__all__) <= set(namespace)


def test_unknown_attribute_still_raises() -> None:
    import dpkit

    misspelt = "lapalce"  # a typo: the lazy loader must not swallow it
    with pytest.raises(AttributeError, match="no attribute 'lapalce'"):
        getattr(dpkit, misspelt)
