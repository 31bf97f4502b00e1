"""Placeholder: being written (issue 4/6)."""

from typing import NoReturn


def inverse_sensitivity(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError
