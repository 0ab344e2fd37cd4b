"""The closed `OpsHandler` vocabulary that define-by-run inner functions call, and the `ops` proxy.

An IR node's body is a plain Python function that computes one element by calling ``ops.<name>``.
What those calls *do* depends on the handler installed with :func:`set_ops_handler`: the reference
interpreter evaluates them on torch tensors, dependency analysis records the loads and stores, the
IR printer writes ``tmp0 = ops.load(arg0_1, i1 + 8*i0)`` lines and a code generator writes one line
of Triton or C++ per call.

The vocabulary is closed: ``OP_NAMES`` lists every op, ``ops.<anything else>`` raises, and
:func:`verify_ops_handler` rejects a handler that misses one. Semantics every handler must follow:

* Values are opaque (``T``): a tensor, a variable name, ... Index arguments are SymPy expressions
  over the index variables the caller passed to the body, size symbols (``s0``), and symbols
  returned by :meth:`OpsHandler.indirect_indexing`. Besides ``Add``, ``Mul``, ``Integer`` and
  ``Symbol`` they may contain :class:`inductor_ir.FloorDiv` and :class:`inductor_ir.ModularIndexing`,
  whose operands are never negative (C-style ``/`` and ``%`` are exact for them).
* Operands of binary ops have the same dtype (lowerings insert ``to_dtype`` first), except
  ``where`` (bool condition) and the shifts. Comparisons, ``isnan``/``isinf``/``signbit`` and the
  logical ops return ``torch.bool``.
* ``truediv``, ``pow`` and the transcendental functions only see floating dtypes. ``floordiv``
  rounds toward negative infinity, ``truncdiv`` toward zero; ``remainder`` has the sign of the
  divisor (Python ``%``), ``fmod`` the sign of the dividend (C ``fmod``). An integer divisor of 0 makes
  the call raise ``RuntimeError("ZeroDivisionError")`` as eager does (``DivisionCheck``; never a
  trap), where a backend's ``runtime_checks`` are on; float division by 0 gives inf/nan. ``round`` is
  half-to-even. ``maximum``/``minimum`` propagate NaN. ``sign`` returns -1, 0 or 1 in the input dtype.
* ``rand(seed, offset)`` / ``randn(seed, offset)``: float32 uniform in [0, 1) / standard normal,
  a deterministic function of an int64 ``seed`` value (lowerings load it from a one-element int64
  seed buffer the wrapper fills from torch's generator) and an int64 ``offset`` value (the element's
  linear index). Each backend picks its own counter-based generator (e.g. Philox): random results
  match eager only in distribution, never bit for bit.
* ``masked(mask, body, other)``: ``body()`` is a zero-argument function calling ops (typically
  loads); where ``mask`` is false the result is the constant ``other`` and body's loads must not
  touch memory (they may be out of bounds).
* ``reduction(dtype, src_dtype, reduction_type, value)``: reduces ``value`` over the group's whole
  reduction range; see ``REDUCTION_TYPES``. argmax/argmin return int64 linear indices into the
  reduction range (row-major over its dims), first occurrence wins, NaN counts as the maximum
  (and as the minimum for argmin/min). The result is written with ``store_reduction``.
  ``welford_reduce`` (floating ``value`` only) is tuple-valued: it returns ``(mean, m2, weight)``,
  three values of ``dtype``: the mean, the sum of squared deviations from it and the element count,
  computed in one pass with a numerically stable update (Welford's, lanes or blocks merged with
  Chan's formula); bodies pick one with Python indexing (``ops.reduction(...)[1]``). Two calls with
  the same arguments in one reduction loop must return the same tuple (generators compute it once),
  so the sibling nodes storing mean and m2 cost one reduction. ``welford_combine`` takes a tuple
  ``(mean, m2, weight)`` of partial results (weights may be 0) as ``value`` and merges them into one
  triple the same way (the second stage of a split Welford reduction).
* ``store(name, index, value, mode)``: ``mode`` is always ``None`` in this version (plain store).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import sympy
import torch

from inductor_ir.ir.checks import IndexCheck

__all__ = [
    "OP_NAMES",
    "REDUCTION_TYPES",
    "OpsHandler",
    "UnknownOpError",
    "current_ops_handler",
    "ops",
    "set_ops_handler",
    "verify_ops_handler",
]

T = TypeVar("T")

REDUCTION_TYPES: frozenset[str] = frozenset(
    {"sum", "prod", "max", "min", "argmax", "argmin", "any", "welford_reduce", "welford_combine"}
)
"""Reduction kinds that ``ops.reduction`` receives. ``any`` reduces bool to bool (logical or);
``welford_reduce`` and ``welford_combine`` return the tuple ``(mean, m2, weight)`` (see the module
docstring)."""


class OpsHandler(Protocol, Generic[T]):
    """Every op an inner function may call, with its signature. ``T`` is the handler's value type."""

    # -- memory -------------------------------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> T:
        """Element ``index`` (elements from the buffer's data pointer) of buffer ``name``."""
        ...

    def store(self, name: str, index: sympy.Expr, value: T, mode: str | None = None) -> None:
        """Write ``value`` at element ``index`` of buffer ``name``; ``mode`` is always None."""
        ...

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: T) -> T:
        """Reduce ``value`` (of ``src_dtype``) over the reduction range; the result has ``dtype``.

        ``welford_reduce`` returns a tuple ``(mean, m2, weight)`` of ``dtype`` values instead.
        """
        ...

    def store_reduction(self, name: str, index: sympy.Expr, value: T) -> None:
        """Write a finished reduction result at ``index`` (an expression of pointwise variables only)."""
        ...

    def indirect_indexing(
        self, x: T, size: sympy.Expr, check: bool | IndexCheck = True, wrap_neg: bool = True
    ) -> sympy.Symbol:
        """A fresh symbol standing for the integer value ``x`` (plus ``size`` where negative if ``wrap_neg``).

        The symbol may then appear in ``load`` indices and ``index_expr`` expressions. ``check``:
        the (wrapped) value must lie in ``[0, size)``; an :class:`~inductor_ir.IndexCheck` says what
        eager raises when it does not (``True``: an ``IndexError``). A backend checking it (both code
        generators do unless their ``runtime_checks`` is off) raises that from Python after the
        kernel, and never reads out of bounds. ``False``: the lowering guarantees the range.
        """
        ...

    def masked(self, mask: T, body: Callable[[], T], other: bool | int | float) -> T:
        """``body()`` where ``mask`` holds, else ``other``; body's loads are skipped where it does not."""
        ...

    # -- leaves and casts ---------------------------------------------------------------------
    def constant(self, value: bool | int | float, dtype: torch.dtype) -> T:
        """A scalar constant (may be inf or nan)."""
        ...

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> T:
        """The value of an index expression, as ``dtype`` (int32 or int64)."""
        ...

    def to_dtype(self, x: T, dtype: torch.dtype, src_dtype: torch.dtype | None = None) -> T:
        """Convert ``x`` (of ``src_dtype``, always given by lowerings) to ``dtype`` like ``Tensor.to``."""
        ...

    def where(self, condition: T, a: T, b: T) -> T:
        """``a`` where ``condition`` (bool) holds, else ``b``."""
        ...

    def rand(self, seed: T, offset: T) -> T:
        """float32 uniform in [0, 1), a deterministic function of (seed, offset)."""
        ...

    def randn(self, seed: T, offset: T) -> T:
        """float32 standard normal, a deterministic function of (seed, offset)."""
        ...

    # -- arithmetic ---------------------------------------------------------------------------
    def add(self, a: T, b: T) -> T:
        """a + b."""
        ...

    def sub(self, a: T, b: T) -> T:
        """a - b."""
        ...

    def mul(self, a: T, b: T) -> T:
        """a * b."""
        ...

    def truediv(self, a: T, b: T) -> T:
        """a / b (floating dtypes only)."""
        ...

    def floordiv(self, a: T, b: T) -> T:
        """a // b rounded toward negative infinity."""
        ...

    def truncdiv(self, a: T, b: T) -> T:
        """a / b rounded toward zero (C integer division)."""
        ...

    def remainder(self, a: T, b: T) -> T:
        """a % b with the sign of b (Python %)."""
        ...

    def fmod(self, a: T, b: T) -> T:
        """a % b with the sign of a (C fmod)."""
        ...

    def pow(self, a: T, b: T) -> T:
        """a ** b (floating dtypes only)."""
        ...

    def maximum(self, a: T, b: T) -> T:
        """Elementwise max; NaN if either is NaN."""
        ...

    def minimum(self, a: T, b: T) -> T:
        """Elementwise min; NaN if either is NaN."""
        ...

    def atan2(self, a: T, b: T) -> T:
        """atan2(a, b)."""
        ...

    def neg(self, x: T) -> T:
        """-x."""
        ...

    def abs(self, x: T) -> T:
        """|x|."""
        ...

    def reciprocal(self, x: T) -> T:
        """1 / x (floating)."""
        ...

    def sign(self, x: T) -> T:
        """-1, 0 or 1 in x's dtype (0 for NaN is not required: NaN stays NaN)."""
        ...

    # -- math (floating dtypes) ---------------------------------------------------------------
    def exp(self, x: T) -> T:
        """e ** x."""
        ...

    def exp2(self, x: T) -> T:
        """2 ** x."""
        ...

    def expm1(self, x: T) -> T:
        """e ** x - 1."""
        ...

    def log(self, x: T) -> T:
        """Natural log."""
        ...

    def log2(self, x: T) -> T:
        """Base-2 log."""
        ...

    def log10(self, x: T) -> T:
        """Base-10 log."""
        ...

    def log1p(self, x: T) -> T:
        """log(1 + x)."""
        ...

    def sqrt(self, x: T) -> T:
        """Square root."""
        ...

    def rsqrt(self, x: T) -> T:
        """1 / sqrt(x)."""
        ...

    def sin(self, x: T) -> T:
        """Sine."""
        ...

    def cos(self, x: T) -> T:
        """Cosine."""
        ...

    def tan(self, x: T) -> T:
        """Tangent."""
        ...

    def asin(self, x: T) -> T:
        """Arc sine."""
        ...

    def acos(self, x: T) -> T:
        """Arc cosine."""
        ...

    def atan(self, x: T) -> T:
        """Arc tangent."""
        ...

    def sinh(self, x: T) -> T:
        """Hyperbolic sine."""
        ...

    def cosh(self, x: T) -> T:
        """Hyperbolic cosine."""
        ...

    def tanh(self, x: T) -> T:
        """Hyperbolic tangent."""
        ...

    def asinh(self, x: T) -> T:
        """Inverse hyperbolic sine."""
        ...

    def acosh(self, x: T) -> T:
        """Inverse hyperbolic cosine."""
        ...

    def atanh(self, x: T) -> T:
        """Inverse hyperbolic tangent."""
        ...

    def erf(self, x: T) -> T:
        """Error function."""
        ...

    def erfc(self, x: T) -> T:
        """1 - erf(x)."""
        ...

    def lgamma(self, x: T) -> T:
        """log |Gamma(x)|."""
        ...

    def sigmoid(self, x: T) -> T:
        """1 / (1 + e ** -x)."""
        ...

    def relu(self, x: T) -> T:
        """max(x, 0) (NaN stays NaN); any dtype but bool."""
        ...

    def floor(self, x: T) -> T:
        """Round toward negative infinity (floating)."""
        ...

    def ceil(self, x: T) -> T:
        """Round toward positive infinity (floating)."""
        ...

    def trunc(self, x: T) -> T:
        """Round toward zero (floating)."""
        ...

    def round(self, x: T) -> T:
        """Round half to even (floating)."""
        ...

    def isnan(self, x: T) -> T:
        """x != x, as bool."""
        ...

    def isinf(self, x: T) -> T:
        """|x| == inf, as bool."""
        ...

    def signbit(self, x: T) -> T:
        """True where the sign bit is set (also for -0.0), as bool."""
        ...

    # -- comparisons (return bool) ------------------------------------------------------------
    def eq(self, a: T, b: T) -> T:
        """a == b."""
        ...

    def ne(self, a: T, b: T) -> T:
        """a != b."""
        ...

    def lt(self, a: T, b: T) -> T:
        """a < b."""
        ...

    def le(self, a: T, b: T) -> T:
        """a <= b."""
        ...

    def gt(self, a: T, b: T) -> T:
        """a > b."""
        ...

    def ge(self, a: T, b: T) -> T:
        """a >= b."""
        ...

    # -- logical (bool in, bool out) and bitwise (integer or bool) -----------------------------
    def logical_and(self, a: T, b: T) -> T:
        """a and b."""
        ...

    def logical_or(self, a: T, b: T) -> T:
        """a or b."""
        ...

    def logical_xor(self, a: T, b: T) -> T:
        """a != b for bools."""
        ...

    def logical_not(self, x: T) -> T:
        """not x."""
        ...

    def bitwise_and(self, a: T, b: T) -> T:
        """a & b."""
        ...

    def bitwise_or(self, a: T, b: T) -> T:
        """a | b."""
        ...

    def bitwise_xor(self, a: T, b: T) -> T:
        """a ^ b."""
        ...

    def bitwise_not(self, x: T) -> T:
        """~x (logical not for bool)."""
        ...

    def left_shift(self, a: T, b: T) -> T:
        """a << b (integers)."""
        ...

    def right_shift(self, a: T, b: T) -> T:
        """a >> b, arithmetic for signed integers."""
        ...


