"""Privacy filters and odometers (being split by family; see ``_base.py`` for now)."""

from dpkit.accounting.filters._base import (
    AdvancedCompositionFilter,
    ApproxDPFilter,
    ApproxDPOdometer,
    ApproxZCDP,
    ApproxZCDPFilter,
    PrivacyFilter,
    PrivacyOdometer,
    PureDPFilter,
    PureDPOdometer,
    RDPFilter,
    RDPOdometer,
    ZCDPFilter,
    ZCDPOdometer,
    privacy_filter,
)

__all__ = [
    "AdvancedCompositionFilter",
    "ApproxDPFilter",
    "ApproxDPOdometer",
    "ApproxZCDP",
    "ApproxZCDPFilter",
    "PrivacyFilter",
    "PrivacyOdometer",
    "PureDPFilter",
    "PureDPOdometer",
    "RDPFilter",
    "RDPOdometer",
    "ZCDPFilter",
    "ZCDPOdometer",
    "privacy_filter",
]
