"""Record the DESCRIBE statements a Session's engine runs (tests of the schema caches)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
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


def compile_at_every_salt(session: Any, query: Any, salts: Iterable[int]) -> None:
    """Compile ``query`` on ``session`` at each salt, asserting that every salt's view
    shares the schema cache of the view at salt 0 (run inside :func:`recorded_describes`
    to check that doing so describes nothing)."""
    shared = session._view_for(query, 0)[0]._engine._schema_cache
    for salt in salts:
        view, stripped = session._view_for(query, salt)
        assert view._engine._schema_cache is shared
        view._compile(stripped, 1.0, salt)


def assert_integers_of_a_fresh_session(
    session: Any, fresh: Callable[[], Any], query: Any, salts: Iterable[int]
) -> None:
    """At each salt, ``query``'s view on ``session`` has the schema and exact integers of
    its view on a Session made by ``fresh()`` that never saw it (no stale cache)."""
    for salt in salts:
        view, stripped = session._view_for(query, salt)
        fresh_view, fresh_stripped = fresh()._view_for(query, salt)
        assert view._schema == fresh_view._schema
        ours = view._engine.aggregate(view._compile(stripped, 1.0, salt).plan)
        theirs = fresh_view._engine.aggregate(fresh_view._compile(fresh_stripped, 1.0, salt).plan)
        assert ours == theirs
