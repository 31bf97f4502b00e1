"""The mathematics of privacy accounting, as pure functions on floats.

Each module is one idea: :mod:`.rounding` (conservative rounding of bounds),
:mod:`.conversions` (between DP definitions), :mod:`.laplace`, :mod:`.gaussian` and
:mod:`.discrete_gaussian` (mechanism analyses). Guarantee and event classes stay thin
and call these. Nothing here is public API; :mod:`dpkit.accounting` re-exports what is.
"""
