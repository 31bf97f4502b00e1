"""Sphinx configuration of dpkit's API reference (docs/api), built from the docstrings.

Build (warnings are errors, every cross-reference must resolve)::

    pip install -e '.[docs]'
    sphinx-build -W --keep-going -n -b html docs/api docs/api/_build/html

The build is offline: no intersphinx. References to other libraries' objects (NumPy,
pandas, the standard library's ``collections.abc``...) cannot resolve without it and are
ignored by ``nitpick_ignore_regex`` below; a reference to a dpkit object that is not in
the reference fails the build (tests/test_api_docs.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from docutils import nodes  # noqa: E402
from docutils.statemachine import StringList  # noqa: E402
from sphinx.ext.napoleon.docstring import NumpyDocstring  # noqa: E402
from sphinx.util.docutils import SphinxDirective  # noqa: E402
from sphinx.util.nodes import nested_parse_with_titles  # noqa: E402

import dpkit  # noqa: E402

project = "dpkit"
author = "dpkit contributors"
copyright = "dpkit contributors"
version = release = dpkit.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.autosummary",
]

root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_title = f"dpkit {release} API reference"
# No _static folder: nothing to copy, and no warning for a missing one.
html_static_path: list[str] = []

# --- autodoc ----------------------------------------------------------------------
autodoc_default_options = {
    "members": True,
    "undoc-members": True,
    # Members inherited from dpkit's private bases are part of the public classes; those
    # of Python's own classes are not shown (scikit-learn's: _skip_foreign).
    "inherited-members": ",".join(
        [
            "object",
            "BaseException",
            "Exception",
            "ValueError",
            "TypeError",
            "AssertionError",
            "Warning",
            "UserWarning",
            "RuntimeError",
            "dict",
            "tuple",
            "str",
            "int",
            "float",
            "Generic",
            "Protocol",
        ]
    ),
    "show-inheritance": True,
    "member-order": "bysource",
}
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autodoc_class_signature = "mixed"
autosummary_generate = False
#: dpkit's own type aliases, shown by their short name in signatures (annotations that
#: use them stay strings) and linked to their documentation by :func:`_alias`.
TYPE_ALIASES = {
    "RandomLike": "dpkit.random.RandomLike",
}

# --- napoleon: NumPy-style docstrings --------------------------------------------
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True
# dpkit's own docstring sections (DESIGN.md): rendered as headed paragraphs.
napoleon_custom_sections = [
    ("Privacy", "notes_style"),
    ("Accuracy", "notes_style"),
    ("Exact distribution", "notes_style"),
    ("Guarantee", "notes_style"),
    ("Contract", "notes_style"),
    ("Sentinels", "notes_style"),
]

# --- nitpicky mode: what cannot resolve offline -----------------------------------
nitpicky = True
#: Objects of the standard library, typing internals and third-party libraries: with no
#: intersphinx (offline build) they have no target. Never a ``dpkit`` name.
_FOREIGN = (
    r"(collections\.abc|typing|typing_extensions|types|abc|enum|numbers|fractions|decimal"
    r"|datetime|pathlib|os|io|concurrent\.futures|threading|multiprocessing|json|sqlite3"
    r"|numpy|np|npt|numpy\.typing|numpy\.random|scipy|pandas|pd|pyarrow|pa|polars|pl"
    r"|duckdb|pyspark|sklearn|matplotlib|rich|typer|sqlglot|highspy|cryptography)"
)
nitpick_ignore_regex = [
    (r"py:.*", _FOREIGN + r"(\..*)?"),
    # Standard-library classes named by their short name in string annotations.
    (r"py:class", r"Path|date|datetime|Decimal|Fraction|Generator|SeedSequence"),
    # TypeVars of dpkit's generic classes (typing internals).
    (r"py:(class|obj)", r"T|(dpkit\.[\w.]+\.)?(G|_G|ValueT)"),
]
#: dpkit's private types that public signatures name (Literal aliases, protocols,
#: internal classes): they have no page yet. Listed one by one, so that a new one fails
#: the build; each should become public (exported and documented) or leave the
#: signature. A reference to them *in a docstring* is not covered: it fails.
PRIVATE_IN_SIGNATURES = [
    "Accuracy",
    "AttackName",
    "BudgetKind",
    "Calibration",
    "CalibrationMethod",
    "CanaryType",
    "Catalog",
    "ClassifierName",
    "Engine",
    "EpsilonInterval",
    "FloatArray",
    "Ledger",
    "Loss",
    "LossLike",
    "Method",
    "Neighbouring",
    "Trainer",
    "_Omitted",
    "dpkit.accounting._pld_lower.EpsilonInterval",
    "dpkit.accounting.filters._base._Kind",
    "dpkit.analytics._history.SpendHistory",
    "dpkit.analytics._sql_query.SqlStatement",
    "dpkit.analytics.query.Join",
    "dpkit.analytics.query.PerPerson",
    "dpkit.analytics.query.TableKeys",
    "dpkit.design._core.Grid",
    "dpkit.design._distribution.PiecewiseUniform",
    "dpkit.design._losses.Loss",
    "dpkit.synth._columns.ColumnCode",
    "dpkit.testing.AccountantLike",
]
nitpick_ignore = [("py:class", name) for name in PRIVATE_IN_SIGNATURES]


# --- section titles inside docstrings ------------------------------------------------
_TITLE = re.compile(r"^(?P<indent>\s*)(?P<title>\S.*?)\s*$")
_UNDERLINE = re.compile(r"^\s*([-=~^\"'`#*+])\1{2,}\s*$")


def _titles_to_rubrics(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    """Turn the section titles napoleon does not know (``Module map`` over dashes) into
    rubrics: a docstring is not a document, and docutils refuses sections inside it."""
    index = 0
    while index + 1 < len(lines):
        title, underline = lines[index], lines[index + 1]
        match = _TITLE.match(title)
        if match and _UNDERLINE.match(underline) and len(underline.strip()) >= 3:
            indent = match.group("indent")
            lines[index : index + 2] = [f"{indent}.. rubric:: {match.group('title')}", ""]
        index += 1


#: The public modules, one page each (index.rst); a top-level name is linked to the
#: first of them that exports it (``__all__``).
MODULES = [
    "analytics",
    "accounting",
    "mechanisms",
    "noise",
    "random",
    "estimators",
    "selection",
    "synth",
    "learn",
    "reliability",
    "design",
    "groupwise",
    "audit",
    "report",
    "testing",
    "errors",
    "tools",
]


def _home(name: str, value: object) -> str | None:
    """The public module whose ``__all__`` exports ``value`` as ``name``."""
    import importlib

    for module_name in MODULES:
        module = importlib.import_module(f"dpkit.{module_name}")
        if name in getattr(module, "__all__", ()) and getattr(module, name) is value:
            return f"dpkit.{module_name}"
    return None


class TopLevel(SphinxDirective):
    """``.. dpkit-toplevel::``: every public name of ``dpkit`` (``dir(dpkit)``), linked
    to its module's page, or documented here when no public module exports it."""

    def run(self) -> list[Any]:
        import inspect
        import types

        links: list[str] = []
        here: list[str] = []
        for name in sorted(dir(dpkit), key=str.casefold):
            if name.startswith("_"):
                continue
            value = getattr(dpkit, name)
            if isinstance(value, types.ModuleType):
                links.append(f"* ``dp.{name}``: :py:mod:`dpkit.{name}`")
                continue
            home = _home(name, value)
            if home is not None:
                links.append(f"* ``dp.{name}``: :py:obj:`{home}.{name}`")
                continue
            directive = (
                "autoclass"
                if inspect.isclass(value)
                else "autofunction"
                if callable(value)
                else "autodata"
            )
            here += [f".. {directive}:: dpkit.{name}", ""]
        text = "\n".join([*links, "", *here])
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(text.splitlines(), "dpkit"), node)
        return node.children


def _public_bases(app: Any, name: str, obj: Any, options: Any, bases: list[Any]) -> None:
    """Show a class's public bases only: a private base (``dpkit.learn._base.Mixin``)
    is an implementation detail with no page; its public members are shown on the
    class itself."""
    bases[:] = [
        base
        for base in bases
        if not any(part.startswith("_") for part in getattr(base, "__module__", "").split("."))
        or not getattr(base, "__module__", "").startswith("dpkit")
    ]
    bases[:] = [b for b in bases if not getattr(b, "__name__", "").startswith("_")]


def _alias(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Resolve what is public under another name: a dpkit type alias named by its short
    name in a signature, and ``dpkit.NAME`` (``dp.Session``), a top-level re-export,
    to the page of the module it comes from."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    resolved = TYPE_ALIASES.get(target)
    head, _, rest = target.removeprefix("dpkit.").partition(".")
    if resolved is None and target.startswith("dpkit.") and not head.startswith("_"):
        value = getattr(dpkit, head, None)
        home = _home(head, value) if value is not None else None
        if home is not None:
            resolved = ".".join(filter(None, (home, head, rest)))
    if resolved is None:
        return None
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node["refdoc"], app.builder, "obj", resolved, node, contnode)


def _prose_attribute_docstring(self: Any) -> list[str]:
    """Napoleon reads the first line of an attribute's docstring as ``type: text``;
    dpkit's attribute docstrings are prose (``The table's public schema: ...``) and the
    type is the annotation's. Parse the whole docstring as a description."""
    lines = self._dedent(self._consume_to_end())
    parsed: list[str] = self.__class__(lines, self._config).lines()
    return parsed


NumpyDocstring._parse_attribute_docstring = _prose_attribute_docstring


def _skip_foreign(app: Any, what: str, name: str, obj: Any, skip: bool, options: Any) -> Any:
    """Skip members that another library put on dpkit's classes (scikit-learn's
    ``set_fit_request`` and friends): that library documents them."""
    module = getattr(obj, "__module__", None) or ""
    if module.partition(".")[0] in ("sklearn",):
        return True
    return None


def setup(app: Any) -> None:
    app.connect("autodoc-skip-member", _skip_foreign)
    app.connect("missing-reference", _alias)
    app.add_directive("dpkit-toplevel", TopLevel)
    app.connect("autodoc-process-bases", _public_bases)
    # After napoleon (priority 500), which has turned its own sections into fields.
    app.connect("autodoc-process-docstring", _titles_to_rubrics, priority=600)
