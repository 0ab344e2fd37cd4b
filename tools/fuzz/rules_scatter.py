"""Grammar rules for writes through indices: scatter and scatter_reduce in every reduce mode,
index_put with and without accumulation, index_copy, index_fill, index_reduce, masked_scatter,
and the index-consuming nn ops one_hot and embedding_bag.

Accumulating writes (``scatter_add``-like reductions, ``index_put(accumulate=True)``) get
duplicate indices on purpose: their result is defined whatever the order. Overwriting writes
(scatter, index_put, index_copy) get duplicate-free indices, built inside the program as a stable
argsort of a random integer tensor (a permutation), cut to the length needed.
"""

from __future__ import annotations

import torch

from tools.fuzz.builder import Builder, dtype_name
from tools.fuzz.rules_shape import _dim

REDUCES = ("sum", "prod", "mean", "amax", "amin")
DENSE_LIMIT = 60_000
"""The most output elements times sources along the written dimension a scatter, index_put or
index_copy is drawn with (Kiln lowers them densely; Triton's interpreter must finish them)."""


def _permutation(b: Builder, n: int, count: int) -> tuple[str, str]:
    """(a new index input, the expression of `count` distinct indices in [0, n) made from it, as
    the template's argument 1)."""
    src = b.new_input((n,), "int64", "index", layout="contiguous")
    return src, f"{{1}}.argsort(stable=True)[:{count}]"


