"""`TorchOpsHandler`: evaluates ``ops`` calls on whole torch tensors at once.

Index variables are integer tensors shaped to broadcast over the iteration space (``arange(n)``
along its own dim, size 1 elsewhere), so one call of a body computes every element. Used by
:func:`inductor_ir.interpret` and by test backends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import sympy
import torch

from inductor_ir.ir.checks import IndexCheck
from inductor_ir.ops_handler import OP_NAMES
from inductor_ir.symbolic import FloorDiv, ModularIndexing

__all__ = ["TorchOpsHandler", "eval_index"]

Value = Any  # torch.Tensor or a Python int


def eval_index(expr: sympy.Expr, env: Mapping[sympy.Symbol, Value]) -> Value:
    """Evaluate an index expression with symbols bound to ints or integer tensors."""
    if expr.is_Integer:
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        try:
            return env[expr]
        except KeyError:
            raise KeyError(f"no value for symbol {expr} in index expression") from None
    if isinstance(expr, sympy.Add):
        total: Value = 0
        for term in expr.args:
            total = total + eval_index(term, env)
        return total
    if isinstance(expr, sympy.Mul):
        product: Value = 1
        for factor in expr.args:
            product = product * eval_index(factor, env)
        return product
    if isinstance(expr, sympy.Pow) and expr.args[1].is_Integer and int(expr.args[1]) >= 0:
        return eval_index(expr.args[0], env) ** int(expr.args[1])
    if isinstance(expr, FloorDiv):
        return eval_index(expr.args[0], env) // eval_index(expr.args[1], env)
    if isinstance(expr, ModularIndexing):
        base, div, mod = (eval_index(a, env) for a in expr.args)
        return (base // div) % mod
    if isinstance(expr, sympy.Mod):
        return eval_index(expr.args[0], env) % eval_index(expr.args[1], env)
    if isinstance(expr, (sympy.Min, sympy.Max)):
        values = [eval_index(a, env) for a in expr.args]
        pick = torch.minimum if isinstance(expr, sympy.Min) else torch.maximum
        result = values[0]
        for v in values[1:]:
            if isinstance(result, int) and isinstance(v, int):
                result = min(result, v) if isinstance(expr, sympy.Min) else max(result, v)
            else:
                result = pick(torch.as_tensor(result), torch.as_tensor(v))
        return result
    if isinstance(expr, sympy.floor) and isinstance(expr.args[0], sympy.Mul):
        num, den = sympy.fraction(expr.args[0])
        return eval_index(num, env) // eval_index(den, env)
    raise NotImplementedError(f"index expression {expr} ({type(expr).__name__}) is not supported")


_MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def _srl(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _mix64(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finalizer on int64 tensors (wrapping arithmetic)."""
    x = (x ^ _srl(x, 30)) * _signed(0xBF58476D1CE4E5B9)
    x = (x ^ _srl(x, 27)) * _signed(0x94D049BB133111EB)
    return x ^ _srl(x, 31)


