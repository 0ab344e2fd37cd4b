"""The one place that says which ATen ops aotgrad decomposes and which it keeps whole.

Graphs that aotgrad hands to a compiler use torch's Core ATen opset
(`torch._decomp.core_aten_decompositions()` is the substrate), with these choices on top:

* **Decomposed first** (`EARLY_DECOMPOSED`), in the forward trace, before autograd, whatever table
  the caller passes:
  - batch norm (`native_batch_norm`, the `_native_batch_norm_legit*` family, `cudnn_batch_norm` and
    `_batch_norm_with_update*`): its in-place
    update of the running statistics must be visible to functionalization, so it becomes
    `var_mean` + pointwise ops + the new running statistics (functionalization sees them as the
    functional op's results, or as explicit copies in the two-pass trace); the runtime
    wrapper writes those back into the real buffers;
  - recurrent layers (`lstm`, `gru`, `rnn_tanh`, `rnn_relu`): their fused CPU kernels return
    workspace buffers that fake tensors cannot stand in for; they become cells of matmuls and
    pointwise ops, computed in float32 for float16 and bfloat16 tensors as eager's kernels compute
    them (`eager_recurrent.RecurrentInFloat32`, while tracing).
* **Kept whole** (`KEPT_WHOLE`): random ops (`bernoulli`, `rand`, `randn`, ...). They stay single
  ATen calls so that, under the same seed, a compiled graph draws exactly the numbers eager draws
  (dropout masks are bit-identical to eager), and the partitioner never recomputes them.
* **Kept whole as eager computes** (`KEPT_AS_EAGER`): ``linspace``. ATen's kernels compute each
  element as one fused multiply-add (they are compiled with floating-point contraction); torch's
  decomposition rounds the product and the sum apart, which gave eager's bits for only 80% of
  float32 and 85% of float64 elements (``linspace(-2, 2, 7)[3]`` is -5.96e-08 in eager, and was 0.0).
  Kept whole, the graph runs eager's kernel; a code generator lowers it itself (inductor_ir does,
  bit for bit).
* **Never under autograd** (`INFERENCE_ONLY`, whatever table the caller passes): CPU flash attention,
  whose decomposition returns the attention weights in place of the log-sum-exp its backward reads.
  The joint trace keeps it whole (`joint_decompositions`); inference graphs may decompose it.

* **Replaced** (`EAGER_FACTORIES`): ``eye`` indexes with int64 ranges (torch's picks uint16 from 256
  rows on, which CPU ``arange`` and Kiln's code generators do not support).
* **Decomposed as eager computes** (`EAGER_UPSAMPLE`): where the table decomposes linear/trilinear
  upsampling, the two neighbours are weighed as eager's kernels do (torch's difference form gives
  nan where eager gives inf).
* **Decomposed as eager computes** (`EAGER_THRESHOLD`): ``threshold`` on integer tensors converts its
  threshold and value to the tensor's dtype and selects between integers (torch's went through
  float32, rounding integers beyond 2**24).
* **Shaped as eager's** (`EAGER_INDEX`, first and in the joint trace): ``index`` with a 0-d index tensor beside
  others broadcasts its indices first (torch's fake kernel left the 0-d one out of the result's shape,
  so a forward graph's meta and the gradient of ``index_put``'s values had the wrong shape).
* **Laid out as eager's** (`EAGER_LAYOUT`, first): ``div`` with a rounding mode, ``floor_divide`` and
  ``copysign`` whose fake result has other strides than eager's (operands broadcast from size-1 dims in
  other memory orders) are copied into eager's strides (torch's references gave other ones).
* **Decomposed as eager computes** (`EAGER_STD`): ``std`` and ``std_mean`` of float32, float16 and
  bfloat16 tensors on the CPU accumulate and take the square root in float64, as eager's CPU kernels
  do (torch's float32 variance overflowed to inf for values near 1e30).

The **decomposed as eager computes** replacements (`EAGER_VALUES`: upsampling, threshold, std, index_fill) also
apply to a table a caller passes, wherever it holds torch's own decomposition of such an op
(`with_eager_values`): a code generator's table gets eager's values without listing them.

Everything else in the Core ATen table is decomposed; ops outside it (e.g. `convolution`,
`addmm`, `native_layer_norm`, `_softmax`) are Core ATen already and stay as they are. A code
generator that wants a different set passes its own table through `decompositions=`; it then
replaces this default entirely (`default_decompositions()` is a good base to edit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch._decomp import core_aten_decompositions, decomposition_table, get_decompositions

from aotgrad.eager_batch_norm import (
    mixed_type_in_float32,
    native_batch_norm_for_replay,
    with_eager_running_stats,
)
from aotgrad.eager_factories import EAGER_FACTORIES
from aotgrad.eager_fill import EAGER_FILL
from aotgrad.eager_gradients import EAGER_GRADIENTS
from aotgrad.eager_index import EAGER_INDEX
from aotgrad.eager_layout import EAGER_LAYOUT, batch_norm_laid_out_as_eager
from aotgrad.eager_recurrent import RECURRENT
from aotgrad.eager_std import EAGER_STD
from aotgrad.eager_threshold import EAGER_THRESHOLD
from aotgrad.eager_upsample import EAGER_UPSAMPLE

aten = torch.ops.aten

DecompositionTable = dict[torch._ops.OpOverload, Callable[..., Any]]
DecompositionSource = Mapping[torch._ops.OpOverload, Callable[..., Any]]
"""What callers pass: any mapping (a table built on first use, say); aotgrad copies what it keeps."""

BATCH_NORMS: tuple[Any, ...] = (
    aten.native_batch_norm,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training,
    # On CUDA, aten.batch_norm dispatches to cudnn_batch_norm, whose in-place update of the running
    # statistics functionalization does not see: decompose it (to native_batch_norm) first too.
    aten.cudnn_batch_norm,
    aten._batch_norm_with_update,
    aten._batch_norm_with_update_functional,
    aten._batch_norm_no_update,
)

EARLY_DECOMPOSED: tuple[Any, ...] = (*BATCH_NORMS, *RECURRENT)

KEPT_WHOLE: tuple[Any, ...] = (
    aten.bernoulli,
    aten.bernoulli_,
    aten.rand,
    aten.rand_like,
    aten.randn,
    aten.randn_like,
    aten.randint,
    aten.randint_like,
    aten.randperm,
    aten.normal,
    aten.uniform,
    aten.native_dropout,
)


KEPT_AS_EAGER: tuple[Any, ...] = (aten.linspace,)


def _overloads(packets: tuple[Any, ...]) -> set[Any]:
    found: set[Any] = set()
    for packet in packets:
        for name in packet.overloads():
            found.add(getattr(packet, name))
    return found


# Decompositions that are right only where nothing differentiates the op. torch's decomposition of
# CPU flash attention returns the attention weights where the kernel returns its log-sum-exp, and
# lays its output out differently; the op's derivative formula reads that log-sum-exp (wrong
# gradients) and later `view`s rely on that layout. Under autograd they stay whole (forward and
# backward run the fused kernels); inference graphs may still decompose them.
INFERENCE_ONLY: tuple[Any, ...] = (aten._scaled_dot_product_flash_attention_for_cpu,)


def joint_decompositions(table: DecompositionSource) -> DecompositionTable:
    """`table` without the decompositions that are wrong under autograd (`INFERENCE_ONLY`): the one
    the joint forward+backward trace applies. Activation gradients it decomposes use
    `EAGER_GRADIENTS` (eager's values at NaN) in place of torch's; `index` (the gradient of
    `index_put`'s values) broadcasts its indices first (`EAGER_INDEX`: eager's shape on fake tensors)."""
    inference_only = _overloads(INFERENCE_ONLY)
    joint = {op: EAGER_GRADIENTS.get(op, fn) for op, fn in table.items() if op not in inference_only}
    joint = {**EAGER_INDEX, **joint}  # a table's own decomposition of `index` comes first
    return _native_batch_norm_as_eager(joint)


# Early-decomposed ops of which only the first result is differentiable: batch norm's saved
# statistics and reserve buffers are outputs autograd does not track (eager returns them with
# requires_grad=False, and no gradient flows back through them).
FIRST_RESULT_DIFFERENTIABLE: tuple[Any, ...] = BATCH_NORMS


def _detaching_rest(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """`decomposition` with every result but the first behind an `aten.detach`: decomposed into
    differentiable ops, those results would otherwise carry a gradient that eager's do not."""

    def decompose(*args: Any, **kwargs: Any) -> Any:
        out = decomposition(*args, **kwargs)
        if not isinstance(out, (tuple, list)):
            return out
        rest = (aten.detach.default(t) if isinstance(t, torch.Tensor) else t for t in out[1:])
        return (out[0], *rest)

    return decompose


def mutation_decompositions(*, differentiated: bool = False) -> DecompositionTable:
    """The decompositions applied first (before functionalization and autograd), whatever table the
    caller passes: `EARLY_DECOMPOSED` (batch norm, recurrent layers). Batch norm's results past the
    first are detached (`FIRST_RESULT_DIFFERENTIABLE`); inference traces drop those detaches.

    `differentiated` (a forward traced for the joint trace): evaluation-mode ``native_batch_norm``,
    which updates nothing, stays whole, so that autograd differentiates it by eager's own formula
    (``native_batch_norm_backward``); the joint trace decomposes both (`joint_decompositions`). The
    gradient of the decomposed forward, whose output is ``x * alpha + beta`` as eager's CPU kernel
    computes it, takes the weight's gradient as ``sum(dy * x) - mean * sum(dy)``: -inf where eager's
    ``sum(dy * (x - mean))`` is NaN, with an infinite running mean."""
    table: DecompositionTable = dict(get_decompositions(list(EARLY_DECOMPOSED)))  # type: ignore[arg-type]
    table.update(EAGER_INDEX)  # the forward graph's shapes are eager's (its tangents are made from them)
    table.update(EAGER_LAYOUT)  # and its floor divisions' strides (a `view` of them traces as eager runs)
    for op in _overloads(FIRST_RESULT_DIFFERENTIABLE):
        if op in table:
            table[op] = _detaching_rest(with_eager_running_stats(op, mixed_type_in_float32(table[op])))
    if differentiated:
        table[aten.native_batch_norm.default] = _whole_in_evaluation(table[aten.native_batch_norm.default])
    return _batch_norms_laid_out_as_eager(table)


def _batch_norms_laid_out_as_eager(table: DecompositionTable) -> DecompositionTable:
    """`table` with every batch-norm overload's output in eager's layout (`batch_norm_laid_out_as_eager`),
    those it does not decompose included."""
    return {**table, **{op: batch_norm_laid_out_as_eager(op, table.get(op)) for op in _overloads(BATCH_NORMS)}}


def _whole_in_evaluation(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """`decomposition` of ``native_batch_norm``, leaving the op whole (NotImplemented) where it does
    not train."""
    names = [a.name for a in aten.native_batch_norm.default._schema.arguments]

    def decompose(*args: Any, **kwargs: Any) -> Any:
        bound = {**dict(zip(names, args)), **kwargs}
        if not bound["training"]:
            return NotImplemented
        return decomposition(*args, **kwargs)

    return decompose


def _native_batch_norm_as_eager(table: DecompositionTable) -> DecompositionTable:
    """`table` decomposing ``native_batch_norm`` (kept whole in evaluation by the early table of a
    differentiated forward) with its output as eager's CPU kernel computes it."""
    op = aten.native_batch_norm.default
    decomposed = with_eager_running_stats(op, mixed_type_in_float32(table.get(op, decomposition_table[op])))
    return {**table, op: batch_norm_laid_out_as_eager(op, decomposed)}


def replay_decompositions() -> DecompositionTable:
    """The early table of a double backward's replay graph (`runtime/higher_order.py`): batch norm
    stays whole, differentiated by eager's own formula (the fused ``native_batch_norm_backward``,
    whose gradients have history whenever the input or the weight requires grad; the decomposed
    form's gradient of the weight does not depend on the weight, so it had none). ``native_batch_norm``
    shows its update of the running statistics as copies; the other overloads declare theirs, except
    ``cudnn_batch_norm``, decomposed as in `mutation_decompositions`."""
    table = mutation_decompositions()
    for op in _overloads(BATCH_NORMS):
        if op.overloadpacket is not aten.cudnn_batch_norm:
            table.pop(op, None)
    table[aten.native_batch_norm.default] = native_batch_norm_for_replay
    return _batch_norms_laid_out_as_eager(table)


# torch's decompositions that give values eager's kernels do not, and aotgrad's replacements.
EAGER_VALUES: DecompositionTable = {**EAGER_UPSAMPLE, **EAGER_THRESHOLD, **EAGER_STD, **EAGER_FILL}


def with_eager_values(table: DecompositionSource) -> DecompositionTable:
    """`table` (a caller's) with torch's own decompositions of `EAGER_VALUES`' ops replaced by
    aotgrad's, which give eager's values; a decomposition of the caller's own stays as it is."""
    return {
        op: EAGER_VALUES[op] if op in EAGER_VALUES and fn is decomposition_table.get(op) else fn
        for op, fn in table.items()
    }


def default_decompositions() -> DecompositionTable:
    """The decomposition table aotgrad uses when the caller passes none.

    Returns:
        A fresh dict (safe to edit) from ATen overloads to Python decompositions: Core ATen, plus
        `EARLY_DECOMPOSED`, minus `KEPT_WHOLE` and `KEPT_AS_EAGER`.
    """
    table: DecompositionTable = dict(core_aten_decompositions())  # type: ignore[arg-type]
    table.update(get_decompositions(list(EARLY_DECOMPOSED)))  # type: ignore[arg-type]
    table.update(EAGER_FACTORIES)
    for op in _overloads((*KEPT_WHOLE, *KEPT_AS_EAGER)):
        table.pop(op, None)
    return with_eager_values(table)
