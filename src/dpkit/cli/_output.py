"""Where the ``describe`` and ``demo`` commands write, and how they fail.

Conventions (docs/cli-describe.md):

- ``--json PATH`` writes the JSON document to PATH; ``--json -`` writes it to standard
  output, and then nothing else goes there (messages go to standard error and the
  terminal tables are not printed), so the output can be piped to ``jq``.
- Errors exit with code 2 and print ``error: MESSAGE`` on standard error; under
  ``--json`` they are one JSON object ``{"error": CLASS, "message": MESSAGE}``, on
  standard error, or on standard output with ``--json -``. CLASS is the name of the
  dpkit exception (``InvalidParameter``, ``DataError``, ``BudgetExceeded``,
  ``EngineError``, ...) or ``OSError`` for a file that cannot be written. The message
  of an :class:`~dpkit.errors.EngineError` is never shown: the engine's text can quote
  row values.
- The progress bar is drawn on standard error when it is a terminal, and not at all
  when it is not (piped, redirected, CI logs).
- ``--open`` fails (before anything is spent) when no web browser can be found, and
  exits with code 1 if the browser does not start after the report is written.
"""

from __future__ import annotations

import json
import webbrowser
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from dpkit.errors import EngineError, InvalidParameter

if TYPE_CHECKING:
    from dpkit.report.model import DatasetSummary

__all__ = ["ENGINE_MESSAGE", "Output", "check_browser"]

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
