"""Grammar rules for neural-network ops: convolutions, pooling, normalizations, interpolation, RNNs.

They are compositions the compiler decomposes or lowers specially (convolution and RNN fallbacks,
pooling windows, batch-norm statistics), where gradient formulas and layouts go wrong in ways the
pointwise grammar does not reach. Weights are new inputs of the right shape; the data operand is
an existing value reshaped by the template when its rank is not the op's.
"""

from __future__ import annotations

import torch

from tools.fuzz.builder import Builder, dtype_name


def well_scaled(xt: torch.Tensor) -> bool:
    """Whether normalizing `xt` is well-conditioned: no finite value beyond 1e4. (Eager's CPU norms
    take the statistics in one pass; at 1e30 their output is a cancellation error, which a float64
    program's reference, eager itself, cannot judge.)"""
    finite = xt.detach()[xt.detach().isfinite()]
    return finite.numel() == 0 or float(finite.abs().max()) <= 1e4


def nn(b: Builder) -> bool:
    """conv1d/conv2d, max/avg/adaptive pooling, batch/group norm, interpolate, GRU/LSTM/RNN cells and layers."""
    x = b.pick(lambda t: t.is_floating_point() and t.dim() >= 2 and t.shape[-1] >= 3 and t.numel() > 0)
    if x is None:
        return False
    xt = b.tensor(x)
    rng = b.rng
    dtype = dtype_name(xt.dtype)
    kind = rng.choice(["conv1d", "conv2d", "max_pool", "avg_pool", "adaptive", "batch_norm", "group_norm",
                       "interpolate", "gru", "gru", "lstm", "rnn_cell"])
    if kind in ("conv1d", "conv2d"):
        two = kind == "conv2d" and xt.dim() == 4
        channels = xt.shape[1] if (xt.dim() == 3 or two) else 1
        data = "{0}" if (xt.dim() == 3 or two) else "{0}.reshape(-1, 1, {0}.shape[-1])"
        k = rng.choice([1, 2, 3])
        out_ch = rng.choice([1, 2, 4])
        groups = 1
        if channels % 2 == 0 and rng.random() < 0.3:
            groups = 2
            out_ch = 2 * out_ch
        w_shape = (out_ch, channels // groups, k, k) if two else (out_ch, channels // groups, k)
        w = b.new_input(w_shape, dtype)
        bias = b.new_input((out_ch,), dtype) if rng.random() < 0.5 else None
        stride, padding, dilation = rng.choice([1, 2]), rng.choice([0, 1]), rng.choice([1, 1, 2])
        fn = "conv2d" if two else "conv1d"
        rest = f"stride={stride}, padding={padding}, dilation={dilation}, groups={groups}"
        if bias is None:
            return b.try_add(fn, f"F.{fn}({data}, {{1}}, None, {rest})", (x, w))
        return b.try_add(fn, f"F.{fn}({data}, {{1}}, {{2}}, {rest})", (x, w, bias))
    if kind in ("max_pool", "avg_pool"):
        k, s = rng.choice([(2, 2), (3, 1), (3, 2), (2, 1)])
        pad = rng.choice([0, 1]) if k >= 3 else 0
        if xt.dim() >= 4 and rng.random() < 0.6:
            fn = "max_pool2d" if kind == "max_pool" else "avg_pool2d"
        else:
            fn = "max_pool1d" if kind == "max_pool" else "avg_pool1d"
        if kind == "max_pool" and b.mode != "no_grad" and torch.unique(xt).numel() < xt.numel():
            return False  # the gradient goes to one of equal maxima: which one is up to the implementation
        extra = ", ceil_mode=True" if rng.random() < 0.3 else ""
        if fn == "avg_pool2d" and rng.random() < 0.5:
            extra += ", count_include_pad=False"
        return b.try_add(fn, f"F.{fn}({{0}}, {k}, {s}, {pad}{extra})", (x,))
    if kind == "adaptive":
        fn = "adaptive_avg_pool2d" if xt.dim() >= 3 and rng.random() < 0.5 else "adaptive_avg_pool1d"
        size = rng.choice([1, 2, 3, 5])
        return b.try_add(fn, f"F.{fn}({{0}}, {size})", (x,))
    if kind in ("batch_norm", "group_norm") and not well_scaled(xt):
        return False
    if kind == "batch_norm":
        c = xt.shape[1]
        # Running statistics are inputs updated in place (training=True): an input mutation to carry out.
        mean = b.new_input((c,), dtype, layout="contiguous", requires_grad=False)
        var = b.new_input((c,), dtype, "positive", layout="contiguous", requires_grad=False)
        weight, bias = b.new_input((c,), dtype), b.new_input((c,), dtype)
        training = rng.random() < 0.5
        template = f"F.batch_norm({{0}}, {{1}}, {{2}}, {{3}}, {{4}}, training={training}, momentum=0.25)"
        return b.try_add("batch_norm_train" if training else "batch_norm_eval", template, (x, mean, var, weight, bias))
    if kind == "group_norm":
        c = xt.shape[1]
        groups = rng.choice([g for g in (1, 2, 3) if c % g == 0] or [1])
        weight, bias = b.new_input((c,), dtype), b.new_input((c,), dtype)
        return b.try_add("group_norm", f"F.group_norm({{0}}, {groups}, {{1}}, {{2}})", (x, weight, bias))
    if kind == "interpolate":
        mode = rng.choice(["nearest", "linear" if xt.dim() == 3 else "bilinear" if xt.dim() == 4 else "nearest"])
        corners = ", align_corners=False" if mode != "nearest" else ""
        return b.try_add("interpolate_" + mode, f"F.interpolate({{0}}, scale_factor=2, mode='{mode}'{corners})", (x,))
    hidden = rng.choice([2, 3, 8])
    feat = xt.shape[-1]
    if kind == "rnn_cell":
        cell = rng.choice(["gru_cell", "rnn_tanh_cell"])
        gates = 3 if cell == "gru_cell" else 1
        data = "{0}.reshape(-1, {0}.shape[-1])"
        h = b.new_input((1, hidden), dtype)
        w_ih, w_hh = b.new_input((gates * hidden, feat), dtype), b.new_input((gates * hidden, hidden), dtype)
        b_ih, b_hh = b.new_input((gates * hidden,), dtype), b.new_input((gates * hidden,), dtype)
        template = f"torch.{cell}({data}, {{1}}.expand({data}.shape[0], {hidden}), {{2}}, {{3}}, {{4}}, {{5}})"
        return b.try_add(cell, template, (x, h, w_ih, w_hh, b_ih, b_hh))
    gates = 3 if kind == "gru" else 4
    batch_first = rng.random() < 0.5
    data = "{0}" if xt.dim() == 3 else "{0}.reshape(-1, 1, {0}.shape[-1])" if xt.dim() == 2 else "{0}.flatten(0, -3)"
    if xt.dim() == 3:
        batch = xt.shape[0] if batch_first else xt.shape[1]
    elif xt.dim() == 2:
        batch = xt.shape[0] if batch_first else 1
    else:
        batch = xt.shape[-2] if not batch_first else int(xt.numel() // (xt.shape[-1] * xt.shape[-2]))
    h0 = b.new_input((1, batch, hidden), dtype)
    w_ih, w_hh = b.new_input((gates * hidden, feat), dtype), b.new_input((gates * hidden, hidden), dtype)
    b_ih, b_hh = b.new_input((gates * hidden,), dtype), b.new_input((gates * hidden,), dtype)
    if kind == "gru":
        template = f"torch.gru({data}, {{1}}, [{{2}}, {{3}}, {{4}}, {{5}}], True, 1, 0.0, False, False, {batch_first})[{rng.randrange(2)}]"
        return b.try_add("gru", template, (x, h0, w_ih, w_hh, b_ih, b_hh))
    c0 = b.new_input((1, batch, hidden), dtype)
    template = (f"torch.lstm({data}, [{{1}}, {{6}}], [{{2}}, {{3}}, {{4}}, {{5}}], True, 1, 0.0, False, False, "
                f"{batch_first})[{rng.randrange(3)}]")
    return b.try_add("lstm", template, (x, h0, w_ih, w_hh, b_ih, b_hh, c0))
