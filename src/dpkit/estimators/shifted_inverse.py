"""Placeholder: being written (issue 4/6)."""

from typing import NoReturn


def shifted_inverse_sensitivity(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError
