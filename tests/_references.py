"""Stored golden values of slow, exact test references.

Some tests compare dpkit with an exact reference that is slow to compute (mpmath
quadrature at 40 digits, nested adaptive scipy quadrature) but is a pure function of
its arguments. Decorating such a module-level function with :func:`golden_reference`
makes the default run read its value from ``tests/golden/references/`` instead of
computing it; the check on dpkit stays the same, only the reference number comes from
the file. A value that is not stored is computed live (slower, never wrong), so a new
or changed call never fails a test.

``pytest --refresh-references -n 0 FILES`` computes every reference live and rewrites
the files of the modules it ran (add ``--runslow`` to include the slow tests' calls);
``pytest --runslow tests/golden/test_references.py`` recomputes every stored value and
requires it to be bit for bit the stored one.

Format: one JSON file per test module, at the module's path relative to ``tests/``
with ``.json`` for ``.py``, mapping the function's qualified name to a mapping from
the call's key to its value. Both are exact and canonical, so that a key never names
two calls and a stored value always compares equal (``==``) to a fresh one:

- key: the arguments bound to the parameters in order, ``(a, b, ...)``, each a float
  as ``float.hex`` (``inf``, ``-inf``), an int in decimal, a str as a JSON string, or
  a tuple of these in parentheses (``(x,)`` for one element); anything else is refused;
- value: a float as its ``float.hex`` string, an int as a JSON int, an mpmath ``mpf``
  as ``{"mpf": "<sign>0x<mantissa>p<exponent>"}`` (the exact integers of its binary
  form; ``inf``/``-inf`` for infinities), a tuple as a JSON array, a list as
  ``{"list": [...]}``. NaN is refused: it never compares equal to itself.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar, cast

import mpmath
import pytest

P = ParamSpec("P")
R = TypeVar("R")

TESTS_DIR: Final = Path(__file__).resolve().parent
STORE_DIR: Final = TESTS_DIR / "golden" / "references"
MARKER: Final = "__golden_reference__"

JSON = Any  # a decoded JSON document (the stdlib has no precise type for it)


# ------------------------------------------------------------------------ keys


def encode_key(args: tuple[object, ...]) -> str:
    """The canonical text of a call's arguments, e.g. ``(0x1.8000000000000p+0, 3)``.

    Parameters
    ----------
    args
        The arguments bound to the function's parameters, in parameter order.

    Returns
    -------
    str
        A text that names exactly this tuple of arguments (types included).

    Raises
    ------
    TypeError
        For an argument of another type (bool, numpy scalars, lists, objects...):
        a key must never stand for two calls that could give different values.
    ValueError
        For a NaN argument (``float.hex`` drops its sign and payload).
    """
    return _encode_arg(args)


def _encode_arg(value: object) -> str:
    # Exact type checks: bool is an int and numpy.float64 a float, but a reference
    # may treat them differently, so they are refused rather than merged.
    kind = type(value)
    if kind is float:
        assert isinstance(value, float)
        if value != value:
            raise ValueError("golden_reference: NaN cannot be part of a key")
        return value.hex()
    if kind is int:
        return str(value)
    if kind is str:
        return json.dumps(value)
    if kind is tuple:
        assert isinstance(value, tuple)
        items = [_encode_arg(item) for item in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    raise TypeError(
        f"golden_reference: cannot key an argument of type {kind.__qualname__} "
        "(use float, int, str or tuples of these)"
    )


_TOKEN: Final = re.compile(
    r"""\s*(?:
        (?P<open>\() | (?P<close>\)) | (?P<comma>,)
      | (?P<float>-?(?:0x[0-9a-f]+(?:\.[0-9a-f]*)?p[+-][0-9]+|inf))
      | (?P<int>-?[0-9]+)
      | (?P<str>"(?:[^"\\]|\\.)*")
    )""",
    re.VERBOSE,
)


def decode_key(key: str) -> tuple[object, ...]:
    """The arguments named by a key (the inverse of :func:`encode_key`).

    Raises
    ------
    ValueError
        If the text is not a key in canonical form (re-encoding must give it back).
    """
    tokens = list(_tokens(key))
    value, rest = _parse(tokens)
    if rest or not isinstance(value, tuple) or encode_key(value) != key:
        raise ValueError(f"not a canonical golden-reference key: {key!r}")
    return value


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            raise ValueError(f"bad golden-reference key at {position}: {text!r}")
        yield match.lastgroup, match.group(match.lastgroup)
        position = match.end()


def _parse(tokens: list[tuple[str, str]]) -> tuple[object, list[tuple[str, str]]]:
    if not tokens:
        raise ValueError("golden-reference key ends early")
    (kind, text), rest = tokens[0], tokens[1:]
    if kind == "float":
        return float.fromhex(text), rest
    if kind == "int":
        return int(text), rest
    if kind == "str":
        return json.loads(text), rest
    if kind != "open":
        raise ValueError(f"unexpected {text!r} in a golden-reference key")
    items: list[object] = []
    while rest and rest[0][0] != "close":
        item, rest = _parse(rest)
        items.append(item)
        if rest and rest[0][0] == "comma":
            rest = rest[1:]
    if not rest:
        raise ValueError("unclosed tuple in a golden-reference key")
    return tuple(items), rest[1:]


# ---------------------------------------------------------------------- values

_MPF_TEXT: Final = re.compile(r"(-?)0x([0-9a-f]+)p([+-][0-9]+)")


def encode_value(value: object) -> JSON:
    """The exact JSON form of a reference's value (see the module docstring).

    Raises
    ------
    TypeError
        For a type that cannot be stored exactly.
    ValueError
        For NaN, which would never compare equal to a recomputed NaN.
    """
    kind = type(value)
    if kind is float:
        assert isinstance(value, float)
        if value != value:
            raise ValueError("golden_reference: a NaN value cannot be checked with ==")
        return value.hex()
    if kind is int:
        return value
    if kind is tuple or kind is list:
        assert isinstance(value, tuple | list)
        items = [encode_value(item) for item in value]
        return items if kind is tuple else {"list": items}
    if isinstance(value, mpmath.mpf):
        return {"mpf": _mpf_text(value)}
    raise TypeError(f"golden_reference: cannot store a value of type {kind.__qualname__}")


def _mpf_text(value: mpmath.mpf) -> str:
    sign, mantissa, exponent, _ = value._mpf_
    if mantissa == 0:  # mpmath encodes zero and the special values with mantissa 0
        if value == 0:
            return "0x0p+0"
        if mpmath.isinf(value):
            return "-inf" if value < 0 else "inf"
        raise ValueError("golden_reference: a NaN value cannot be checked with ==")
    # mpmath keeps the mantissa odd, so (mantissa, exponent) is canonical.
    return f"{'-' if sign else ''}{int(mantissa):#x}p{exponent:+d}"


def decode_value(data: JSON) -> object:
    """The value stored as ``data`` (the inverse of :func:`encode_value`).

    Raises
    ------
    ValueError
        If ``data`` is not a stored value in canonical form.
    """
    if isinstance(data, str):
        value = float.fromhex(data)
        if value.hex() != data:
            raise ValueError(f"not a canonical float.hex: {data!r}")
        return value
    if isinstance(data, bool):  # JSON true/false are never written
        raise ValueError(f"not a golden-reference value: {data!r}")
    if isinstance(data, int):
        return data
    if isinstance(data, list):
        return tuple(decode_value(item) for item in data)
    if isinstance(data, dict) and list(data) == ["list"] and isinstance(data["list"], list):
        return [decode_value(item) for item in data["list"]]
    if isinstance(data, dict) and list(data) == ["mpf"] and isinstance(data["mpf"], str):
        return _mpf_from_text(data["mpf"])
    raise ValueError(f"not a golden-reference value: {data!r}")


def _mpf_from_text(text: str) -> mpmath.mpf:
    if text in ("inf", "-inf"):
        return mpmath.mpf(text)
    match = _MPF_TEXT.fullmatch(text)
    if match is None:
        raise ValueError(f"not a stored mpf: {text!r}")
    mantissa = int(match.group(2), 16) * (-1 if match.group(1) else 1)
    # Working precision of at least the mantissa's bits: the conversion rounds to it,
    # and must not (the restored mpf equals the computed one exactly).
    with mpmath.workprec(max(53, mantissa.bit_length())):
        value = mpmath.mpf((mantissa, int(match.group(3))))
    if _mpf_text(value) != text:
        raise ValueError(f"not a canonical stored mpf: {text!r}")
    return value


# ----------------------------------------------------------------------- store


def store_path(module: str) -> Path:
    """The JSON file of a test module given relative to ``tests/`` (``a/test_b.py``)."""
    return STORE_DIR / Path(module).with_suffix(".json")


def module_of(path: Path) -> str:
    """The test module (relative to ``tests/``, POSIX) whose values ``path`` stores."""
    return path.relative_to(STORE_DIR).with_suffix(".py").as_posix()


def dumps(table: dict[str, dict[str, JSON]]) -> str:
    """The canonical text of a module's file: sorted keys, one entry per line."""
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def load(module: str) -> dict[str, dict[str, JSON]]:
    """A module's stored table (``{}`` when it has no file)."""
    path = store_path(module)
    if not path.is_file():
        return {}
    table: dict[str, dict[str, JSON]] = json.loads(path.read_text(encoding="utf-8"))
    return table


