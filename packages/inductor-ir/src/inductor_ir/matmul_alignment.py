"""Matrix products with sizes that are not multiples of 8 (16-bit dtypes): pad them for cuBLAS.

cuBLAS runs its fast kernels only when the matrices' contiguous extents are multiples of 16 bytes.
A language model's head has a vocabulary of 50,257 words: in bf16 its product runs an unaligned
kernel about seven times slower (3.4 ms instead of 0.45 ms for GPT-2 at batch 8 x 512 on an H200).
The wrapper calls :func:`aligned_matmul` for such products: the operands are copied into
zero-padded matrices whose sizes are multiples of 8 (zeros add nothing to the products), the
padded product is computed, and the result is its top-left corner (``ensure_layout`` copies it to
the layout the graph expects when the corner is not contiguous). The copies cost a fraction of
what the unaligned kernel loses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["MatmulPadding", "aligned_matmul", "matmul_padding"]

_MULTIPLE = 8  # elements: 16 bytes of a 16-bit dtype
_MIN_MACS = 2**30  # smaller products: the copies' launches cost more than the kernel loses
_MATMULS = {"mm": (0, 1), "addmm": (1, 2), "bmm": (0, 1)}  # positions of the two matrix operands


@dataclass(frozen=True)
class MatmulPadding:
    """The padded sizes ``(M, K, N)`` of a matrix product (each a multiple of 8, or unchanged)."""

    m: int
    k: int
    n: int


def _round_up(value: int) -> int:
    return -(-value // _MULTIPLE) * _MULTIPLE


def matmul_padding(
    op_name: str,
    operands: Sequence[tuple[Sequence[int], Sequence[int]] | None],
    output_size: Sequence[int],
    dtype: torch.dtype,
) -> MatmulPadding | None:
    """How to pad a CUDA ``mm``/``addmm``/``bmm`` call with static sizes, or None to leave it.

    Args:
        op_name: the ATen op's name (``"mm"``, ``"addmm"``, ``"bmm"``; others give None).
        operands: (size, stride) of each positional argument that is a tensor, else None.
        output_size: the product's size.
        dtype: the product's dtype (only float16 and bfloat16 are padded).
    """
    positions = _MATMULS.get(op_name)
    if positions is None or dtype not in (torch.float16, torch.bfloat16) or len(operands) <= max(positions):
        return None
    first, second = operands[positions[0]], operands[positions[1]]
    if first is None or second is None:
        return None
    m, k, n = first[0][-2], first[0][-1], second[0][-1]
    batch = 1
    for size in output_size[:-2]:
        batch *= size
    if batch * m * n * k < _MIN_MACS:
        return None
    # M matters only when the first operand is stored transposed (M is then its contiguous extent).
    first_transposed = first[1][-1] != 1 and first[1][-2] == 1
    padded = MatmulPadding(_round_up(m) if first_transposed else m, _round_up(k), _round_up(n))
    if (padded.m, padded.k, padded.n) == (m, k, n):
        return None
    return padded


def _pad_to(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """``t`` zero-padded in its last two dims to ``(rows, cols)`` (``t`` itself when already that size).

    One copy of ``t`` and zeros written to the margins only (``constant_pad_nd`` fills the whole
    padded matrix first, a second pass over a language model's logits gradient).
    """
    extra_rows, extra_cols = rows - t.shape[-2], cols - t.shape[-1]
    if extra_rows == 0 and extra_cols == 0:
        return t
    if t.dim() >= 2 and t.stride(-2) == 1 and t.stride(-1) != 1:
        # Stored transposed (a weight's `.t()`): pad the stored matrix, so the copy reads and
        # writes memory in order instead of transposing it.
        return _pad_to(t.mT, cols, rows).mT
    height, width = t.shape[-2], t.shape[-1]
    padded = t.new_empty((*t.shape[:-2], rows, cols))
    padded[..., :height, :width].copy_(t)
    if extra_cols:
        padded[..., :height, width:].zero_()
    if extra_rows:
        padded[..., height:, :].zero_()
    return padded


def aligned_matmul(op: Any, padding: MatmulPadding, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``op(*args, **kwargs)`` computed on operands zero-padded to ``padding``'s sizes.

    Returns the product's values with its true sizes: the padded product's top-left corner (a view
    with padded strides when ``M`` or ``N`` was padded).
    """
    name = op._schema.name.split("::")[-1]
    first, second = _MATMULS[name]
    values = list(args)
    m, n = values[first].shape[-2], values[second].shape[-1]
    values[first] = _pad_to(values[first], padding.m, padding.k)
    values[second] = _pad_to(values[second], padding.k, padding.n)
    bias = values[0] if name == "addmm" else None
    if isinstance(bias, torch.Tensor) and bias.shape[-1] == n and padding.n != n:
        # A bias broadcast along the rows gets zero columns; a full (M, N) bias zero rows too.
        rows = padding.m if bias.dim() == 2 and bias.shape[0] == m else bias.shape[-2] if bias.dim() == 2 else None
        values[0] = _pad_to(bias, rows, padding.n) if rows is not None else torch.constant_pad_nd(bias, (0, padding.n - n), 0.0)
    out: torch.Tensor = op(*values, **kwargs)
    if (padding.m, padding.n) == (m, n):
        return out
    return out[..., :m, :n]
