"""Placeholder: being written (issue 4)."""


class Grid:
    pass
