"""Split Welford reductions: a long reduction to few outputs becomes two reductions.

Batch-norm statistics reduce 10^5..10^7 elements into a few dozen channels: as one reduction, a
GPU runs one program per channel block while most of it idles. Here the range is cut into ``split``
equal chunks: the first ``welford_reduce`` computes (mean, m2) per (output, chunk), with many
independent rows for any backend to run in parallel; the second, ``welford_combine``, merges the
``split`` partial triples of each output (every chunk's weight is the chunk length) by Chan's
formula. Both are ordinary ``Reduction`` nodes; the split is exact (no masking: the chunk length
divides the range).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from inductor_ir.ir.nodes import Reduction
from inductor_ir.lowering.registry import LoweringContext
from inductor_ir.ops_handler import ops
from inductor_ir.symbolic import FloorDiv, ModularIndexing

__all__ = ["split_factor", "split_welford"]

Index = Sequence[sympy.Expr]

TARGET_ROWS = 1024  # rows of the first reduction: enough parallel work for a GPU or many cores
MIN_RANGE = 8192  # shorter reductions stay whole
MIN_CHUNK = 1024


def split_factor(outputs: sympy.Expr, length: sympy.Expr) -> int:
    """How many chunks to cut a reduction of ``length`` per output into (1: keep it whole).

    Static sizes only; the factor divides ``length`` and leaves chunks of at least ``MIN_CHUNK``.
    """
    if not (isinstance(outputs, sympy.Integer) and isinstance(length, sympy.Integer)):
        return 1
    xnumel, rnumel = int(outputs), int(length)
    if rnumel < MIN_RANGE or xnumel * 2 > TARGET_ROWS:
        return 1
    want = -(-TARGET_ROWS // max(xnumel, 1))
    for split in range(want, 2 * want + 1):
        if rnumel % split == 0 and rnumel // split >= MIN_CHUNK:
            return split
    for split in range(want - 1, 1, -1):  # fewer, longer chunks
        if rnumel % split == 0 and rnumel // split >= MIN_CHUNK:
            return split
    return 1


def _delinearize(linear: sympy.Expr, sizes: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    if len(sizes) == 1:
        return [linear]
    strides = [sympy.Mul(*sizes[k + 1 :]) for k in range(len(sizes))]
    return [FloorDiv(linear, strides[0])] + [ModularIndexing(linear, s, n) for s, n in zip(strides[1:], sizes[1:])]


def split_welford(ctx: LoweringContext, whole: Reduction, split: int) -> Reduction:
    """The ``welford_combine`` reduction equal to ``whole`` (a ``welford_reduce``), in two stages.

    Returns the second stage (``output_index`` unset: callers pick 0, 1, 2 with ``dataclasses.replace``).
    """
    rranges = whole.reduction_ranges
    chunk = sympy.Mul(*rranges) / split
    assert chunk.is_Integer
    inner, ranges = whole.inner_fn, whole.ranges

    def chunk_inner(index: Index, rindex: Index) -> Any:
        position = index[-1] * chunk + rindex[0]
        return inner(index[:-1], _delinearize(position, rranges))

    partial = _partial_dtype(whole)
    first = Reduction(chunk_inner, (*ranges, sympy.Integer(split)), (chunk,), "welford_reduce", partial,
                      whole.src_dtype, whole.device, whole.origins)  # fmt: skip
    mean, m2 = (ctx.realize(dataclasses.replace(first, output_index=k)).make_loader() for k in (0, 1))

    def combine_inner(index: Index, rindex: Index) -> Any:
        at = [*index, rindex[0]]
        return (mean(at), m2(at), ops.constant(float(chunk), partial))

    return Reduction(combine_inner, ranges, (sympy.Integer(split),), "welford_combine", whole.dtype, partial,
                     whole.device, whole.origins)  # fmt: skip


def _partial_dtype(whole: Reduction) -> torch.dtype:
    """The dtype the partial (mean, m2) pairs are stored in: float64 for float32 statistics on the CPU,
    where a float32 m2 of large-mean data loses digits eager keeps (eager's CPU variance runs in double);
    the statistics' own dtype elsewhere (float64 is slow on GPUs)."""
    return torch.float64 if whole.device == "cpu" and whole.dtype == torch.float32 else whole.dtype
