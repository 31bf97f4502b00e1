"""Placeholder: being written (issue 4/6)."""

from typing import NoReturn


def quantile(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError


def quantiles(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError


def median(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError
