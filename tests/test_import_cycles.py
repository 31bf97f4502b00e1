"""No import cycles in dpkit: its modules form a layered graph, read from the source.

The graph is built with :mod:`ast`, without importing anything: module ``A`` has an
edge to dpkit module ``B`` for every ``import B`` / ``from B import x`` anywhere in
``A`` -- at module level, inside a function, under ``if TYPE_CHECKING:`` -- and for
``importlib.import_module("B")`` with a literal name. A function-level import hides a
cycle from the interpreter, not from the reader, so it counts. Relative imports are
resolved; ``from package import name`` is an edge to ``package.name`` when that is a
module and to ``package`` otherwise. That importing ``package.sub`` first runs
``package/__init__.py`` is not an edge: a package's ``__init__`` re-exports its
submodules by design.

The cycles are the strongly connected components of the graph with more than one
module, or one module that imports itself (Tarjan 1972). The failure message lists
every cycle with each of its imports as ``file:line``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

#: module name -> {imported module name -> line of the first such import}
Graph = dict[str, dict[str, int]]


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (a folder under ``root``), by dotted name."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _literal_import_module(node: ast.Call) -> str | None:
    """The name in ``importlib.import_module("name")`` / ``import_module("name")``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name != "import_module" or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def _imported_names(
    node: ast.AST, module: str, is_package: bool, known: Mapping[str, Path]
) -> Iterator[str]:
    """The dotted names one node imports (before keeping only the package's own)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            # ``from .x import y`` is relative to the package holding the module.
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, *([node.module] if node.module else [])])
        else:
            base = node.module or ""
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            yield submodule if submodule in known else base
    elif isinstance(node, ast.Call):
        name = _literal_import_module(node)
        if name is not None:
            yield name


def _resolve(name: str, known: Mapping[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies inside, or None."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, package: str) -> tuple[Graph, dict[str, Path]]:
    """Edges between the modules of ``package``, and the file of each module."""
    known = module_files(root, package)
    graph: Graph = {}
    for module, path in known.items():
        edges = graph.setdefault(module, {})
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            for name in _imported_names(node, module, is_package, known):
                if name != package and not name.startswith(package + "."):
                    continue
                target = _resolve(name, known)
                if target is not None:
                    line = getattr(node, "lineno", 0)
                    edges[target] = min(edges.get(target, line), line)
    return graph, known


def strongly_connected_components(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the strongly connected components, each sorted."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                lowlink[node] = min(lowlink[node], lowlink[successor])
            elif successor in on_stack:
                lowlink[node] = min(lowlink[node], index[successor])
        if lowlink[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def import_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The components that are cycles: two or more modules, or one importing itself."""
    return sorted(
        component
        for component in strongly_connected_components(graph)
        if len(component) > 1 or component[0] in graph.get(component[0], ())
    )


def describe_cycles(cycles: list[list[str]], graph: Graph, files: Mapping[str, Path]) -> str:
    """Each cycle with every import inside it, as ``file:line  A -> B``."""
    lines = [f"{len(cycles)} import cycle(s):"]
    for number, cycle in enumerate(cycles, 1):
        lines.append(f"  cycle {number}: {', '.join(cycle)}")
        members = set(cycle)
        for module in cycle:
            where = files[module]
            where = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
            for target, line in sorted(graph[module].items()):
                if target in members:
                    lines.append(f"    {where}:{line}  {module} -> {target}")
    return "\n".join(lines)


def assert_no_import_cycles(root: Path, package: str) -> None:
    graph, files = import_graph(root, package)
    cycles = import_cycles(graph)
    assert not cycles, describe_cycles(cycles, graph, files)


# --------------------------------------------------------------------------- dpkit


def test_dpkit_has_no_import_cycles() -> None:
    assert_no_import_cycles(SRC, "dpkit")


def test_dpkit_graph_is_read() -> None:
    # A reader that silently found no imports would pass the test above.
    graph, files = import_graph(SRC, "dpkit")
    assert len(files) > 50
    assert "dpkit.accounting.filters.pure" in graph["dpkit.accounting.filters"]
    assert "dpkit._validation" in graph["dpkit.accounting.filters.zcdp"]  # from dpkit import _x
    assert "dpkit.report.model" in graph["dpkit.report.serialize"]
    assert "dpkit.analytics" in graph["dpkit"]  # TYPE_CHECKING and import_module("...")


# ------------------------------------------------------------- the finder itself


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, []),  # a diamond is not a cycle
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"a"}, "b": {"a"}}, [["a"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "a"}}, [["a", "b"], ["c", "d"]]),
        ({"a": {"b"}, "b": {"c", "a"}, "c": {"b", "d"}, "d": set()}, [["a", "b", "c"]]),
    ],
    ids=["chain", "diamond", "triangle", "self-import", "two-cycles", "nested-loops"],
)
def test_cycle_finder(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert import_cycles(graph) == expected


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_planted_cycle_is_found(tmp_path: Path) -> None:
    # a -> b (``from . import b``), b -> sub.c (a relative import inside a function),
    # sub.c -> a (``from .. import a``): one cycle, found only if each of these
    # resolutions is right. d imports all of them in the other ways an import is
    # written, and is in no cycle.
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import f\n",
            "pkg/a.py": "import os\nfrom . import b\n\ndef f():\n    return b\n",
            "pkg/b.py": "def g():\n    from .sub.c import h\n    return h\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "from .. import a\n\ndef h():\n    return a\n",
            "pkg/d.py": (
                "import importlib\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from pkg import sub\n"
                "importlib.import_module('pkg.a')\n"
                "import pkg.sub.c as c\n"
                "from pkg.b import g\n"
            ),
        },
    )
    graph, _ = import_graph(tmp_path, "pkg")
    assert graph == {
        "pkg": {"pkg.a": 1},
        "pkg.a": {"pkg.b": 2},
        "pkg.b": {"pkg.sub.c": 2},
        "pkg.sub": {},
        "pkg.sub.c": {"pkg.a": 1},
        "pkg.d": {"pkg.sub": 4, "pkg.a": 5, "pkg.sub.c": 6, "pkg.b": 7},
    }
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]

    # The check run on dpkit fails here, naming every import in the cycle.
    with pytest.raises(AssertionError) as info:
        assert_no_import_cycles(tmp_path, "pkg")
    message = str(info.value)
    assert "1 import cycle(s):" in message
    assert "cycle 1: pkg.a, pkg.b, pkg.sub.c" in message
    for file, line, edge in [
        ("a.py", 2, "pkg.a -> pkg.b"),
        ("b.py", 2, "pkg.b -> pkg.sub.c"),
        ("sub/c.py", 1, "pkg.sub.c -> pkg.a"),
    ]:
        assert f"{tmp_path / 'pkg' / file}:{line}  {edge}" in message
    assert "pkg.d" not in message
