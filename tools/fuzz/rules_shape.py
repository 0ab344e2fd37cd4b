"""Grammar rules that change shapes: reductions, scans, normalizations and views.

Reductions take a random dimension (negative half of the time), sometimes two, sometimes keepdim;
views cover transpose/permute, slices with steps and negative starts, expand, reshape/flatten/
unflatten/view, unsqueeze/squeeze, select, narrow, diagonal, unfold (an overlapping view), split,
plus the copies that look like views (flip, roll, repeat, cat, stack, pad, tril).
Sizes inside templates are read from the tensor (``{0}.size(1) // 2``) where they depend on the
shape, so the shrinker can make inputs smaller without rewriting statements.
"""

from __future__ import annotations

import torch

from tools.fuzz.builder import Builder, dtype_name
from tools.fuzz.ties import near


def _dim(b: Builder, ndim: int) -> int:
    """A dimension index for a tensor of `ndim` dims, negative half of the time (0-d tensors take 0/-1)."""
    if ndim == 0:
        return b.rng.choice([0, -1])
    d = b.rng.randrange(ndim)
    return d - ndim if b.rng.random() < 0.5 else d


REDUCTIONS: tuple[tuple[str, str], ...] = (
    ("sum", "{0}.sum({d})"), ("sum_keepdim", "{0}.sum({d}, keepdim=True)"), ("sum_all", "{0}.sum()"),
    ("sum_dims", "{0}.sum(({d}, {e}))"), ("sum_dtype", "{0}.sum({d}, dtype=torch.{dt})"),
    ("mean", "{0}.mean({d})"), ("mean_all", "{0}.mean()"), ("mean_keepdim", "{0}.mean({d}, keepdim=True)"),
    ("amax", "{0}.amax({d})"), ("amin", "{0}.amin({d}, keepdim=True)"), ("amax_dims", "torch.amax({0}, ({d}, {e}))"),
    ("max_values", "{0}.max({d}).values"), ("min_indices", "{0}.min({d}).indices"),
    ("argmax", "{0}.argmax({d})"), ("argmax_all", "{0}.argmax()"), ("argmin", "{0}.argmin({d}, keepdim=True)"),
    ("prod", "{0}.prod({d})"), ("prod_all", "{0}.prod()"),
    ("var", "{0}.var({d})"), ("var_c0", "{0}.var({d}, correction=0)"), ("std", "{0}.std({d}, keepdim=True)"),
    ("var_all", "{0}.var()"), ("var_mean", "torch.var_mean({0}, {d})[{i}]"),
    ("softmax", "torch.softmax({0}, {d})"), ("log_softmax", "torch.log_softmax({0}, {d})"),
    ("softmax_dtype", "F.softmax({0}, {d}, dtype=torch.float32)"), ("logsumexp", "torch.logsumexp({0}, {d})"),
    ("cumsum", "{0}.cumsum({d})"), ("cumprod", "torch.cumprod({0}, {d})"), ("cummax", "torch.cummax({0}, {d})[{i}]"),
    ("logcumsumexp", "torch.logcumsumexp({0}, {d})"), ("any", "{0}.any({d})"), ("all", "{0}.all()"),
    ("vector_norm", "torch.linalg.vector_norm({0}, dim={d})"), ("norm_all", "{0}.norm()"),
    ("count_nonzero", "torch.count_nonzero({0}, {d})"), ("layer_norm", "F.layer_norm({0}, {0}.shape[-1:])"),
    ("normalize", "F.normalize({0}, dim={d})"),
)


