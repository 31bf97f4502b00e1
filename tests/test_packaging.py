"""The installed package is what pyproject.toml promises: importable, versioned,
typed, with its data files and its ``dpkit`` command. Nothing is built here."""

from __future__ import annotations

import fnmatch
import importlib
import importlib.metadata
import importlib.resources
import importlib.util
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_import_and_version() -> None:
    import dpkit

    assert isinstance(dpkit.__version__, str)
    assert dpkit.__version__ == importlib.metadata.version("dpkit")
    assert dpkit.__version__ == PYPROJECT["project"]["version"]


def test_py_typed_ships() -> None:
    assert importlib.resources.files("dpkit").joinpath("py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["dpkit"]


def test_every_data_file_is_declared_as_package_data() -> None:
    """A non-Python file under src/dpkit that no package-data glob matches would be
    missing from the wheel (an editable install hides that)."""
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["dpkit"]
    source = ROOT / "src" / "dpkit"
    data_files = [
        path.relative_to(source).as_posix()
        for path in source.rglob("*")
        if path.is_file()
        and path.suffix not in (".py", ".pyc", ".pyi")
        and "__pycache__" not in path.parts
    ]
    undeclared = [f for f in data_files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert "data/adult.csv.gz" in data_files
    assert undeclared == [], f"add these to [tool.setuptools.package-data]: {undeclared}"


def test_bundled_data_is_installed() -> None:
    data = importlib.resources.files("dpkit.data")
    assert data.joinpath("adult.csv.gz").is_file()
    assert data.joinpath("ADULT-LICENSE.txt").is_file()


def test_console_script_is_declared() -> None:
    assert PYPROJECT["project"]["scripts"]["dpkit"] == "dpkit.cli.main:app"
    scripts = importlib.metadata.entry_points(group="console_scripts")
    (entry,) = [ep for ep in scripts if ep.name == "dpkit"]
    assert entry.value == "dpkit.cli.main:app"
    assert entry.dist is not None and entry.dist.name == "dpkit"


def test_console_script_resolves() -> None:
    scripts = importlib.metadata.entry_points(group="console_scripts")
    (entry,) = [ep for ep in scripts if ep.name == "dpkit"]
    assert callable(entry.load())


@pytest.mark.parametrize("extra", ["test", "bench", "peers"])
def test_optional_dependency_groups_exist(extra: str) -> None:
    assert extra in PYPROJECT["project"]["optional-dependencies"]


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    install = "pip install --no-compile -e '.[test]'"
    assert f"python -m venv .venv && . .venv/bin/activate && {install} && pytest" in readme
    assert install in ci
    demo = "pip install --no-compile '.[plot]' && dpkit demo"
    assert f"python -m venv .venv && . .venv/bin/activate && {demo}" in readme
    assert "pip install --no-compile '.[plot]'" in ci
