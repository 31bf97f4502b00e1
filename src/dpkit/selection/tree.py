"""Placeholder: being written (issue 4/6)."""

from typing import NoReturn


def select_by_tree(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError
