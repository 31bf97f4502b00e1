"""The ``dpkit`` command line (Typer + Rich)."""