@functools.cache
def _stored(module: str) -> dict[str, dict[str, JSON]]:
    # Read once per process (each xdist worker reads its own copy) and never written
    # by a run that reads it: --refresh-references computes everything live.
    return load(module)


# ------------------------------------------------------------------- recording


@dataclass
class _Recorder:
    """The values computed under ``--refresh-references``, by module and function."""

    active: bool = False
    tables: dict[str, dict[str, dict[str, JSON]]] | None = None

    def record(self, module: str, qualname: str, key: str, value: object) -> None:
        data = encode_value(value)
        restored = decode_value(data)
        # Round trip: what a default run will return must equal what was computed.
        if type(restored) is not type(value) or restored != value:
            raise AssertionError(f"{module}::{qualname}{key} does not round-trip")
        assert self.tables is not None
        entries = self.tables.setdefault(module, {}).setdefault(qualname, {})
        # A second call with the same key must give the same value: a cheap purity check.
        if entries.setdefault(key, data) != data:
            raise AssertionError(f"{module}::{qualname}{key} is not a pure function")


_RECORDER: Final = _Recorder()


# ------------------------------------------------------------------- decorator


@dataclass(frozen=True)
class ReferenceInfo:
    """Where a decorated reference's values are stored (its ``__golden_reference__``)."""

    module: str
    qualname: str