def scatter(b: Builder) -> bool:
    """scatter (src or value, with reduce='add'/'multiply'), scatter_reduce, index_put, index_copy,
    index_fill, index_reduce, masked_scatter, one_hot, embedding_bag."""
    x = b.pick(lambda t: t.dim() >= 1 and t.numel() > 0)
    if x is None:
        return False
    xt = b.tensor(x)
    rng = b.rng
    d = _dim(b, xt.dim())
    dtype = dtype_name(xt.dtype)
    kind = rng.choice(["scatter", "scatter_reduce", "scatter_reduce", "index_put_acc", "index_put", "index_copy",
                       "index_fill", "index_reduce", "masked_scatter", "one_hot", "embedding_bag"])
    if kind in ("scatter", "scatter_reduce"):
        idx_shape = tuple(rng.randint(1, s) for s in xt.shape)
        # Kiln lowers a scatter densely (every output compares against every source along d):
        # keep that product small enough for Triton's interpreter.
        dd = d % xt.dim()
        if xt.numel() * idx_shape[dd] > DENSE_LIMIT:
            idx_shape = (*idx_shape[:dd], max(1, DENSE_LIMIT // xt.numel()), *idx_shape[dd + 1 :])
        if kind == "scatter_reduce":
            idx = b.new_input(idx_shape, "int64", "index", layout="contiguous" if rng.random() < 0.7 else None)
            src = b.new_input(idx_shape, dtype if rng.random() < 0.9 else None)
            reduce = rng.choice(REDUCES)
            include = rng.random() < 0.5
            template = f"{{0}}.scatter_reduce({d}, {{1}} % {{0}}.size({d}), {{2}}, '{reduce}', include_self={include})"
            if reduce in ("amax", "amin") and b.mode != "no_grad" and _has_ties(b.tensor(src), b.tensor(x)):
                return False  # the gradient is shared among equal extrema
            return b.try_add("scatter_reduce_" + reduce, template, (x, idx, src))
        # Along d: distinct positions per row; the other dimensions index plainly.
        perm_shape = tuple(s if i != dd else xt.shape[dd] for i, s in enumerate(idx_shape))
        perm = b.new_input(perm_shape, "int64", "index", layout="contiguous")
        index = f"{{1}}.argsort(dim={dd}, stable=True).narrow({dd}, 0, {idx_shape[dd]})"
        roll = rng.random()
        if roll < 0.4:
            src = b.new_input(idx_shape, dtype if rng.random() < 0.9 else None)
            return b.try_add("scatter_src", f"{{0}}.scatter({d}, {index}, {{2}})", (x, perm, src))
        if roll < 0.7:
            return b.try_add("scatter_value", f"torch.scatter({{0}}, {d}, {index}, {b.scalar(xt.dtype)})", (x, perm))
        idx = b.new_input(idx_shape, "int64", "index", layout="contiguous")
        src = b.new_input(idx_shape, dtype)
        mode = rng.choice(["add", "multiply"])
        return b.try_add("scatter_legacy_" + mode, f"{{0}}.scatter({d}, {{1}} % {{0}}.size({d}), {{2}}, reduce='{mode}')",
                         (x, idx, src))
    if kind == "index_put_acc":
        n = rng.choice([1, 4, 9])
        idx = b.new_input((n,), rng.choice(["int64", "int32"]), "index", layout="contiguous")
        vshape = (n, *xt.shape[1:]) if rng.random() < 0.6 else tuple(xt.shape[1:])[rng.randrange(xt.dim()):]
        values = b.new_input(vshape, dtype if rng.random() < 0.9 else None)
        method = rng.choice(["index_put", "index_put_"]) if not xt.requires_grad else "index_put"
        target = "{0}" if method == "index_put" else "{0}.clone()"
        return b.try_add("index_put_acc", f"{target}.{method}(({{1}} % {{0}}.size(0),), {{2}}, accumulate=True)",
                         (x, idx, values))
    if kind == "index_put":
        size0 = xt.shape[0]
        count = min(rng.randint(1, size0), max(1, DENSE_LIMIT // xt.numel()))
        perm, index = _permutation(b, size0, count)
        if xt.dim() >= 2 and rng.random() < 0.3:
            col = rng.randrange(xt.shape[1])
            values = b.new_input(rng.choice([(count, *xt.shape[2:]), ()]), dtype)
            return b.try_add("index_put_2d", f"{{0}}.index_put(({index}, torch.tensor({col})), {{2}})", (x, perm, values))
        values = b.new_input(rng.choice([(count, *xt.shape[1:]), (), (1,)]), dtype if rng.random() < 0.9 else None)
        return b.try_add("index_put", f"{{0}}.index_put(({index},), {{2}})", (x, perm, values))
    if kind == "index_copy":
        dd = d % xt.dim()
        count = min(rng.randint(1, xt.shape[dd]), max(1, DENSE_LIMIT // xt.numel()))
        perm, index = _permutation(b, xt.shape[dd], count)
        src_shape = list(xt.shape)
        src_shape[dd] = count
        src = b.new_input(tuple(src_shape), dtype)
        return b.try_add("index_copy", f"{{0}}.index_copy({d}, {index}, {{2}})", (x, perm, src))
    if kind == "index_fill":
        idx = b.new_input((rng.choice([1, 3, 6]),), "int64", "index", layout="contiguous")
        value = b.scalar(xt.dtype) if rng.random() < 0.7 else "torch.tensor(-2)"
        return b.try_add("index_fill", f"{{0}}.index_fill({d}, {{1}} % {{0}}.size({d}), {value})", (x, idx))
    if kind == "index_reduce":
        n = rng.choice([1, 3, 7])
        idx = b.new_input((n,), "int64", "index", layout="contiguous")
        src_shape = list(xt.shape)
        src_shape[d % xt.dim()] = n
        src = b.new_input(tuple(src_shape), dtype)
        reduce = rng.choice(["prod", "mean", "amax", "amin"])
        if reduce in ("amax", "amin") and b.mode != "no_grad" and _has_ties(b.tensor(src), xt):
            return False
        include = rng.random() < 0.5
        return b.try_add("index_reduce_" + reduce,
                         f"{{0}}.index_reduce({d}, {{1}} % {{0}}.size({d}), {{2}}, '{reduce}', include_self={include})",
                         (x, idx, src))
    if kind == "masked_scatter":
        mask = b.new_input(b.broadcastable_to(tuple(xt.shape)), "bool")
        src = b.new_input(tuple(xt.shape), dtype)
        return b.try_add("masked_scatter", "{0}.masked_scatter({1}, {2})", (x, mask, src))
    if kind == "one_hot":
        classes = rng.choice([1, 2, 5, 9])
        if xt.is_floating_point():
            return b.try_add("one_hot", f"F.one_hot(({{0}} > 0).long() * {min(classes, 2) - 1}, {classes})", (x,))
        known = rng.random() < 0.7
        # Without num_classes the result's width is the data's maximum plus one.
        return b.try_add("one_hot" if known else "one_hot_data",
                         f"F.one_hot({{0}}.long() % {classes}" + (f", {classes})" if known else ")"), (x,))
    return _embedding_bag(b, x)


def _has_ties(src: torch.Tensor, x: torch.Tensor) -> bool:
    values = torch.cat([src.reshape(-1).double(), x.reshape(-1).double()])
    return bool(values.isnan().any()) or torch.unique(values).numel() < values.numel()


def _embedding_bag(b: Builder, x: str) -> bool:
    """F.embedding_bag over a 2-D float table: fixed-length bags (2-D indices) or 1-D indices with
    offsets; sum/mean/max, per-sample weights (sum), padding_idx."""
    xt = b.tensor(x)
    if xt.dim() != 2 or not xt.is_floating_point():
        return False
    rng = b.rng
    mode = rng.choice(["sum", "mean", "max"])
    if mode == "max" and b.mode != "no_grad":
        return False  # the gradient goes to one of equal rows: up to the implementation
    extra = f", mode='{mode}'"
    if rng.random() < 0.3:
        extra += f", padding_idx={rng.randrange(xt.shape[0])}"
    if rng.random() < 0.5:
        idx = b.new_input((rng.choice([1, 3, 4]), rng.choice([1, 2, 5])), "int64", "index", layout="contiguous")
        if mode == "sum" and rng.random() < 0.4:
            weights = b.new_input(tuple(b.tensor(idx).shape), dtype_name(xt.dtype))
            return b.try_add("embedding_bag_weighted",
                             f"F.embedding_bag({{1}} % {{0}}.size(0), {{0}}, per_sample_weights={{2}}{extra})",
                             (x, idx, weights))
        return b.try_add("embedding_bag_" + mode, f"F.embedding_bag({{1}} % {{0}}.size(0), {{0}}{extra})", (x, idx))
    n = rng.choice([3, 6, 10])
    idx = b.new_input((n,), "int64", "index", layout="contiguous")
    offsets = sorted({0, *(rng.randrange(n + 1) for _ in range(rng.choice([1, 2, 3])))})
    last = ", include_last_offset=True" if rng.random() < 0.3 else ""
    return b.try_add("embedding_bag_offsets",
                     f"F.embedding_bag({{1}} % {{0}}.size(0), {{0}}, torch.tensor({offsets}){extra}{last})", (x, idx))
