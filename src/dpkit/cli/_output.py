"""Where the ``describe`` and ``demo`` commands write, and how they fail.

Conventions (docs/cli-describe.md):

- ``--json PATH`` writes the JSON document to PATH; ``--json -`` writes it to standard
  output, and then nothing else goes there (messages go to standard error and the
  terminal tables are not printed), so the output can be piped to ``jq``.
- Errors exit with code 2 and print ``error: MESSAGE`` on standard error; under
  ``--json`` they are one JSON object ``{"error": CLASS, "message": MESSAGE}``, on
  standard error, or on standard output with ``--json -``. CLASS is the name of the
  dpkit exception (``InvalidParameter``, ``DataError``, ``BudgetExceeded``,
  ``EngineError``, ...), ``OSError`` for a file that cannot be written, or
  ``UsageError`` for a command line Click refuses (an unknown option, a bad value, a
  missing argument; :class:`JsonErrorsCommand`). The message of an
  :class:`~dpkit.errors.EngineError` is never shown: the engine's text can quote row
  values.
- The progress bar is drawn on standard error when it is a terminal, and not at all
  when it is not (piped, redirected, CI logs).
- ``--open`` fails (before anything is spent) when no web browser can be found, and
  exits with code 1 if the browser does not start after the report is written.
"""

from __future__ import annotations

import json
import os
import webbrowser
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

try:  # Typer vendors Click from 0.2x on; before, it uses Click itself
    from typer._click.core import Context
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover
    from click import Context, UsageError  # type: ignore[no-redef,import-not-found,unused-ignore]

from dpkit.errors import EngineError, InvalidParameter

if TYPE_CHECKING:
    from dpkit.report.model import DatasetSummary

__all__ = [
    "ENGINE_MESSAGE",
    "JsonErrorsCommand",
    "Output",
    "check_browser",
    "check_writable",
    "json_target",
]

#: What is said of an engine failure: what failed, never what the engine said.
ENGINE_MESSAGE = (
    "the query engine failed; its message is not shown because it may quote row values. "
    "Budget charged for queries that had started stays spent."
)
#: Exit codes: a refused command (nothing spent) and a failed ``--open``.
EXIT_ERROR, EXIT_OPEN_FAILED = 2, 1


@dataclass
class Output:
    """The streams of one command run, chosen from its ``--json`` option."""

    json_target: str | None
    err: Console = field(default_factory=lambda: Console(stderr=True))

    @property
    def json_to_stdout(self) -> bool:
        return self.json_target == "-"

    @property
    def out(self) -> Console:
        """Human-readable output: standard output, or standard error when the JSON
        document goes to standard output."""
        return self.err if self.json_to_stdout else Console()

    def fail(self, error: BaseException, *, code: int = EXIT_ERROR) -> NoReturn:
        """Report ``error`` in the stable shape and exit with ``code``."""
        name = type(error).__name__
        if isinstance(error, EngineError):
            message = ENGINE_MESSAGE  # never the engine's text
        elif isinstance(error, OSError):
            name, message = "OSError", f"{error.strerror or name}: {error.filename}"
        elif isinstance(error, UsageError):
            # From the command line alone (options, values), never from data.
            name, message = "UsageError", error.format_message()
        else:
            message = str(error)
        if self.json_target is not None:
            payload = json.dumps({"error": name, "message": message})
            typer.echo(payload, err=not self.json_to_stdout)
        else:
            # escape(): a column name such as "[bold]" is not Rich markup.
            # soft_wrap: one line per message, whatever the terminal's width (greppable).
            self.err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=code)

    def note(self, text: str) -> None:
        """A status line (never on standard output when it carries JSON)."""
        self.out.print(text, highlight=False, markup=False)

    def write_json(self, text: str) -> None:
        """Write the JSON document to its target."""
        if self.json_target is None:
            return
        if self.json_to_stdout:
            typer.echo(text)
            return
        try:
            Path(self.json_target).write_text(text, encoding="utf-8")
        except OSError as err:
            self.fail(err)
        self.note(f"JSON written to {self.json_target}")


def json_target(args: Sequence[str]) -> str | None:
    """The ``--json`` target a command line asks for, read before Click parses it: the
    last ``--json VALUE`` or ``--json=VALUE`` before any ``--`` (as Click reads them),
    ``""`` for a ``--json`` missing its value, None without ``--json``."""
    target = None
    items = list(args)
    for i, item in enumerate(items):
        if item == "--":
            break
        if item == "--json":
            target = items[i + 1] if i + 1 < len(items) else ""
        elif item.startswith("--json="):
            target = item.removeprefix("--json=")
    return target


class JsonErrorsCommand(TyperCommand):
    """A command whose command-line errors (an unknown option, a value of the wrong
    type, a missing argument) are reported like its other errors: under ``--json`` as
    one JSON object (``{"error": "UsageError", "message": ...}``) on standard error, or
    on standard output with ``--json -``, with Click's exit code (2). Without
    ``--json``, Click's usual usage message."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Context | None = None,
        **extra: Any,
    ) -> Context:
        target = json_target(args)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except UsageError as err:
            if target is None:
                raise
            Output(target).fail(err, code=err.exit_code)


def check_browser(open_report: bool, report: Path | None) -> None:
    """Refuse ``--open`` that cannot work, before anything is spent."""
    if not open_report:
        return
    if report is None:
        raise InvalidParameter("--open opens the HTML report: give --report FILE as well.")
    try:
        webbrowser.get()
    except webbrowser.Error:
        raise InvalidParameter(
            "--open: no web browser was found (Python's webbrowser module found none; set "
            "the BROWSER environment variable to one). Run without --open and open "
            f"{str(report)!r} yourself."
        ) from None


def check_writable(path: Path | None, option: str) -> None:
    """Refuse an output file that cannot be written, before anything is spent (a JSON
    path in a missing or read-only folder used to fail after the whole run was
    charged; issue 28). ``None`` and ``-`` (standard output) pass."""
    if path is None or str(path) == "-":
        return
    if path.is_symlink() and not path.exists():
        # A dangling link passes exists() = False; writing through it fails later.
        raise InvalidParameter(f"{option}: {str(path)!r} is a link to nothing; give a file name.")
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InvalidParameter(f"{option}: {str(path)!r} is a folder; give a file name.")
    if not folder.is_dir():
        raise InvalidParameter(f"{option}: the folder {str(folder)!r} does not exist.")
    target = path if path.exists() else folder
    if not os.access(target, os.W_OK):
        raise InvalidParameter(f"{option}: {str(target)!r} is not writable.")


def write_outputs(
    summary: DatasetSummary,
    output: Output,
    *,
    report: Path | None,
    open_report: bool,
) -> None:
    """Print the summary (unless its JSON goes to standard output), and write and open
    the report and JSON the user asked for."""
    from dpkit.report import open_in_browser, render_html, render_terminal, to_json

    if not output.json_to_stdout:
        render_terminal(summary, output.out)
    output.write_json(to_json(summary))
    if report is not None:
        try:
            render_html(summary, report)
        except OSError as err:
            output.fail(err)
        output.note(f"HTML report written to {report}")
        if open_report and not open_in_browser(report):
            output.fail(
                InvalidParameter(
                    f"--open: the web browser did not start; the report is at {str(report)!r}."
                ),
                code=EXIT_OPEN_FAILED,
            )
