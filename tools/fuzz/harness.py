"""The runtime every fuzz program carries: input construction, running a program in a mode, a simple check.

This module imports nothing but torch, because its text is copied verbatim into every emitted
program (the worker executes exactly that text, and a found failure becomes a standalone pytest file
whose only dependencies are torch and frontend).
"""

import torch

FLOAT_TOLERANCES = {
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-7, 1e-7),
}
"""dtype -> (rtol, atol) of `assert_matches`, loose on purpose: a found failure is far off, not a rounding."""

DEVICE = "cpu"
"""Where inputs live and autocast applies; a program run on a GPU sets it to "cuda" in its namespace."""

SPECIAL_VALUES = (float("inf"), float("-inf"), float("nan"), -0.0, 0.0, 1e30, -1e30, 1e-40, 65504.0)


def grown(shape, grow):
    """`shape` with every size of at least 2 grown by `grow` (sizes 0 and 1 keep their meaning:
    empty, and broadcast), so inputs that broadcast against each other still do."""
    return tuple(s + grow if s >= 2 else s for s in shape)


def make_leaf(seed, shape, dtype, fill="normal", ref=False, channels_last=False, requires_grad=False, grow=0,
              relayout=False):
    """One input leaf from its own seed: the same values whatever other inputs exist.

    `fill` picks the values: "normal" (standard normal), "wide" (x1000), "positive" (> 0.1),
    "special" (normal with inf/nan/-0/huge/subnormal sprinkled in), "small" (integers in [-10, 10]),
    "full" (integers over the dtype's whole range), "index" (integers in [0, 2**20), to take `%` of).
    `ref=True` makes floating leaves float64 (same values): the float64 reference run.
    `grow`: the leaf of a later call with other sizes (see `grown`). `relayout`: the same values in
    another memory layout (the last two dims transposed in memory; a channels-last leaf contiguous).
    """
    shape = grown(shape, grow)
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        t = torch.randint(0, 2, shape, generator=g).bool()
    elif dtype.is_floating_point:
        t = torch.randn(shape, generator=g, dtype=torch.float64)
        if fill == "wide":
            t = t * 1000
        elif fill == "positive":
            t = t.abs() + 0.1
        elif fill == "special" and t.numel():
            picks = torch.randint(0, len(SPECIAL_VALUES), shape, generator=g)
            where = torch.rand(shape, generator=g, dtype=torch.float64) < 0.1
            t = torch.where(where, torch.tensor(SPECIAL_VALUES, dtype=torch.float64)[picks], t)
        t = t.to(dtype)
    else:
        info = torch.iinfo(dtype)
        if fill == "full":
            t = torch.randint(max(info.min, -(2**62)), min(info.max, 2**62) + 1, shape, generator=g, dtype=torch.int64)
            flat = t.view(-1)
            if flat.numel() >= 2:  # the extremes themselves, where wrapping and overflow live
                flat[0], flat[1] = info.min, info.max
        elif fill == "index":
            t = torch.randint(0, 2**20, shape, generator=g, dtype=torch.int64)
        else:
            t = torch.randint(max(info.min, -10), min(info.max, 10) + 1, shape, generator=g, dtype=torch.int64)
        t = t.to(dtype)
    if ref and t.is_floating_point():
        t = t.to(torch.float64)
    t = t.to(DEVICE)  # values drawn on the CPU: the same on every device
    if channels_last and not relayout:
        t = t.contiguous(memory_format=torch.channels_last)
    elif relayout and t.dim() >= 2:
        t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if requires_grad:
        t.requires_grad_()
    return t


def coarse_like(t, seed):
    """Random values on a grid of quarters in [-2, 2]: exact in every float dtype, so the float64
    reference run gets the very same cotangents."""
    g = torch.Generator().manual_seed(seed)
    values = torch.randint(-8, 9, t.shape, generator=g).to(torch.float64) / 4
    return values.to(t.dtype).to(t.device)


def _snapshot(values):
    return [None if v is None else v.detach().cpu().clone() for v in values]


def run(fn, make_inputs, mode, ref=False, autocast=None, grow=0, relayout=False):
    """Run `fn` on fresh inputs in `mode` and return what to compare, as a dict of lists.

    Modes: "no_grad" (inference), "grad" (outputs, then the gradients of the leaves that require
    grad for random cotangents), "double" (also the gradients of those gradients, through
    ``torch.autograd.grad(create_graph=True)``). The dict holds "outputs", "requires_grad" (of each
    output), "args" (the arguments after the call: in-place updates must show), and in the grad
    modes "grads" / "grads2". `autocast` (a dtype): the call runs under the caller's
    ``torch.autocast("cpu", dtype=autocast)``; the backward runs outside it, as usual. `grow`: the
    inputs' sizes grown by that much (see `grown`); `relayout`: their values in another memory layout.
    """
    leaves, args = make_inputs(ref, grow, relayout)
    grad_leaves = [leaf for leaf in leaves if leaf.requires_grad]
    with torch.autocast(DEVICE, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        if mode == "no_grad":
            with torch.no_grad():
                outs = tuple(fn(*args))
        else:
            outs = tuple(fn(*args))
    result = {
        "outputs": _snapshot(outs),
        "requires_grad": [bool(o.requires_grad) for o in outs],
        "args": _snapshot(args),
    }
    if mode == "no_grad":
        return result
    diff = [(i, o) for i, o in enumerate(outs) if o.requires_grad]
    if not diff or not grad_leaves:
        return result
    cotangents = [coarse_like(o, 1000 + i) for i, o in diff]
    grads = torch.autograd.grad(
        [o for _, o in diff], grad_leaves, cotangents, allow_unused=True, create_graph=mode == "double"
    )
    result["grads"] = _snapshot(grads)
    if mode == "double":
        terms = [(g * coarse_like(g, 2000 + j)).sum() for j, g in enumerate(grads) if g is not None and g.requires_grad]
        if terms:
            result["grads2"] = _snapshot(torch.autograd.grad(sum(terms), grad_leaves, allow_unused=True))
    return result


def assert_matches(expected, actual):
    """`actual` (Kiln's run) equals `expected` (eager's): exact for integers and bool, close for floats.

    A missing gradient counts as zeros; dtypes and requires_grad must be equal, strides may differ.
    """
    for key in expected:
        assert key in actual, f"{key}: missing from Kiln's result"
        want, got = expected[key], actual[key]
        assert len(want) == len(got), f"{key}: {len(want)} values from eager, {len(got)} from Kiln"
        for i, (w, a) in enumerate(zip(want, got)):
            where = f"{key}[{i}]"
            if key == "requires_grad":
                assert w == a, f"{where}: requires_grad {w} in eager, {a} in Kiln"
                continue
            if w is None and a is None:
                continue
            if w is None or a is None:
                present = a if w is None else w
                assert not present.count_nonzero(), f"{where}: None on one side, nonzero on the other"
                continue
            assert w.dtype == a.dtype, f"{where}: dtype {w.dtype} in eager, {a.dtype} in Kiln"
            assert w.shape == a.shape, f"{where}: shape {tuple(w.shape)} in eager, {tuple(a.shape)} in Kiln"
            if w.is_floating_point():
                rtol, atol = FLOAT_TOLERANCES[w.dtype]
                torch.testing.assert_close(a, w, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m, _w=where: f"{_w}: {m}")
            else:
                assert torch.equal(w, a), f"{where}: eager {w} != Kiln {a}"