def golden_reference(function: Callable[P, R]) -> Callable[P, R]:
    """Serve a slow, pure, module-level reference function from stored golden values.

    The call's key (module, qualified name, exact arguments) is looked up in
    ``tests/golden/references/``; a stored value is returned, otherwise the function
    runs. The undecorated function stays available as ``__wrapped__``.

    Only decorate a function whose value depends on its arguments alone (no global
    state read, no randomness) and whose calls repeat from run to run (not with
    Hypothesis-drawn arguments): each distinct call is one stored entry.

    Raises
    ------
    TypeError
        At decoration, for a nested function or one with ``*args``/``**kwargs`` or
        keyword-only parameters; at a call, for an argument or value that has no
        exact key or stored form (see :func:`encode_key`, :func:`encode_value`).
    """
    if "<locals>" in function.__qualname__:
        raise TypeError("golden_reference: define the reference at module level")
    signature = inspect.signature(function)
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(parameter.kind not in plain for parameter in signature.parameters.values()):
        raise TypeError("golden_reference: only plain positional parameters are keyed")
    module = _test_module(Path(inspect.getfile(function)))
    if module is None:
        raise TypeError("golden_reference: only for functions of modules under tests/")
    info = ReferenceInfo(module, function.__qualname__)

    @functools.wraps(function)
    def reference(*args: P.args, **kwargs: P.kwargs) -> R:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        key = encode_key(tuple(bound.arguments.values()))
        if _RECORDER.active:
            value = function(*args, **kwargs)
            _RECORDER.record(info.module, info.qualname, key, value)
            return value
        stored = _stored(info.module).get(info.qualname, {}).get(key)
        if stored is None:
            return function(*args, **kwargs)
        return cast(R, decode_value(stored))

    setattr(reference, MARKER, info)
    return reference


# -------------------------------------------------------------- pytest plugin


class RefreshPlugin:
    """``--refresh-references``: compute every reference live, rewrite the files.

    A module whose every collected test ran to the end in this session (none
    deselected, skipped or failed, no node-id selection) gets exactly the entries it
    used: keys no longer used are dropped. Otherwise its new entries are merged into
    the old file, so that a partial run never drops entries (an entry kept although
    unused is harmless: the verification recomputes every stored entry).
    """

    def __init__(self) -> None:
        self.module_of_node: dict[str, str] = {}
        self.finished: set[str] = set()
        self.partial: set[str] = set()
        self.written: list[str] = []

    def pytest_configure(self, config: pytest.Config) -> None:
        # Every process would write the same files at its end: only one may run.
        if getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput"):
            raise pytest.UsageError("--refresh-references needs -n 0 (one process)")
        _RECORDER.active = True
        _RECORDER.tables = {}
        for arg in config.args:  # file.py::test selects part of a module
            if "::" in arg and (module := _test_module(Path(arg.split("::", 1)[0]))):
                self.partial.add(module)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        for item in items:
            if module := _test_module(item.path):
                self.partial.add(module)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            if module := _test_module(item.path):
                self.module_of_node[item.nodeid] = module

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        module = self.module_of_node.get(report.nodeid)
        if module is None:
            return
        xfailed = report.skipped and hasattr(report, "wasxfail")
        if report.when == "call" and (report.passed or xfailed):
            self.finished.add(report.nodeid)
        elif report.failed or (report.skipped and not xfailed):
            self.partial.add(module)

    def pytest_sessionfinish(self) -> None:
        assert _RECORDER.tables is not None
        for module, new in sorted(_RECORDER.tables.items()):
            nodes = {node for node, where in self.module_of_node.items() if where == module}
            complete = module not in self.partial and nodes <= self.finished
            table = {} if complete else load(module)
            for qualname, entries in new.items():
                table.setdefault(qualname, {}).update(entries)
            path = store_path(module)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dumps(table), encoding="utf-8")
            count = sum(len(entries) for entries in table.values())
            how = "rewritten" if complete else "merged into the old entries (partial run)"
            self.written.append(f"{path.relative_to(TESTS_DIR.parent)}: {count} entries, {how}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.section("golden references")
        for line in self.written or ["no decorated reference was called"]:
            terminalreporter.write_line(line)


def _test_module(path: Path) -> str | None:
    """``path`` relative to ``tests/`` (POSIX), or None for a file outside it."""
    try:
        return path.resolve().relative_to(TESTS_DIR).as_posix()
    except ValueError:
        return None
