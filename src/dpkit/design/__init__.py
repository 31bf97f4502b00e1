"""Optimal noise by linear programming (Selvi, Liu & Wiesemann's DRO formulation)."""

__all__: list[str] = []
