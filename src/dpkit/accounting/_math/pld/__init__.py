"""Privacy loss distributions (PLDs) on a uniform grid, as pure functions.

One idea per module: :mod:`.pmf` (the representation and pessimistic truncation),
:mod:`.discretize` (connect-the-dots discretisation, Doroshenko et al. 2022),
:mod:`.mechanisms` (the PLDs of supported mechanisms), :mod:`.convolve` (composition
by FFT with an a-priori error bound) and :mod:`.hockey` (delta(eps) and its inverse).
:class:`dpkit.accounting.PLDAccountant` is the thin class over them.
"""