def uniform_from(seed: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """The interpreter's counter-based generator: float32 in [0, 1) from (seed, offset)."""
    x = _mix64(torch.as_tensor(seed, dtype=torch.int64) * _signed(0x9E3779B97F4A7C15) + torch.as_tensor(offset, dtype=torch.int64))
    return _srl(x, 40).to(torch.float32) * (1.0 / (1 << 24))


class TorchOpsHandler:
    """Evaluates ops on torch tensors.

    Args:
        buffers: name -> flat 1-D tensor whose element k is the buffer's element at index k.
        env: symbol -> int or index tensor (size symbols and iteration variables).
        reduce_dims: how many trailing dims of the iteration space ``ops.reduction`` reduces.
    """

    def __init__(
        self,
        buffers: MutableMapping[str, torch.Tensor],
        env: dict[sympy.Symbol, Value],
        full_shape: tuple[int, ...] = (),
        reduce_dims: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        self.buffers = buffers
        self.env = env
        self.full_shape = full_shape
        self.reduce_dims = reduce_dims
        self.device = torch.device(device)
        self._masks: list[torch.Tensor] = []
        self._indirect = 0
        self.stored: dict[str, tuple[sympy.Expr, torch.Tensor]] = {}

    def _tensor(self, value: Value, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.as_tensor(value, dtype=dtype, device=self.device)

    # -- memory -------------------------------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> torch.Tensor:
        """Gather ``buffers[name][index]`` (masked lanes read element 0)."""
        flat = self.buffers[name]
        idx = self._tensor(eval_index(index, self.env), torch.int64)
        if self._masks:
            idx = torch.where(self._masks[-1], idx, 0)
        if flat.numel() == 0:
            return torch.zeros(idx.shape, dtype=flat.dtype, device=flat.device)
        return flat[idx]

    def store(self, name: str, index: sympy.Expr, value: torch.Tensor, mode: str | None = None) -> None:
        """Scatter ``value`` to ``buffers[name][index]`` over the whole iteration space."""
        self._scatter(name, index, value)

    def store_reduction(self, name: str, index: sympy.Expr, value: torch.Tensor) -> None:
        """Scatter a reduced value (its reduced dims have size 1)."""
        self._scatter(name, index, value)

    def _scatter(self, name: str, index: sympy.Expr, value: torch.Tensor) -> None:
        flat = self.buffers[name]
        idx, value = torch.broadcast_tensors(self._tensor(eval_index(index, self.env), torch.int64), self._tensor(value))
        if flat.numel():
            flat[idx.reshape(-1)] = value.reshape(-1).to(flat.dtype)
        self.stored[name] = (index, value)

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: torch.Tensor) -> Any:
        """Reduce over the trailing ``reduce_dims`` dims of the iteration space.

        ``welford_reduce`` returns ``(mean, m2, weight)``, computed here in float64 by two passes
        (the reference the one-pass code generators are compared with).
        """
        keep = self.full_shape[: len(self.full_shape) - self.reduce_dims]
        if reduction_type == "welford_combine":
            return self._welford_combine(dtype, value, keep)
        value = self._tensor(value).expand(self.full_shape)
        reduced = 1
        for n in self.full_shape[len(keep) :]:
            reduced *= n
        flat = value.reshape((*keep, reduced))  # explicit: -1 is ambiguous when keep has a 0
        shape = (*keep, *([1] * self.reduce_dims))
        if reduced == 0 and reduction_type in ("max", "min", "argmax", "argmin"):
            # An empty range reduces to the identity (what a kernel's initialized accumulator holds).
            low = reduction_type in ("max", "argmax")
            if reduction_type.startswith("arg"):
                fill: float | int = 0
            elif dtype.is_floating_point:
                fill = float("-inf") if low else float("inf")
            else:
                info = torch.iinfo(dtype) if dtype != torch.bool else None
                fill = (info.min if low else info.max) if info is not None else (not low)
            return torch.full(shape, fill, dtype=dtype, device=flat.device)
        if reduction_type == "welford_reduce":
            wide = flat.to(torch.float64)
            mean = wide.mean(-1, keepdim=True)
            m2 = (wide - mean).square().sum(-1)
            weight = torch.full_like(m2, flat.shape[-1])
            return tuple(t.to(dtype).reshape(shape) for t in (mean.squeeze(-1), m2, weight))
        if reduction_type == "sum":
            result = flat.sum(-1, dtype=dtype)
        elif reduction_type == "prod":
            result = flat.prod(-1, dtype=dtype)
        elif reduction_type == "max":
            result = flat.amax(-1)
        elif reduction_type == "min":
            result = flat.amin(-1)
        elif reduction_type == "argmax":
            result = flat.argmax(-1)
        elif reduction_type == "argmin":
            result = flat.argmin(-1)
        elif reduction_type == "any":
            result = flat.any(-1)
        else:
            raise ValueError(f"unknown reduction type {reduction_type!r}")
        # Re-insert the reduced dims as size 1 so the result broadcasts like an index tensor.
        return result.to(dtype).reshape(shape)

    def _welford_combine(self, dtype: torch.dtype, value: Any, keep: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
        """Merge partial (mean, m2, weight) triples over the reduced dims (float64, closed form)."""
        mean, m2, weight = (self._tensor(v).expand(self.full_shape).reshape((*keep, -1)).to(torch.float64) for v in value)
        total = weight.sum(-1, keepdim=True)
        merged = (weight * mean).sum(-1, keepdim=True) / total
        spread = (m2 + weight * (mean - merged).square()).sum(-1)
        shape = (*keep, *([1] * self.reduce_dims))
        return tuple(t.to(dtype).reshape(shape) for t in (merged.squeeze(-1), spread, total.squeeze(-1)))

    def indirect_indexing(
        self, x: torch.Tensor, size: sympy.Expr, check: bool | IndexCheck = True, wrap_neg: bool = True
    ) -> sympy.Symbol:
        """Bind a fresh symbol to the (wrapped, clamped) integer values of ``x``; with ``check``, a value
        outside the range (where the current mask holds) raises what eager raises."""
        symbol = sympy.Symbol(f"indirect{self._indirect}", integer=True)
        self._indirect += 1
        bound = int(eval_index(sympy.sympify(size), self.env))
        original = self._tensor(x).to(torch.int64)
        values = torch.where(original < 0, original + bound, original) if wrap_neg else original
        if check:
            bad = (values < 0) | (values >= bound)
            if self._masks:
                bad = bad & self._masks[-1]
            if bool(bad.any()):
                failure = check if isinstance(check, IndexCheck) else IndexCheck()
                value = int(torch.broadcast_to(original, bad.shape)[bad].reshape(-1)[0])
                raise failure.exception(value, bound)
        self.env[symbol] = values.clamp(0, max(bound - 1, 0))
        return symbol

    def masked(self, mask: torch.Tensor, body: Callable[[], torch.Tensor], other: bool | int | float) -> torch.Tensor:
        """``body()`` where ``mask``, else ``other``."""
        mask = self._tensor(mask).to(torch.bool)
        combined = mask if not self._masks else (mask & self._masks[-1])
        self._masks.append(combined)
        try:
            result = self._tensor(body())
        finally:
            self._masks.pop()
        return torch.where(mask, result, self._tensor(other, result.dtype))

    # -- leaves --------------------------------------------------------------------------------
    def constant(self, value: bool | int | float, dtype: torch.dtype) -> torch.Tensor:
        """A 0-d tensor."""
        return self._tensor(value, dtype)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> torch.Tensor:
        """The index expression's values."""
        return self._tensor(eval_index(expr, self.env), torch.int64).to(dtype)

    def to_dtype(self, x: torch.Tensor, dtype: torch.dtype, src_dtype: torch.dtype | None = None) -> torch.Tensor:
        """``x.to(dtype)``."""
        return self._tensor(x).to(dtype)

    def where(self, condition: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``torch.where``."""
        return torch.where(self._tensor(condition), self._tensor(a), self._tensor(b))

    def rand(self, seed: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        """Uniform [0, 1) from splitmix64 of (seed, offset)."""
        return uniform_from(seed, offset)

    def randn(self, seed: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        """Standard normal by Box-Muller from two uniforms."""
        u1 = uniform_from(seed, torch.as_tensor(offset, dtype=torch.int64) * 2)
        u2 = uniform_from(seed, torch.as_tensor(offset, dtype=torch.int64) * 2 + 1)
        radius = torch.sqrt(-2.0 * torch.log1p(-u1))
        return radius * torch.cos(2 * torch.pi * u2)

    def sign(self, x: torch.Tensor) -> torch.Tensor:
        """-1, 0 or 1 (NaN stays NaN)."""
        return torch.sign(self._tensor(x))

    def truncdiv(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Division rounded toward zero."""
        return torch.div(self._tensor(a), self._tensor(b), rounding_mode="trunc")

    def floordiv(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Division rounded toward negative infinity."""
        return torch.div(self._tensor(a), self._tensor(b), rounding_mode="floor")


_TORCH_FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "truediv": torch.true_divide,
    "remainder": torch.remainder, "fmod": torch.fmod, "pow": torch.pow, "maximum": torch.maximum,
    "minimum": torch.minimum, "atan2": torch.atan2, "neg": torch.neg, "abs": torch.abs,
    "reciprocal": torch.reciprocal, "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1,
    "log": torch.log, "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p,
    "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh,
    "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh, "acosh": torch.acosh,
    "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc, "lgamma": torch.lgamma,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "floor": torch.floor, "ceil": torch.ceil,
    "trunc": torch.trunc, "round": torch.round, "isnan": torch.isnan, "isinf": torch.isinf,
    "signbit": torch.signbit, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
    "gt": torch.gt, "ge": torch.ge, "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor, "logical_not": torch.logical_not,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor, "bitwise_not": torch.bitwise_not,
    "left_shift": torch.bitwise_left_shift, "right_shift": torch.bitwise_right_shift,
}  # fmt: skip


def _elementwise(op_name: str, fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def method(self: TorchOpsHandler, *args: Any) -> torch.Tensor:
        return fn(*[self._tensor(a) for a in args])

    method.__name__ = op_name
    method.__doc__ = f"``{getattr(fn, '__name__', op_name)}`` on tensors."
    return method


for _name, _fn in _TORCH_FUNCTIONS.items():
    if not hasattr(TorchOpsHandler, _name):
        setattr(TorchOpsHandler, _name, _elementwise(_name, _fn))

_missing = OP_NAMES - {n for n in OP_NAMES if hasattr(TorchOpsHandler, n)}
assert not _missing, f"TorchOpsHandler misses {_missing}"
