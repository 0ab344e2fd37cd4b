"""Lowerings from ATen ops to IR, registered per op family beside their definitions.

Importing this package fills ``LOWERINGS`` (``OpOverload`` -> lowering function).
"""

from inductor_ir.lowering import (  # noqa: F401
    creation,
    extern,
    indexing,
    linspace,
    misc,
    pointwise,
    pooling,
    reductions,
    scatter,
    views,
)
from inductor_ir.lowering.registry import LOWERINGS, Lowering, LoweringContext, NotLowerable, lowering

__all__ = ["LOWERINGS", "Lowering", "LoweringContext", "NotLowerable", "lowering"]
