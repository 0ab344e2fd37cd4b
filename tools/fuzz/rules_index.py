"""Grammar rules for indexing, matmul/linear and in-place updates.

Index tensors are raw non-negative integers taken modulo the indexed size inside the program
(``{1} % {0}.size(d)``), so they stay in range whatever size the shrinker gives the input; a rare
variant uses them raw (small integers in [-10, 10]), and eager's IndexError/RuntimeError is then
what Kiln must reproduce. In-place rules update a value, an input, or a view of either, so writes
through aliases (overlapping inputs, a view and its base, a value also returned) get exercised.
Writes whose effect is ill-defined (index_put/scatter with duplicate indices) are not generated.
"""

from __future__ import annotations

import torch

from tools.fuzz.builder import Builder, dtype_name
from tools.fuzz.rules_shape import _dim


def _index_shape(b: Builder, limit: int = 6) -> tuple[int, ...]:
    return tuple(b.rng.choice([1, 2, 3, 5, limit]) for _ in range(b.rng.choice([1, 1, 2])))


def indexing(b: Builder) -> bool:
    """gather, index_select, advanced indexing, take_along_dim, embedding, scatter_add, index_add, masked_fill."""
    x = b.pick(lambda t: t.dim() >= 1)
    if x is None:
        return False
    xt = b.tensor(x)
    nd, rng = xt.dim(), b.rng
    d = _dim(b, nd)
    kind = rng.choice(["gather", "index_select", "adv1", "adv2", "adv_col", "take_along", "embedding",
                       "scatter_add", "index_add", "masked_fill"])
    raw = rng.random() < 0.05
    wrap = "{1}" if raw else "{1} % {0}.size(%d)"
    fill = "small" if raw else "index"
    if kind in ("gather", "take_along", "scatter_add"):
        idx_shape = tuple(rng.randint(1, max(1, s)) if s else 0 for s in xt.shape)
        idx = b.new_input(idx_shape, "int64", fill, layout="contiguous" if rng.random() < 0.7 else None)
        index = wrap.replace("%d", str(d))
        if kind == "gather":
            return b.try_add("gather" + "_raw" * raw, f"torch.gather({{0}}, {d}, {index})", (x, idx), may_raise=raw)
        if kind == "take_along":
            return b.try_add("take_along_dim", f"torch.take_along_dim({{0}}, {index}, {d})", (x, idx), may_raise=raw)
        src = b.new_input(idx_shape, dtype_name(xt.dtype))
        return b.try_add("scatter_add", f"{{0}}.scatter_add({d}, {index}, {{2}})", (x, idx, src), may_raise=raw)
    if kind in ("index_select", "index_add"):
        n = rng.choice([1, 3, 7, 11])
        idx = b.new_input((n,), rng.choice(["int64", "int32"]), fill, layout="contiguous")
        index = wrap.replace("%d", str(d))
        if kind == "index_select":
            return b.try_add("index_select", f"torch.index_select({{0}}, {d}, {index})", (x, idx), may_raise=raw)
        src_shape = list(xt.shape)
        src_shape[d] = n
        src = b.new_input(tuple(src_shape), dtype_name(xt.dtype))
        return b.try_add("index_add", f"{{0}}.index_add({d}, {index}, {{2}}, alpha=2)", (x, idx, src), may_raise=raw)
    if kind == "embedding":
        idx = b.new_input(_index_shape(b), "int64", fill)
        return b.try_add("embedding", "F.embedding({1} % {0}.size(0), {0})" if not raw else "F.embedding({1}, {0})",
                         (x, idx), may_raise=raw)
    if kind == "masked_fill":
        mask = b.new_input(b.broadcastable_to(tuple(xt.shape)), "bool")
        return b.try_add("masked_fill", f"{{0}}.masked_fill({{1}}, {b.scalar(xt.dtype)})", (x, mask))
    idx = b.new_input(_index_shape(b), rng.choice(["int64", "int64", "int32"]), fill)
    if kind == "adv1":
        return b.try_add("adv_index", f"{{0}}[{wrap.replace('%d', '0')}]", (x, idx), may_raise=raw)
    if kind == "adv_col" and nd >= 2:
        return b.try_add("adv_index_col", f"{{0}}[:, {wrap.replace('%d', '1')}]", (x, idx), may_raise=raw)
    if nd >= 2:
        idx2 = b.new_input(b.broadcastable_to(tuple(b.tensor(idx).shape)), "int64", fill)
        return b.try_add("adv_index2", "{0}[{1} % {0}.size(0), {2} % {0}.size(1)]", (x, idx, idx2))
    return False


