"""The documentation's examples run.

1. Every ```python fenced block in README.md and docs/**/*.md is executed. The blocks
   of one file run in order in one namespace, as a reader would run the page; each
   file is one test, with the file's path as its id. A block fenced as
   ```python no-run is shown to readers but not run (for code that needs a cluster,
   a network or minutes of time). Other fences (bash, console, text, ...) are ignored.
2. Every module of the installed ``dpkit`` package imports, and the examples in its
   docstrings pass as doctests (with ELLIPSIS and NORMALIZE_WHITESPACE).

Warnings are errors here as everywhere in the suite, so examples must run cleanly.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import io
import re
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# An opening fence: up to three spaces of indentation, three or more backticks,
# then the info string ("python", "python no-run", ...).
_FENCE_OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,})\s*(?P<info>[^`]*)$")


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block: its info words, first code line (1-based) and code."""

    info: tuple[str, ...]
    first_line: int
    code: str

    @property
    def runnable(self) -> bool:
        return bool(self.info) and self.info[0] in ("python", "py") and "no-run" not in self.info


def fenced_blocks(text: str, source: str) -> list[CodeBlock]:
    """Split Markdown ``text`` into its fenced code blocks (backtick fences only)."""
    blocks: list[CodeBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        i += 1
        if match is None:
            continue
        indent, fence = len(match["indent"]), match["fence"]
        start = i
        while i < len(lines) and not re.match(rf"^ {{0,3}}{fence}`*\s*$", lines[i]):
            i += 1
        if i == len(lines):
            raise ValueError(f"{source}:{start}: code fence opened here is never closed")
        body = [line[indent:] if line[:indent].isspace() else line for line in lines[start:i]]
        blocks.append(CodeBlock(tuple(match["info"].split()), start + 1, "\n".join(body) + "\n"))
        i += 1
    return blocks


_PYTHON_FENCE = re.compile(r"^ {0,3}`{3,}\s*py(thon)?(\s|$)", re.MULTILINE)


def _doc_files() -> list[Path]:
    """README.md and docs/**/*.md, where they hold at least one python fence."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in files if p.is_file() and _PYTHON_FENCE.search(p.read_text())]


@pytest.mark.parametrize("path", _doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_markdown_examples_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [b for b in fenced_blocks(path.read_text(), str(path)) if b.runnable]
    if not blocks:
        pytest.skip("every python block on this page is marked no-run")
    # Examples that write files write them into a fresh folder.
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs:{path.name}"}
    for block in blocks:
        # Pad with blank lines so tracebacks point at the line in the Markdown file.
        code = compile("\n" * (block.first_line - 1) + block.code, str(path), "exec")
        failure = None
        try:
            exec(code, namespace)
        except Exception as err:
            # A short traceback that starts in the page (not pytest's view of the
            # whole Markdown file as if it were one Python statement).
            assert err.__traceback__ is not None
            trace = traceback.format_exception(type(err), err, err.__traceback__.tb_next)
            failure = "".join(trace)
        if failure is not None:
            page = path.relative_to(ROOT).as_posix()
            pytest.fail(f"the example on {page} failed:\n{failure}", pytrace=False)


def test_fence_parser() -> None:
    text = textwrap.dedent(
        """\
        Intro.

        ```python
        x = 1
        ```

        ```bash
        echo hi
        ```

        ```python no-run
        raise SystemExit
        ```

          ```python
          y = x + 1
          ```
        """
    )
    blocks = fenced_blocks(text, "t.md")
    assert [b.info for b in blocks] == [("python",), ("bash",), ("python", "no-run"), ("python",)]
    assert [b.runnable for b in blocks] == [True, False, False, True]
    assert blocks[0].first_line == 4
    assert blocks[3].code == "y = x + 1\n"
    with pytest.raises(ValueError, match="never closed"):
        fenced_blocks("```python\nx = 1\n", "t.md")


def _dpkit_modules() -> list[str]:
    """Names of every module in the installed dpkit package, found without importing."""
    spec = importlib.util.find_spec("dpkit")
    if spec is None or not spec.submodule_search_locations:
        return []
    names: set[str] = set()
    for location in spec.submodule_search_locations:
        base = Path(location)
        for path in base.rglob("*.py"):
            parts = path.relative_to(base).with_suffix("").parts
            if parts[-1] == "__main__" or any(not p.isidentifier() for p in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.add(".".join(("dpkit", *parts)))
    return sorted(names)


@pytest.mark.parametrize("module_name", _dpkit_modules())
def test_module_imports_and_doctests_pass(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        missing = (err.name or "").partition(".")[0]
        if missing and missing != "dpkit":
            pytest.skip(f"needs the optional dependency {err.name!r}")
        raise
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, module_name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{failed} of {attempted} doctest examples failed:\n{report.getvalue()}"
