"""The generator's workbench: a program under construction whose every statement has really run.

Each grammar rule proposes a statement through `Builder.try_add`, which executes it eagerly on the
CPU values of everything defined so far (so only well-typed, eager-accepted statements survive:
PyTorch itself is the type checker) and rolls the program back when eager rejects it. New inputs
are made on demand with the shape a rule needs (a matmul's weight, a broadcastable operand, an
index tensor), in a random layout: contiguous, transposed, permuted, sliced with a step, offset,
expanded, channels-last, overlapping another input, the same tensor passed twice, self-overlapping,
a copy computed before the call (an activation, not a leaf: eager allows in-place updates of it
where it refuses them on a leaf that requires grad).
"""

from __future__ import annotations

import dataclasses
import math
import random
import warnings
from collections.abc import Callable
from typing import Any

import torch

from tools.fuzz import harness
from tools.fuzz.program import Leaf, Param, Program, Stmt

DTYPE_WEIGHTS: dict[str, float] = {
    "float32": 0.30,
    "float64": 0.07,
    "float16": 0.08,
    "bfloat16": 0.08,
    "int64": 0.10,
    "int32": 0.08,
    "int16": 0.06,
    "int8": 0.06,
    "uint8": 0.08,
    "bool": 0.08,
}
FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("uint8", "int8", "int16", "int32", "int64")
SIZES = (1, 1, 2, 3, 4, 5, 7, 8, 16, 17, 33, 37, 64, 129)
LARGE_SIZES = (257, 1031, 2053)
MAX_NUMEL = 150_000
"""Candidates making a bigger tensor are rejected: eager, float64 and Triton's interpreter stay fast."""


def dtype_of(name: str) -> torch.dtype:
    """The torch dtype called `name` ("float16" -> torch.float16)."""
    dtype = getattr(torch, name)
    assert isinstance(dtype, torch.dtype)
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    """The inverse of `dtype_of`."""
    return str(dtype).removeprefix("torch.")


@dataclasses.dataclass(frozen=True)
class _Snapshot:
    """Where `Builder.restore` goes back to."""

    leaves: int
    params: int
    stmts: int
    counter: int
    values: dict[str, Any]


