"""Translate the SymPy expressions of torch's ShapeEnv into this package's index vocabulary.

Sizes traced with ``tracing_mode="symbolic"`` carry torch's own SymPy functions (``FloorDiv``,
``CleanDiv``, ``PythonMod``, ``Max``, ``ToFloat``, ...), which code generators do not print. They
are mapped to :class:`~inductor_ir.symbolic.FloorDiv`, ``sympy.Mod``, ``sympy.Max``/``Min``, and
``Max``/``Min`` whose order the ShapeEnv's value ranges decide (``Max(1, s0 - 1)`` with ``s0 >= 2``)
are resolved, so no guard is added and kernels see plain polynomials where possible.
"""

from __future__ import annotations

from typing import Any

import sympy

__all__ = ["from_shape_env"]


def _torch_functions() -> dict[str, Any]:
    try:
        import torch.utils._sympy.functions as functions
    except ImportError:  # pragma: no cover - every supported torch has it
        return {}
    return {name: getattr(functions, name) for name in dir(functions) if isinstance(getattr(functions, name), type)}


_TORCH = _torch_functions()


def _lower_bound(expr: sympy.Expr, shape_env: Any) -> Any:
    """The smallest value ``expr`` can take under the ShapeEnv's ranges, or None."""
    if shape_env is None:
        return None
    try:
        ranges = shape_env.bound_sympy(expr)
    except Exception:  # bounds are an optimization only
        return None
    return ranges.lower


def _resolve_min_max(args: list[sympy.Expr], is_max: bool, shape_env: Any) -> sympy.Expr:
    """``Max``/``Min`` of ``args``, dropping arguments the ShapeEnv proves are never chosen."""
    kept = list(args)
    for a in args:
        for b in args:
            if a is b or a not in kept or b not in kept:
                continue
            bound = _lower_bound(sympy.expand(a - b), shape_env)
            if bound is not None and bound != -sympy.oo and bool(bound >= 0):
                kept.remove(b if is_max else a)  # a >= b always
    return sympy.Max(*kept) if is_max else sympy.Min(*kept)


def from_shape_env(expr: sympy.Expr, shape_env: Any = None) -> sympy.Expr:
    """``expr`` (from a ``SymInt``'s node) with torch's SymPy functions replaced by ours.

    Example: ``FloorDiv(s0, 2)`` (torch's) becomes ``inductor_ir.FloorDiv(s0, 2)``;
    ``Max(1, s0 - 1)`` becomes ``s0 - 1`` when the ShapeEnv knows ``s0 >= 2``.
    """
    from inductor_ir.symbolic import FloorDiv, ModularIndexing

    if not _TORCH or not isinstance(expr, sympy.Basic) or expr.is_Atom:
        return expr
    args = [from_shape_env(a, shape_env) for a in expr.args]
    name = type(expr).__name__
    if type(expr) is _TORCH.get(name):
        if name in ("FloorDiv", "CleanDiv"):
            return FloorDiv(args[0], args[1])
        if name == "CeilDiv":
            return FloorDiv(args[0] + args[1] - 1, args[1])
        if name == "ModularIndexing":
            return ModularIndexing(args[0], args[1], args[2])
        if name in ("Mod", "PythonMod"):
            return sympy.Mod(args[0], args[1])
        if name in ("Max", "Min"):
            return _resolve_min_max(args, name == "Max", shape_env)
        if name in ("ToFloat", "Identity", "TruncToFloat"):
            return args[0]
        if name == "FloatTrueDiv" and any(not s.is_integer for s in expr.free_symbols):
            # `v / 7.0` of a float read at run time: SymPy would make it v * 0.142857142857143,
            # neither the division eager's Python does nor its double; kept whole, the wrapper prints
            # it as a Python division. (Of sizes, `s0 / (0.5 * s0)`, SymPy's form is what kernels read.)
            return expr.func(*args)
        if name in ("IntTrueDiv", "FloatTrueDiv"):
            return args[0] / args[1]
        if name == "TruncToInt":
            exact = _truncated_dyadic(args[0], shape_env)
            return expr if exact is None else exact
        if name in ("FloorToInt",):
            return sympy.floor(args[0])
        if name in ("CeilToInt",):
            return sympy.ceiling(args[0])
        if name in ("PowByNatural", "FloatPow"):
            return sympy.Pow(args[0], args[1])
        return expr
    if args == list(expr.args):
        return expr
    return expr.func(*args)


def _truncated_dyadic(value: sympy.Expr, shape_env: Any) -> sympy.Expr | None:
    """``int(value)`` as an integer expression, for a nonnegative ``value`` whose float coefficients are
    dyadic (``0.5*s0``: ``F.interpolate(scale_factor=0.5)``'s output size): ``FloorDiv(s0, 2)``.

    A dyadic coefficient times a size is exact in double precision, so this floor is the one eager
    computes; any other coefficient (1.7) is rounded by the float product, and stays unsupported.
    """
    from inductor_ir.symbolic import FloorDiv

    expanded = sympy.expand(value)
    exact: dict[sympy.Basic, sympy.Basic] = {}
    for number in expanded.atoms(sympy.Float):
        numerator, denominator = float(number).as_integer_ratio()
        if denominator > 2**20 or abs(numerator) > 2**20:
            return None
        exact[number] = sympy.Rational(numerator, denominator)
    rational = sympy.expand(expanded.xreplace(exact))
    if rational.has(sympy.Float) or not all(s.is_integer for s in rational.free_symbols):
        return None
    numerator, denominator = sympy.fraction(sympy.together(rational))
    if not (denominator.is_Integer and int(denominator) > 0):
        return None
    bound = _lower_bound(rational, shape_env)
    if bound is None or bound == -sympy.oo or not bool(bound >= 0):
        return None  # int() truncates toward zero: a floor only for nonnegative values
    numerator = sympy.expand(numerator)
    return numerator if int(denominator) == 1 else FloorDiv(numerator, denominator)