def _protocol_op_names() -> frozenset[str]:
    return frozenset(
        name for name, value in vars(OpsHandler).items() if callable(value) and not name.startswith("_")
    )


OP_NAMES: frozenset[str] = _protocol_op_names()
"""Every op name in the vocabulary, and nothing else."""


class UnknownOpError(AttributeError):
    """An inner function called ``ops.<name>`` for a name outside the closed vocabulary."""


_CURRENT_HANDLER: contextvars.ContextVar[Any] = contextvars.ContextVar("inductor_ir_ops_handler")


def current_ops_handler() -> Any:
    """The handler installed by the innermost :func:`set_ops_handler`; raises if there is none."""
    try:
        return _CURRENT_HANDLER.get()
    except LookupError:
        raise RuntimeError(
            "ops.* was called with no ops handler installed; wrap the call in `with set_ops_handler(handler):`"
        ) from None


@contextlib.contextmanager
def set_ops_handler(handler: Any) -> Iterator[Any]:
    """Install ``handler`` as the target of ``ops.*`` calls for the duration of the ``with`` block.

    Example::

        with set_ops_handler(MyHandler()):
            node.body(index_vars, reduction_vars)
    """
    token = _CURRENT_HANDLER.set(handler)
    try:
        yield handler
    finally:
        _CURRENT_HANDLER.reset(token)