class Builder:
    """A program being generated, with the eager value of every name in it.

    Args:
        rng: the program's random source (everything is drawn from it, so a seed is a program).
        mode: "no_grad", "grad" or "double" (see `harness.run`).
        seed: the program's seed, recorded in it.
        leaf_seed: the seed of its first leaf (the next ones count up).
    """

    def __init__(self, rng: random.Random, mode: str, seed: int, leaf_seed: int = 0) -> None:
        self.rng = rng
        self.mode = mode
        self.seed = seed
        self.leaf_seed = leaf_seed
        self.leaves: list[Leaf] = []
        self.params: list[Param] = []
        self.stmts: list[Stmt] = []
        self.values: dict[str, Any] = {}
        self.leaf_values: dict[str, torch.Tensor] = {}
        self.counter = 0
        self.stopped = False  # a statement raised on purpose: nothing after it can be validated
        self.namespace: dict[str, Any] = {"torch": torch, "F": torch.nn.functional}

    # ----- names and values -------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        """A new variable name."""
        self.counter += 1
        return f"{prefix}{self.counter}"

    def tensor(self, name: str) -> torch.Tensor:
        """The eager value of `name`."""
        value = self.values[name]
        assert isinstance(value, torch.Tensor)
        return value

    def names(self, pred: Callable[[torch.Tensor], bool] | None = None) -> list[str]:
        """Every defined name (arguments and statement results) whose value satisfies `pred`."""
        return [n for n, v in self.values.items() if isinstance(v, torch.Tensor) and (pred is None or pred(v))]

    def pick(self, pred: Callable[[torch.Tensor], bool] | None = None) -> str | None:
        """A defined name satisfying `pred`, recent ones more likely (programs become chains, not bags)."""
        names = self.names(pred)
        if not names:
            return None
        weights = [1.0 + 2.0 * i / len(names) for i in range(len(names))]
        return self.rng.choices(names, weights)[0]

    # ----- transactions -----------------------------------------------------------------------
    def snapshot(self) -> _Snapshot:
        """The state to return to when a proposed statement is rejected."""
        return _Snapshot(len(self.leaves), len(self.params), len(self.stmts), self.counter, dict(self.values))

    def restore(self, snap: _Snapshot) -> None:
        """Forget everything after `snap` (values mutated in place by a rejected statement stay mutated;
        `generator.generate` validates the finished program on fresh inputs)."""
        for leaf in self.leaves[snap.leaves :]:
            self.leaf_values.pop(leaf.name, None)
        del self.leaves[snap.leaves :]
        del self.params[snap.params :]
        del self.stmts[snap.stmts :]
        self.counter = snap.counter
        self.values = snap.values

    def grad_context(self) -> Any:
        """Autograd on in the grad modes, off for inference programs."""
        return torch.no_grad() if self.mode == "no_grad" else torch.enable_grad()

    def try_add(self, op: str, template: str, args: tuple[str, ...], inplace: bool = False, may_raise: bool = False) -> bool:
        """Run ``template.format(*args)`` eagerly; keep it as a statement when eager accepts it.

        A `may_raise` statement that raises is kept (its exception is the test) and ends the program.
        """
        if self.stopped:
            return False
        out = self.fresh("t")
        stmt = Stmt(out, op, template, args, inplace, may_raise)
        scope = {**self.namespace, **self.values}
        try:
            with self.grad_context(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = eval(stmt.expression(), scope)
        except Exception:
            if not may_raise:
                return False
            self.stmts.append(stmt)
            self.stopped = True
            return True
        if not isinstance(value, torch.Tensor) or value.numel() > MAX_NUMEL or value.is_complex():
            return False
        self.stmts.append(stmt)
        self.values[out] = value
        return True

    # ----- inputs -----------------------------------------------------------------------------
    def random_dtype(self, among: tuple[str, ...] | None = None) -> str:
        """A dtype name, weighted towards float32 and the integer types."""
        names = list(among or DTYPE_WEIGHTS)
        return self.rng.choices(names, [DTYPE_WEIGHTS[n] for n in names])[0]

    def random_shape(self, max_dims: int = 4) -> tuple[int, ...]:
        """A shape: 0-d to 4-d, small odd sizes, sometimes a large odd one or an empty dimension."""
        ndim = self.rng.choices(range(5), [0.08, 0.3, 0.35, 0.17, 0.1])[0]
        ndim = min(ndim, max_dims)
        shape = [self.rng.choice(SIZES) for _ in range(ndim)]
        if shape and self.rng.random() < 0.12:
            shape[self.rng.randrange(len(shape))] = self.rng.choice(LARGE_SIZES)
        if shape and self.rng.random() < 0.04:
            shape[self.rng.randrange(len(shape))] = 0
        while math.prod(shape) > MAX_NUMEL // 4:
            biggest = shape.index(max(shape))
            shape[biggest] = max(1, shape[biggest] // 4)
        return tuple(shape)

    def broadcastable_to(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts against `shape`: some leading dimensions dropped, some set to 1."""
        out = list(shape)
        if out and self.rng.random() < 0.3:
            out = out[self.rng.randrange(len(out) + 1) :]
        return tuple(1 if self.rng.random() < 0.25 else s for s in out)

    def fill_for(self, dtype: str) -> str:
        """How to fill a leaf of `dtype` (see `harness.make_leaf`)."""
        if dtype in FLOATS:
            return self.rng.choices(["normal", "wide", "positive", "special"], [0.7, 0.08, 0.12, 0.1])[0]
        if dtype == "bool":
            return "normal"
        return self.rng.choices(["small", "full"], [0.6, 0.4])[0]

    def _add_leaf(self, shape: tuple[int, ...], dtype: str, fill: str, channels_last: bool = False,
                  requires_grad: bool | None = None) -> str:
        name = f"l{len(self.leaves)}_{self.counter}"
        self.counter += 1
        wants = self.rng.random() < 0.8 if requires_grad is None else requires_grad
        requires_grad = self.mode != "no_grad" and dtype in FLOATS and wants
        leaf = Leaf(name, shape, dtype, fill, self.leaf_seed + len(self.leaves), channels_last, requires_grad)
        self.leaves.append(leaf)
        self.leaf_values[name] = eval(leaf.render(), {"torch": torch, "make_leaf": harness.make_leaf, "ref": False, "grow": 0, "relayout": False})
        return name

    def _add_param(self, leaf: str, view: str) -> str:
        param = Param(self.fresh("a"), leaf, view)
        self.params.append(param)
        with self.grad_context():
            self.values[param.name] = eval(param.render(), {"torch": torch, leaf: self.leaf_values[leaf]})
        return param.name

    def new_input(self, shape: tuple[int, ...], dtype: str | None = None, fill: str | None = None,
                  layout: str | None = None, requires_grad: bool | None = None) -> str:
        """A new argument of exactly `shape`, of `dtype` (random when None), in `layout` (random when None).

        `requires_grad` (in the grad modes, for floats) is random when None."""
        dtype = dtype or self.random_dtype()
        fill = fill or self.fill_for(dtype)
        ndim = len(shape)
        layouts = {
            "contiguous": 0.45,
            "transposed": 0.12 if ndim >= 2 else 0.0,
            "stepped": 0.1 if ndim >= 1 else 0.0,
            "offset": 0.06 if ndim >= 1 else 0.0,
            "expanded": 0.08 if any(s > 1 for s in shape) else 0.0,
            "channels_last": 0.08 if ndim == 4 else 0.0,
            "overlap": 0.06 if ndim >= 1 and shape[0] > 0 else 0.0,
            "twice": 0.05,
            "self_overlap": 0.04 if ndim == 2 and 0 < shape[1] <= 64 else 0.0,
            "activation": 0.06,
        }
        layout = layout or self.rng.choices(list(layouts), list(layouts.values()))[0]
        if layout == "twice":
            same = [p for p in self.params if self.values.get(p.name) is not None
                    and tuple(self.tensor(p.name).shape) == shape and self.leaf_dtype(p.leaf) == dtype]
            if same:
                original = self.rng.choice(same)
                return self._add_param(original.leaf, original.view)
            layout = "contiguous"
        return self._new_leaf_param(shape, dtype, fill, layout, requires_grad)

    def leaf_dtype(self, leaf_name: str) -> str:
        """The dtype name of a leaf."""
        return next(leaf.dtype for leaf in self.leaves if leaf.name == leaf_name)

    def _new_leaf_param(self, shape: tuple[int, ...], dtype: str, fill: str, layout: str, requires_grad: bool | None) -> str:
        rng, ndim = self.rng, len(shape)
        if requires_grad is not None:
            return self._add_param(self._add_leaf(shape, dtype, fill, requires_grad=requires_grad), "{0}")
        if layout == "transposed":
            if ndim >= 3 and rng.random() < 0.5:
                perm = list(range(ndim))
                rng.shuffle(perm)
                leaf_shape = [0] * ndim
                for k, p in enumerate(perm):
                    leaf_shape[p] = shape[k]
                return self._add_param(self._add_leaf(tuple(leaf_shape), dtype, fill), "{0}.permute" + repr(tuple(perm)))
            i, j = rng.sample(range(ndim), 2)
            leaf_shape = list(shape)
            leaf_shape[i], leaf_shape[j] = shape[j], shape[i]
            return self._add_param(self._add_leaf(tuple(leaf_shape), dtype, fill), f"{{0}}.transpose({i}, {j})")
        if layout == "stepped":
            d, step = rng.randrange(ndim), rng.choice((2, 3))
            leaf_shape = list(shape)
            leaf_shape[d] = shape[d] * step
            index = ", ".join([":"] * d + [f"::{step}"])
            return self._add_param(self._add_leaf(tuple(leaf_shape), dtype, fill), f"{{0}}[{index}]")
        if layout == "offset":
            d = rng.randrange(ndim)
            leaf_shape = list(shape)
            leaf_shape[d] += 2
            index = ", ".join([":"] * d + ["1:-1"])
            return self._add_param(self._add_leaf(tuple(leaf_shape), dtype, fill), f"{{0}}[{index}]")
        if layout == "expanded":
            small = tuple(1 if s > 1 and rng.random() < 0.6 else s for s in shape)
            if small == shape:
                small = tuple(1 if s > 1 else s for s in shape)
            lead = rng.randrange(2) if len(small) > 1 and small[0] == 1 else 0
            view = f"{{0}}.expand{tuple(shape)!r}"
            return self._add_param(self._add_leaf(small[lead:], dtype, fill), view)
        if layout == "channels_last":
            return self._add_param(self._add_leaf(shape, dtype, fill, channels_last=True), "{0}")
        if layout == "activation":  # not a leaf: a value computed before the call (in-place updates allowed)
            return self._add_param(self._add_leaf(shape, dtype, fill), "{0}.clone()")
        if layout == "overlap":
            leaf = self._add_leaf((shape[0] + 1, *shape[1:]), dtype, fill)
            other = self._add_param(leaf, "{0}[:-1]")  # an extra argument sharing all but one row
            del other
            return self._add_param(leaf, "{0}[1:]")
        if layout == "self_overlap":
            n, k = shape
            leaf = self._add_leaf((n + k - 1,), dtype, fill)
            return self._add_param(leaf, f"{{0}}.as_strided(({n}, {k}), (1, 1))")
        return self._add_param(self._add_leaf(shape, dtype, fill), "{0}")

    # ----- literals ---------------------------------------------------------------------------
    def scalar(self, dtype: torch.dtype, nonzero: bool = False) -> str:
        """A Python scalar literal suited to a tensor of `dtype` (sometimes deliberately not)."""
        rng = self.rng
        if dtype == torch.bool and rng.random() < 0.5:
            return rng.choice(["True", "False"])
        if dtype.is_floating_point and rng.random() < 0.7:
            value = rng.choice([0.5, -1.5, 2.0, 3.25, -0.125, 1e-3, 100.0, 0.0])
            if nonzero and value == 0.0:
                value = 0.75
            return repr(value)
        value_int = rng.choice([1, 2, 3, 5, 7, -1, -3, 0, 127, 300, -129])
        if nonzero and value_int == 0:
            value_int = 3
        if dtype == torch.uint8 and value_int < 0 and rng.random() < 0.7:
            value_int = -value_int
        return repr(value_int)


def finish(builder: Builder, outputs: list[str], notes: tuple[str, ...] = ()) -> Program:
    """The immutable program the builder holds, returning `outputs`."""
    return Program(
        seed=builder.seed,
        mode=builder.mode,
        leaves=tuple(builder.leaves),
        params=tuple(builder.params),
        stmts=tuple(builder.stmts),
        outputs=tuple(outputs),
        notes=notes,
    )

