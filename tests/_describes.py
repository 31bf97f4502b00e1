"""Record the DESCRIBE statements a Session's engine runs (tests of the schema caches)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def recorded_describes(session: Any) -> Iterator[list[str]]:
    """The list of DESCRIBE statements run by ``session``'s engine class (every engine
    of that class) while the block runs; the class is restored after."""
    described: list[str] = []
    engine = type(session._engine)
    original = engine._execute

    def recording(self: Any, sql: str, params: Any = (), *args: Any, **kwargs: Any) -> Any:
        if sql.startswith("DESCRIBE"):
            described.append(sql)
        return original(self, sql, params, *args, **kwargs)

    engine._execute = recording
    try:
        yield described
    finally:
        engine._execute = original
