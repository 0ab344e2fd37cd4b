"""Grammar rules for order statistics: sort, argsort, topk, kthvalue, median, mode, quantile,
cummin, max/min over a dimension as (values, indices), searchsorted and bucketize.

These return indices computed by comparisons, where a compiler's loop order, its NaN handling and
its tie-breaking decide the answer. Only what eager defines is generated: an index whose value
depends on which of several equal elements wins is not generated (except under ``stable=True``,
which defines it), and neither is a gradient routed through such an index.
"""

from __future__ import annotations

import torch

from tools.fuzz.builder import Builder, dtype_name
from tools.fuzz.rules_shape import _dim
from tools.fuzz.ties import sorted_neighbours_tie


def _ties_along(xt: torch.Tensor, d: int) -> bool:
    """Whether some row along `d` holds two equal elements, up to rounding (two NaNs, or -0.0 and 0.0,
    included)."""
    if xt.numel() == 0:
        return False
    t = xt.reshape(1) if xt.dim() == 0 else xt
    if t.dtype == torch.bool:
        return t.shape[d] > 2 or (t.shape[d] == 2 and bool((t.narrow(d, 0, 1) == t.narrow(d, 1, 1)).any()))
    if t.is_floating_point() and bool((t.isnan().sum(d) > 1).any()):
        return True
    return sorted_neighbours_tie(t, d)  # equal up to rounding: see tools/fuzz/ties.py


def _nan_along(xt: torch.Tensor) -> bool:
    return xt.is_floating_point() and bool(xt.isnan().any())


def _mode_ties(xt: torch.Tensor, d: int) -> bool:
    """Whether some row along `d` has two most frequent values (mode's answer is then unspecified)."""
    if xt.numel() == 0 or xt.numel() > 4096:
        return True
    rows = (xt.reshape(1) if xt.dim() == 0 else xt).movedim(d, -1).reshape(-1, xt.shape[d] if xt.dim() else 1)
    for row in rows:
        _, counts = torch.unique(row, return_counts=True)
        if int((counts == counts.max()).sum()) > 1 or (row.is_floating_point() and bool(row.isnan().any())):
            return True
    return False


SORTS: tuple[tuple[str, str, bool], ...] = (
    # (name, template, returns indices whose value a tie decides)
    ("sort_values", "torch.sort({0}, {d}, descending={desc})[0]", False),
    ("sort_stable_indices", "torch.sort({0}, dim={d}, descending={desc}, stable=True)[1]", False),
    ("sort_indices", "{0}.sort({d})[1]", True),
    ("argsort_stable", "torch.argsort({0}, dim={d}, descending={desc}, stable=True)", False),
    ("argsort", "{0}.argsort({d}, descending={desc})", True),
    ("msort", "torch.msort({0})", False),
    ("topk_values", "torch.topk({0}, {k}, dim={d}, largest={desc})[0]", False),
    ("topk_indices", "{0}.topk({k}, {d}, largest={desc})[1]", True),
    ("kthvalue_values", "torch.kthvalue({0}, {k}, {d})[0]", False),
    ("kthvalue_indices", "torch.kthvalue({0}, {k}, {d}, keepdim=True)[1]", True),
    ("median_values", "{0}.median({d})[0]", False),
    ("median_indices", "{0}.median({d}, keepdim=True)[1]", True),
    ("median_all", "{0}.median()", False),
    ("nanmedian", "torch.nanmedian({0}, {d})[0]", False),
    ("nanmedian_all", "{0}.nanmedian()", False),
    ("cummin_values", "torch.cummin({0}, {d})[0]", False),
    ("cummin_indices", "torch.cummin({0}, {d})[1]", True),
    ("max_dim_values", "torch.max({0}, {d}, keepdim={kd})[0]", False),
    ("max_dim_indices", "torch.max({0}, {d})[1]", True),
    ("min_dim_values", "{0}.min(dim={d}, keepdim={kd}).values", False),
    ("min_dim_indices", "torch.min({0}, {d}, keepdim={kd})[1]", True),
    ("aminmax", "torch.aminmax({0}, dim={d})[{i}]", False),
    ("quantile", "torch.quantile({0}, {q}, dim={d}, keepdim={kd})", False),
    ("quantile_interp", "torch.quantile({0}, {q}, dim={d}, interpolation='{interp}')", False),
    ("nanquantile", "torch.nanquantile({0}, {q}, dim={d})", False),
)


def order(b: Builder) -> bool:
    """sort/argsort (stable or not), topk, kthvalue, median, nanmedian, mode, quantile, cummin,
    max/min/aminmax over a dimension, searchsorted, bucketize."""
    x = b.pick()
    if x is None:
        return False
    rng = b.rng
    if rng.random() < 0.2:
        return _search(b, x)
    xt = b.tensor(x)
    d = _dim(b, xt.dim())
    size = xt.shape[d] if xt.dim() else 1
    if rng.random() < 0.08:
        if _mode_ties(xt, d):
            return False
        return b.try_add("mode", f"torch.mode({{0}}, {d})[{rng.randrange(2)}]", (x,))
    name, template, decided_by_tie = rng.choice(SORTS)
    k = rng.choice([1, 1, 2, max(1, size // 2), max(1, size)])
    filled = (template.replace("{d}", str(d)).replace("{k}", str(k)).replace("{desc}", str(rng.random() < 0.5))
              .replace("{kd}", str(rng.random() < 0.3)).replace("{i}", str(rng.randrange(2)))
              .replace("{q}", rng.choice(["0.5", "0.25", "0.9", "0.0", "1.0"]))
              .replace("{interp}", rng.choice(["lower", "higher", "nearest", "midpoint"])))
    # Values are defined whatever the ties, but their gradient goes to the element at the index.
    flat = name.endswith("_all")
    graded = b.mode != "no_grad" and xt.requires_grad
    if (decided_by_tie or graded) and _ties_along(xt.reshape(-1) if flat else xt, 0 if flat else d):
        return False
    if (decided_by_tie or (graded and "median" in name)) and _nan_along(xt):
        return False  # which NaN an index names is up to the implementation
    if "median" in name and not flat and xt.dim() and size > 1 and xt.stride(d) == 0:
        return False  # eager's CPU median/nanmedian along a stride-0 (expanded) dim returns uninitialized memory
    return b.try_add(name, filled, (x,))


def _search(b: Builder, x: str) -> bool:
    """searchsorted into a sorted new input (sorted inside the program), or bucketize into sorted
    boundaries; `right` / `side` / `out_int32` vary."""
    xt = b.tensor(x)
    rng = b.rng
    if xt.dtype == torch.bool:
        return False
    n = rng.choice([1, 3, 8, 17])
    dtype = dtype_name(xt.dtype) if rng.random() < 0.8 else None
    right = rng.choice(["", ", right=True", ", side='right'", ", out_int32=True"])
    if rng.random() < 0.5 or xt.dim() == 0:
        boundaries = b.new_input((n,), dtype)
        return b.try_add("bucketize", f"torch.bucketize({{0}}, {{1}}.sort().values{right})", (x, boundaries))
    shape = (*xt.shape[:-1], n) if rng.random() < 0.6 else (n,)
    seq = b.new_input(shape, dtype)
    return b.try_add("searchsorted", f"torch.searchsorted({{1}}.sort(-1).values, {{0}}{right})", (x, seq))
