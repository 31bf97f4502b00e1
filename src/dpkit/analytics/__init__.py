"""Budgeted analytics over tables: Session, query plans, engines, ledger."""

from dpkit.analytics.session import Session

__all__ = ["Session"]