def matmul(b: Builder) -> bool:
    """x @ w, matmul, mm, bmm, addmm, linear (with and without bias), vector-vector."""
    x = b.pick(lambda t: t.dim() >= 1 and (t.is_floating_point() or b.rng.random() < 0.2))
    if x is None:
        return False
    xt = b.tensor(x)
    rng = b.rng
    k = xt.shape[-1]
    m = rng.choice([1, 3, 8, 17, 37, 64])
    dtype = dtype_name(xt.dtype) if rng.random() < 0.9 else None
    kind = rng.choice(["matmul", "matmul", "linear", "linear_bias", "mm", "bmm", "addmm", "vec"])
    if kind == "vec":
        w = b.new_input((k,), dtype)
        return b.try_add("matmul_vec", "{0} @ {1}", (x, w))
    if kind in ("linear", "linear_bias"):
        w = b.new_input((m, k), dtype)
        if kind == "linear":
            return b.try_add("linear", "F.linear({0}, {1})", (x, w))
        bias = b.new_input(rng.choice([(m,), (1,)]), dtype)
        return b.try_add("linear_bias", "F.linear({0}, {1}, {2})", (x, w, bias))
    if kind == "bmm" and xt.dim() == 3:
        w = b.new_input((xt.shape[0], k, m), dtype)
        return b.try_add("bmm", "torch.bmm({0}, {1})", (x, w))
    if kind == "addmm" and xt.dim() == 2:
        w = b.new_input((k, m), dtype)
        bias = b.new_input(rng.choice([(m,), (xt.shape[0], m), (1, m)]), dtype)
        return b.try_add("addmm", "torch.addmm({2}, {0}, {1}, beta=0.5)", (x, w, bias))
    w_shape = (k, m) if rng.random() < 0.8 or xt.dim() < 3 else (xt.shape[0], k, m)
    w = b.new_input(w_shape, dtype)
    template = "torch.mm({0}, {1})" if kind == "mm" and xt.dim() == 2 else rng.choice(["{0} @ {1}", "torch.matmul({0}, {1})"])
    return b.try_add("matmul", template, (x, w))


INPLACE_VIEWS = ("", "", "", "[1:]", "[::2]", ".t()", "[..., 0]", ".select(0, -1)", ".narrow(0, 0, 1)",
                 ".diagonal()", ".view(-1)", ".unsqueeze(0)", ".expand(2, *{0}.shape)", "[:, 1::2]")
INPLACE_UNARY = ("relu_()", "neg_()", "abs_()", "exp_()", "sigmoid_()", "zero_()", "pow_(2)", "sqrt_()", "floor_()",
                 "bitwise_not_()", "tanh_()", "clamp_(min=-0.5, max=0.5)", "clamp_(0, 3)", "sign_()")
INPLACE_SCALAR = ("add_({s})", "sub_({s})", "mul_({s})", "div_({s})", "fill_({s})", "clamp_min_({s})",
                  "floor_divide_({nz})", "remainder_({nz})", "bitwise_and_({s})", "bitwise_or_({s})",
                  "bitwise_xor_({s})", "masked_fill_({0} > 0, {s})", "pow_({s})", "__ilshift__(1)", "__irshift__(2)")
INPLACE_TENSOR = ("add_({1})", "sub_({1})", "mul_({1})", "div_({1})", "copy_({1})", "maximum({1}).clone()",
                  "addcmul_({1}, {1}, value=-0.5)", "lerp_({1}, 0.3)", "masked_fill_({1} > 0, 1)",
                  "bitwise_xor_({1})", "add_({1}, alpha=-2)", "clamp_(max={1})")


def inplace(b: Builder) -> bool:
    """An in-place update of a value, an input, or a view of either (``t = x[1:].add_(y)``)."""
    rng = b.rng
    params = {p.name for p in b.params}
    on_input = rng.random() < 0.35
    x = b.pick(lambda t: True) if not on_input else None
    if on_input:
        names = [n for n in b.names() if n in params]
        x = rng.choice(names) if names else b.pick()
    if x is None:
        return False
    xt = b.tensor(x)
    view_suffix = rng.choice(INPLACE_VIEWS)
    overlapping = "expand" in view_suffix  # eager refuses to write to it: Kiln must refuse too
    try:
        viewed = eval("v" + view_suffix.replace("{0}", "v"), {"v": xt, "torch": torch}) if view_suffix else xt
    except Exception:
        return False
    target = "{0}" + view_suffix
    roll = rng.random()
    if roll < 0.3:
        method = rng.choice(INPLACE_UNARY)
        return b.try_add("inplace_" + method.split("(")[0], f"{target}.{method}", (x,), True, overlapping)
    if roll < 0.6:
        method = rng.choice(INPLACE_SCALAR)
        filled = method.replace("{s}", b.scalar(viewed.dtype)).replace("{nz}", b.scalar(viewed.dtype, nonzero=True))
        filled = filled.replace("{0}", target)
        return b.try_add("inplace_" + method.split("(")[0], f"{target}.{filled}", (x,), True, overlapping)
    shape = b.broadcastable_to(tuple(viewed.shape))
    other = b.pick(lambda t: tuple(t.shape) == shape and t is not xt) if rng.random() < 0.4 else None
    other = other or b.new_input(shape, dtype_name(viewed.dtype) if rng.random() < 0.8 else None)
    method = rng.choice(INPLACE_TENSOR)
    return b.try_add("inplace_" + method.split("(")[0], f"{target}.{method}", (x, other), True, overlapping)
