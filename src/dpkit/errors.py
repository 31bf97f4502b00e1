"""Exceptions and warnings raised by dpkit.

Every error dpkit raises on purpose derives from :class:`DPError`, so callers can
catch the whole family at once. Messages say what was wrong, the value received and
what would be valid; they never contain private data (rows, data-derived bounds).

The hierarchy::

    DPError(Exception)
    ├─ InvalidParameter(DPError, ValueError)
    │  └─ SqlError              a SQL statement dpkit cannot run, with its line and column
    ├─ BudgetExceeded(DPError)
    ├─ DataError(DPError)
    ├─ EngineError(DPError)
    ├─ SessionLocked(DPError)
    ├─ UnsupportedEvent(DPError, TypeError)
    ├─ CandidateFailed(DPError)
    └─ InternalError(DPError, AssertionError)
    DPWarning(UserWarning)
    ├─ InsecureRandomWarning
    └─ WeakGuaranteeWarning
"""

from __future__ import annotations

__all__ = [
    "BudgetExceeded",
    "CandidateFailed",
    "DPError",
    "DPWarning",
    "DataError",
    "EngineError",
    "InsecureRandomWarning",
    "InternalError",
    "InvalidParameter",
    "SessionLocked",
    "SqlError",
    "UnsupportedEvent",
    "WeakGuaranteeWarning",
]


class DPError(Exception):
    """Root of every error dpkit raises deliberately."""


class InvalidParameter(DPError, ValueError):
    """A parameter (epsilon, delta, sensitivity, bounds, ...) is out of its valid range.

    Use :meth:`for_parameter` for the standard message::

        The 'epsilon' parameter of Laplace.calibrate must be a float in (0, inf).
        Got -1.0 instead.
    """

    @classmethod
    def for_parameter(cls, name: str, owner: str, expected: str, got: object) -> InvalidParameter:
        """Build the standard message for parameter ``name`` of ``owner``."""
        return cls(f"The {name!r} parameter of {owner} must be {expected}. Got {got!r} instead.")


class SqlError(InvalidParameter):
    """A statement dpkit cannot run, with where it is (1-based line and column).

    Raised before anything is spent; the message names the statement's own text and
    the public schema only.
    """

    def __init__(self, message: str, text: str = "", start: int | None = None) -> None:
        self.line: int | None = None
        self.column: int | None = None
        if start is not None and text:
            start = max(0, min(start, len(text)))
            before = text[:start]
            self.line = before.count("\n") + 1
            self.column = start - (before.rfind("\n") + 1) + 1
            line_text = text.split("\n")[self.line - 1]
            pointer = " " * (self.column - 1) + "^"
            message = (
                f"{message} (line {self.line}, column {self.column})\n  {line_text}\n  {pointer}"
            )
        super().__init__(message)


class BudgetExceeded(DPError):
    """A spend would exceed the remaining privacy budget; nothing was spent.

    Attributes
    ----------
    requested, remaining:
        Descriptions of the requested spend and of what remains (guarantee values
        or numbers), kept for programmatic handling.
    """

    def __init__(self, message: str, *, requested: object = None, remaining: object = None):
        super().__init__(message)
        self.requested = requested
        self.remaining = remaining


class DataError(DPError):
    """Data cannot be used as declared (wrong type, empty, missing column, ...)."""


class EngineError(DPError):
    """A query engine (DuckDB, Spark) failed; the original error is chained."""


class SessionLocked(DPError):
    """A Session refuses every query because one of its queries failed after its charge.

    The Session's rule is that nothing fails once a query has been charged (its
    failures are refused before the charge, on public information). If something does
    fail afterwards anyway -- an engine or driver bug, an out-of-memory error, a missed
    deadline -- the Session *fails closed*: the failing scope's remaining budget is
    charged in full, the failure is recorded in the ledger, and every later query on
    that ledger raises this error. The message names the time of the failure and the
    scope, never the cause's text (which could depend on row values).

    Attributes
    ----------
    failed_at:
        The failure's time, seconds since the epoch (UTC).
    scope:
        The ledger scope whose query failed (``"root"`` or a partition's scope).
    """

    def __init__(self, message: str, *, failed_at: float, scope: str):
        super().__init__(message)
        self.failed_at = failed_at
        self.scope = scope


class UnsupportedEvent(DPError, TypeError):
    """An accountant cannot analyse an event; the message names the sub-event."""


class CandidateFailed(DPError):
    """A private selection stopped because a draw of its candidate failed.

    The candidate raised, or returned a score that is not a finite real number. The
    failure is the selection's output: it is released, and charged, exactly like a
    successful selection (a failing draw counts as the best score and stops the run),
    so ``event`` and ``guarantee`` are those of the whole selection and must be
    charged. The number of draws that ran is not reported (it is private). The
    candidate's own exception, if any, is chained as ``__cause__``.
    """

    def __init__(self, message: str, *, event: object = None, guarantee: object = None):
        super().__init__(message)
        self.event = event
        self.guarantee = guarantee


class InternalError(DPError, AssertionError):
    """An internal invariant broke. This is a bug in dpkit; please report it."""

    def __init__(self, message: str):
        super().__init__(f"{message} This is a bug in dpkit; please report it.")


class DPWarning(UserWarning):
    """Root of dpkit's warnings."""


class InsecureRandomWarning(DPWarning):
    """A seeded (reproducible, hence predictable) random generator is in use.

    Seeded generators are for tests and reproducible research; a release drawn with
    one is not private against anyone who knows or can guess the seed.
    """


class WeakGuaranteeWarning(DPWarning):
    """The requested guarantee is valid but weak (for example epsilon > 10)."""
