"""`torch.Size` values in the traced region: ``x.shape``, ``x.size()``, slices and sums of them.

A `SizeVariable` is a tuple tracker whose Python type is `torch.Size`: its items are constants, or
`SymNodeVariable`s for dynamic dims. ``numel()`` multiplies them (a SymInt node when symbolic);
slicing it and ``size + tuple`` give a `SizeVariable` again, as eager's `torch.Size` does.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch

from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.containers import TupleVariable

if TYPE_CHECKING:
    from capture.sources import Source
    from capture.variables.tracer import Tracer


class SizeVariable(TupleVariable):
    """A `torch.Size` of constant and symbolic sizes."""

    def __init__(self, items: list[VariableTracker], source: Source | None = None) -> None:
        super().__init__(items, source, cls=torch.Size)

    def python_type(self) -> type:
        return torch.Size

    def is_constant(self) -> bool:
        return all(item.is_constant() for item in self.items)

    def as_constant(self) -> Any:
        return torch.Size([int(item.as_constant()) for item in self.items])

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name in ("numel", "index", "count"):
            return SizeMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of a torch.Size")

    def __repr__(self) -> str:
        return f"SizeVariable({self.items})"


class SizeMethodVariable(VariableTracker):
    """A bound method of a traced `torch.Size` (`numel`, `index`, `count`)."""

    def __init__(self, size: SizeVariable, name: str) -> None:
        self.size = size
        self.name = name

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if kwargs:
            raise Unsupported(f"torch.Size.{self.name}() with keyword arguments", user_error=True)
        if self.name == "numel":
            if args:
                raise Unsupported("torch.Size.numel() takes no arguments", user_error=True)
            product: VariableTracker = ConstantVariable(1)
            for item in self.size.items:
                product = tx.apply_operator(operator.mul, [product, item])
            return product
        items = [item.as_constant() for item in self.size.items]  # index/count specialize the sizes
        try:
            return ConstantVariable(getattr(tuple(items), self.name)(*[a.as_constant() for a in args]))
        except ValueError as error:
            raise Unsupported(f"ValueError: {error}", user_error=True) from error

    def __repr__(self) -> str:
        return f"SizeMethodVariable({self.name})"


def is_size(value: VariableTracker) -> bool:
    """True for a traced torch.Size (or a constant one)."""
    return isinstance(value, SizeVariable) or (isinstance(value, ConstantVariable)
                                               and isinstance(value.value, torch.Size))
