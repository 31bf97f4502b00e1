"""Placeholder: being written (issue 4/6)."""

from typing import NoReturn


def maximum(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError


def minimum(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError


def user_sum(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError


def user_count(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError


def count_distinct(*args: object, **kwargs: object) -> NoReturn:
    raise NotImplementedError
