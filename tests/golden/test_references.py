"""The stored golden references (tests/golden/references/): well formed, and still exact.

Slow exact references decorated with ``golden_reference`` (tests/_references.py) are
read from JSON files in the default run. Here, in the default run (cheap): every file
is in canonical form and belongs to an existing test module, every key and value
decodes, and every function named exists at module level, decorated. With
``--runslow``: every stored value is recomputed by the undecorated function
(``__wrapped__``) and must equal the stored one exactly, bit for bit; one test per
entry.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests._references import (
    MARKER,
    STORE_DIR,
    TESTS_DIR,
    ReferenceInfo,
    decode_key,
    decode_value,
    dumps,
    encode_value,
    load,
    module_of,
)

FILES = sorted(STORE_DIR.rglob("*.json"))


def _entries() -> list[Any]:
    params = []
    for path in FILES:
        module = module_of(path)
        table = json.loads(path.read_text(encoding="utf-8"))
        for qualname, entries in sorted(table.items()):
            for key in sorted(entries):
                # A readable id: the decoded arguments (repr is exact for floats too).
                args = repr(decode_key(key)).replace(" ", "")
                readable = f"{Path(module).stem}.{qualname}{args}"
                params.append(pytest.param(module, qualname, key, id=readable))
    return params


@functools.cache
def _table(module: str) -> dict[str, dict[str, Any]]:
    return load(module)


@functools.cache
def _import(module: str) -> ModuleType:
    """The test module ``module`` (relative to tests/), imported once by its path.

    Under a private name, so that it never replaces the module pytest imported.
    """
    name = "_golden_reference_check." + module.removesuffix(".py").replace("/", ".")
    spec = importlib.util.spec_from_file_location(name, TESTS_DIR / module)
    assert spec is not None and spec.loader is not None, module
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded  # dataclasses and typing look modules up by name
    spec.loader.exec_module(loaded)
    return loaded


def _reference(module: str, qualname: str) -> Callable[..., object]:
    """The decorated reference ``qualname`` of ``module``, checked to be one."""
    found: Any = _import(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
        assert found is not None, f"{module} has no {qualname}: refresh its references"
    info = getattr(found, MARKER, None)
    assert info == ReferenceInfo(module, qualname), f"{module}::{qualname} is not decorated"
    assert callable(found)
    return found


@pytest.mark.parametrize("path", FILES, ids=[module_of(p) for p in FILES])
def test_reference_file_is_well_formed(path: Path) -> None:
    """Canonical text (a refresh would not change it), decodable entries, and each
    function still a decorated module-level reference taking the stored arguments."""
    module = module_of(path)
    assert (TESTS_DIR / module).is_file(), f"{path} stores values for a missing {module}"
    text = path.read_text(encoding="utf-8")
    table = json.loads(text)
    assert dumps(table) == text, f"{path} is not in canonical form"
    assert table and all(table.values()), f"{path} has an empty table"
    for qualname, entries in table.items():
        signature = inspect.signature(_reference(module, qualname).__wrapped__)  # type: ignore[attr-defined]
        for key, data in entries.items():
            signature.bind(*decode_key(key))
            assert encode_value(decode_value(data)) == data, (qualname, key)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # One test per stored entry under --runslow; in the default run, where the slow
    # test is skipped anyway, one placeholder instead of hundreds of skipped tests.
    if metafunc.definition.name != "test_stored_reference_is_recomputed_exactly":
        return
    if metafunc.config.getoption("--runslow"):
        entries = _entries()
    else:
        entries = [pytest.param("", "", "", id="every-stored-entry")]
    metafunc.parametrize(("module", "qualname", "key"), entries)


@pytest.mark.slow
def test_stored_reference_is_recomputed_exactly(module: str, qualname: str, key: str) -> None:
    """The undecorated reference, run now, gives the stored value bit for bit."""
    data = _table(module)[qualname][key]
    stored = decode_value(data)
    computed = _reference(module, qualname).__wrapped__(*decode_key(key))  # type: ignore[attr-defined]
    assert type(computed) is type(stored)
    assert computed == stored, (computed, stored)
    assert encode_value(computed) == data  # bit for bit, down to the sign of a zero