def reduction(b: Builder) -> bool:
    """A reduction, scan or normalization over one or two dimensions (or all)."""
    x = b.pick()
    if x is None:
        return False
    xt = b.tensor(x)
    name, template = b.rng.choice(REDUCTIONS)
    d = _dim(b, xt.dim())
    e = _dim(b, xt.dim())
    if "{e}" in template and xt.dim() >= 2:
        while (e - d) % xt.dim() == 0:
            e = _dim(b, xt.dim())
    dt = b.rng.choice(["float64", "float32", "int64", "int32", "float16"])
    filled = template.replace("{d}", str(d)).replace("{e}", str(e)).replace("{dt}", dt)
    filled = filled.replace("{i}", str(b.rng.randrange(2)))
    # max(dim).values routes its gradient to the reported index: a tie decides it too.
    decided_by_index = name if name != "max_values" or b.mode == "no_grad" else "argmax"
    if _indices_of_ties(decided_by_index, filled, xt, d):
        return False
    return b.try_add(name, filled, (x,))


def _indices_of_ties(name: str, filled: str, xt: torch.Tensor, d: int) -> bool:
    """Whether the statement returns the index of an extremum that is not unique.

    Which of several equal maxima argmax reports is up to the implementation (eager's vectorized
    CPU loops do not always report the first), and maxima equal up to rounding may come out in either
    order from a compiler's sums, so such programs are not generated.
    """
    if name == "cummax" and filled.endswith("[1]"):
        return xt.numel() > 0 and (bool(xt.isnan().any()) or torch.unique(xt).numel() < xt.numel())
    if name not in ("argmax", "argmax_all", "argmin", "min_indices") or xt.numel() == 0:
        return False
    if xt.dtype == torch.bool or bool(xt.isnan().any()):
        return True
    smallest = name in ("argmin", "min_indices")
    if name == "argmax_all" or xt.dim() == 0:
        extreme = xt.min() if smallest else xt.max()
        return int(near(xt, extreme).sum()) > 1
    extreme = xt.amin(d, keepdim=True) if smallest else xt.amax(d, keepdim=True)
    return bool((near(xt, extreme).sum(d) > 1).any())  # equal up to rounding: see tools/fuzz/ties.py


def _slice_index(b: Builder, ndim: int) -> str:
    """An index expression slicing one dimension with a start, stop and step."""
    d = b.rng.randrange(ndim)
    part = b.rng.choice(["1:", "::2", "1::3", "-5:", ":-1", "2:-2:2", "::5", "-3::2", ":1", "3:1"])
    lead = ["..."] if b.rng.random() < 0.3 and d == ndim - 1 else [":"] * d
    return "[" + ", ".join(lead + [part]) + "]"


