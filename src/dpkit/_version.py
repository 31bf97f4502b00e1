"""dpkit's version, in its own module: the report footer reads it without importing
the package root."""

__version__ = "0.1.0"
