"""Algorithms that never fail: absorb a failure probability into delta, repeat until success."""

__all__: list[str] = []