def view(b: Builder) -> bool:
    """A view (or view-like copy) of a value."""
    x = b.pick()
    if x is None:
        return False
    xt = b.tensor(x)
    nd, rng = xt.dim(), b.rng
    shape = tuple(xt.shape)
    choices = ["unsqueeze", "reshape_flat", "clone", "flip", "expand", "index_none"]
    if nd >= 1:
        choices += ["slice", "slice", "slice", "select", "narrow", "squeeze", "roll", "repeat", "cat", "pad", "split", "unfold"]
    if nd >= 2:
        choices += ["transpose", "transpose", "t_mT", "permute", "flatten", "diagonal", "tril", "stack", "movedim", "view"]
    kind = rng.choice(choices)
    d = _dim(b, nd)
    if kind == "slice":
        return b.try_add("slice", "{0}" + _slice_index(b, nd), (x,))
    if kind == "select":
        i = rng.choice([0, -1, 1, 2])
        return b.try_add("select", rng.choice([f"{{0}}.select({d}, {i})", f"{{0}}[{i}]", f"{{0}}[..., {i}]"]), (x,))
    if kind == "narrow":
        return b.try_add("narrow", f"{{0}}.narrow({d}, {{0}}.size({d}) // 3, {{0}}.size({d}) // 2)", (x,))
    if kind == "squeeze":
        return b.try_add("squeeze", rng.choice([f"{{0}}.squeeze({d})", "{0}.squeeze()"]), (x,))
    if kind == "unsqueeze":
        return b.try_add("unsqueeze", f"{{0}}.unsqueeze({rng.randrange(-nd - 1, nd + 1)})", (x,))
    if kind == "index_none":
        return b.try_add("index_none", rng.choice(["{0}[None]", "{0}[..., None]", "{0}[:, None]"]), (x,))
    if kind == "transpose":
        return b.try_add("transpose", f"{{0}}.transpose({d}, {_dim(b, nd)})", (x,))
    if kind == "t_mT":
        return b.try_add("transpose", "{0}.t()" if nd == 2 else "{0}.mT", (x,))
    if kind == "permute":
        perm = list(range(nd))
        rng.shuffle(perm)
        return b.try_add("permute", f"{{0}}.permute{tuple(perm)!r}", (x,))
    if kind == "movedim":
        return b.try_add("movedim", f"torch.movedim({{0}}, {d}, {_dim(b, nd)})", (x,))
    if kind == "expand":
        new = [rng.choice([2, 3, 5]) for _ in range(rng.randrange(2))]
        sizes = [rng.choice([2, 3, 7]) if s == 1 and rng.random() < 0.7 else -1 for s in shape]
        return b.try_add("expand", f"{{0}}.expand({', '.join(map(str, new + sizes))})" if new or sizes else "{0}.expand(())", (x,))
    if kind == "reshape_flat":
        return b.try_add("reshape", rng.choice(["{0}.reshape(-1)", "{0}.flatten()", "{0}.reshape(1, -1)"]), (x,))
    if kind == "flatten":
        a = rng.randrange(nd - 1)
        return b.try_add("flatten", f"{{0}}.flatten({a}, {a + 1})", (x,))
    if kind == "view":
        a = rng.randrange(nd - 1)
        dims = [f"{{0}}.size({k})" for k in range(a)] + ["-1"] + [f"{{0}}.size({k})" for k in range(a + 2, nd)]
        method = rng.choice(["view", "reshape"])
        return b.try_add(method, f"{{0}}.{method}({', '.join(dims)})", (x,))
    if kind == "diagonal":
        return b.try_add("diagonal", rng.choice(["{0}.diagonal()", "torch.diagonal({0}, 1, -2, -1)", "{0}.diagonal(-1)"]), (x,))
    if kind == "unfold":
        size, step = rng.choice([(2, 1), (3, 2), (2, 2)])
        return b.try_add("unfold", f"{{0}}.unfold({d}, {size}, {step})", (x,))
    if kind == "split":
        k = rng.choice([1, 2, 3])
        return b.try_add("split", rng.choice([f"{{0}}.split({k}, {d})[-1]", f"{{0}}.chunk({k + 1}, {d})[0]"]), (x,))
    if kind == "clone":
        return b.try_add("clone", rng.choice(["{0}.clone()", "{0}.contiguous()"]), (x,))
    if kind == "flip":
        return b.try_add("flip", f"{{0}}.flip({d})" if nd else "{0}.flip(())", (x,))
    if kind == "roll":
        return b.try_add("roll", f"{{0}}.roll({rng.choice([1, -2, 5])}, {d})", (x,))
    if kind == "repeat":
        reps = ", ".join(str(rng.choice([1, 2, 3])) for _ in range(nd + rng.randrange(2)))
        return b.try_add("repeat", f"{{0}}.repeat({reps})", (x,))
    if kind == "tril":
        return b.try_add("tril", rng.choice(["{0}.tril()", "{0}.triu(1)"]), (x,))
    if kind == "pad":
        return b.try_add("pad", f"F.pad({{0}}, ({rng.randrange(3)}, {rng.randrange(3)}), value={b.scalar(xt.dtype)})", (x,))
    if kind in ("cat", "stack"):
        other_shape = list(shape)
        if kind == "cat":
            other_shape[d] = rng.choice([1, 3, shape[d]])
        other = b.new_input(tuple(other_shape), dtype_name(xt.dtype) if rng.random() < 0.7 else None)
        if kind == "cat":
            return b.try_add("cat", f"torch.cat([{{0}}, {{1}}], {d})", (x, other))
        return b.try_add("stack", f"torch.stack([{{0}}, {{1}}], {rng.randrange(-nd - 1, nd + 1)})", (x, other))
    return False