# One forwarding function per op name (they hold no state: the handler is looked up per call).
_DISPATCHERS: dict[str, Callable[..., Any]] = {}


class _OpsProxy:
    """The single documented context variable: ``ops.sin(x)`` calls ``sin`` on the current handler."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        found = _DISPATCHERS.get(name)
        if found is not None:
            return found
        if name not in OP_NAMES:
            raise UnknownOpError(
                f"ops.{name} is not in the OpsHandler vocabulary; the ops are: {', '.join(sorted(OP_NAMES))}"
            )
        # Late binding: ``fn = ops.sin`` may be taken outside any handler and called inside one.
        def dispatch(*args: Any, **kwargs: Any) -> Any:
            return getattr(current_ops_handler(), name)(*args, **kwargs)

        dispatch.__name__ = name
        _DISPATCHERS[name] = dispatch
        return dispatch

    def __repr__(self) -> str:
        return "<inductor_ir.ops: dispatches to the current OpsHandler>"


ops: OpsHandler[Any] = _OpsProxy()  # type: ignore[assignment]
"""Where inner functions reach the current handler: ``ops.load(name, index)``, ``ops.add(a, b)``, ...

Typed as the `OpsHandler` protocol (the proxy forwards every op of it), so the type checker sees
every ``ops.*`` call against the vocabulary's signatures."""


def verify_ops_handler(handler: object) -> None:
    """Raise ``TypeError`` naming every vocabulary op ``handler`` (an instance or class) does not implement."""
    missing = sorted(name for name in OP_NAMES if not callable(getattr(handler, name, None)))
    if missing:
        name = handler.__name__ if isinstance(handler, type) else type(handler).__name__
        raise TypeError(f"{name} does not implement the ops: {', '.join(missing)}")
