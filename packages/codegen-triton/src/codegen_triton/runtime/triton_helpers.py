"""`@triton.jit` helpers that generated kernels import as `helpers`: reduction combine functions.

NaN semantics follow the IR (see `inductor_ir.ops_handler`): `max`/`min` propagate NaN, argmax and
argmin treat NaN as the extreme value, ties go to the first (smallest) index.
"""

import triton
import triton.language as tl

__all__ = ["any_combine", "argmax_combine", "argmin_combine", "max_combine", "min_combine", "prod_combine"]


@triton.jit
def max_combine(a, b):
    """Maximum that propagates NaN."""
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def min_combine(a, b):
    """Minimum that propagates NaN."""
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def prod_combine(a, b):
    """Product."""
    return a * b


@triton.jit
def any_combine(a, b):
    """Logical or."""
    return a | b


@triton.jit
def argmax_combine(value_a, index_a, value_b, index_b):
    """(value, index) of the larger; NaN is largest; ties pick the smaller index."""
    nan_a = value_a != value_a
    nan_b = value_b != value_b
    same = (value_a == value_b) | (nan_a & nan_b)
    a_wins = (value_a > value_b) | (nan_a & (nan_b == 0)) | (same & (index_a < index_b))
    return tl.where(a_wins, value_a, value_b), tl.where(a_wins, index_a, index_b)


@triton.jit
def argmin_combine(value_a, index_a, value_b, index_b):
    """(value, index) of the smaller; NaN is smallest; ties pick the smaller index."""
    nan_a = value_a != value_a
    nan_b = value_b != value_b
    same = (value_a == value_b) | (nan_a & nan_b)
    a_wins = (value_a < value_b) | (nan_a & (nan_b == 0)) | (same & (index_a < index_b))
    return tl.where(a_wins, value_a, value_b), tl.where(a_wins, index_a, index_b)
