"""Group-wise privacy: two-stage noise and its numerical analysis."""

__all__: list[str] = []
