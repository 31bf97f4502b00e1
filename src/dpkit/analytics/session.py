"""Placeholder: being written (issue 6)."""


class Session:
    pass
