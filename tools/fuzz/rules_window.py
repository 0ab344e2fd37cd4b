"""Grammar rules for windowed and resampling nn ops beyond `rules_nn`: pooling that returns
indices, adaptive max pooling, 3-d pooling, avg_pool's divisor_override with padding and
ceil_mode, lp_pool, interpolate in every mode (align_corners, fractional and downscaling factors,
explicit sizes, antialias), padding modes (reflect, replicate, circular), transposed and
channels-last convolutions, padding='same', im2col (unfold/fold), pixel_shuffle and instance_norm
with running statistics updated in place.

Window arithmetic (ceil_mode windows starting in the padding, clipped edge windows, output sizes
rounded per mode) is where a loop-level lowering computes an index slightly wrong.
"""

from __future__ import annotations

import torch

from tools.fuzz.builder import Builder, dtype_name
from tools.fuzz.rules_nn import well_scaled
from tools.fuzz.ties import sorted_neighbours_tie


def _ties(xt: torch.Tensor) -> bool:
    """Any two equal elements (or a NaN) anywhere: which window maximum an index names, or which one a
    gradient reaches, is then up to the implementation."""
    flat = xt.detach().reshape(-1)
    return bool(flat.isnan().any()) or sorted_neighbours_tie(flat, 0)  # up to rounding: tools/fuzz/ties.py


def window(b: Builder) -> bool:
    """Pooling with indices, adaptive max, 3-d and lp pooling, interpolate modes, padding modes,
    conv_transpose, convolutions with padding='same', unfold/fold, pixel_shuffle, instance_norm."""
    x = b.pick(lambda t: t.is_floating_point() and t.dim() >= 2 and t.shape[-1] >= 2 and t.numel() > 0)
    if x is None:
        return False
    xt = b.tensor(x)
    rng = b.rng
    kind = rng.choice(["max_pool_indices", "adaptive_max", "pool3d", "avg_divisor", "lp_pool", "interpolate",
                       "interpolate", "pad_mode", "pad_mode", "conv_transpose", "conv_same", "unfold", "pixel_shuffle",
                       "instance_norm"])
    four = xt.dim() == 4
    if kind == "max_pool_indices":
        if _ties(xt):
            return False
        k, s = rng.choice([(2, 2), (3, 1), (3, 2), (2, 1)])
        pad = rng.choice([0, 1]) if k >= 3 else 0
        dil = rng.choice([1, 1, 2])
        fn = "max_pool2d" if four and rng.random() < 0.7 else "max_pool1d"
        ceil = rng.random() < 0.4
        return b.try_add(fn + "_indices", f"F.{fn}({{0}}, {k}, {s}, {pad}, {dil}, ceil_mode={ceil}, return_indices=True)"
                         f"[{rng.randrange(2)}]", (x,))
    if kind == "adaptive_max":
        if _ties(xt):
            return False
        fn = "adaptive_max_pool2d" if xt.dim() >= 3 and rng.random() < 0.6 else "adaptive_max_pool1d"
        size = rng.choice(["1", "2", "3", "5"] + (["(2, None)", "(None, 3)", "(3, 1)"] if fn.endswith("2d") else []))
        return b.try_add(fn, f"F.{fn}({{0}}, {size}, return_indices=True)[{rng.randrange(2)}]", (x,))
    if kind == "pool3d":
        data = "{0}" if four else "{0}.unsqueeze(0)"
        if rng.random() < 0.5:
            if b.mode != "no_grad" and _ties(xt):
                return False
            return b.try_add("max_pool3d", f"F.max_pool3d({data}.unsqueeze(0), (1, 2, 2), (1, 2, 1), ceil_mode=True)[0]", (x,))
        return b.try_add("avg_pool3d", f"F.avg_pool3d({data}.unsqueeze(0), (1, 3, 2), 1, (0, 1, 1), count_include_pad=False)[0]",
                         (x,))
    if kind == "avg_divisor":
        fn = "avg_pool2d" if four or rng.random() < 0.5 else "avg_pool1d"
        k, s = rng.choice([(3, 2), (2, 1), (3, 3), (2, 2)])
        pad = rng.choice([0, 1])
        extra = f", ceil_mode={rng.random() < 0.5}, count_include_pad={rng.random() < 0.5}"
        if fn == "avg_pool2d" and rng.random() < 0.5:
            extra += f", divisor_override={rng.choice([1, 3, 7])}"
        return b.try_add(fn + "_window", f"F.{fn}({{0}}, {k}, {s}, {pad}{extra})", (x,))
    if kind == "lp_pool":
        p = rng.choice(["1", "2", "3.0"])
        fn = "lp_pool2d" if four and rng.random() < 0.5 else "lp_pool1d"
        data = "{0}.abs()" if p == "3.0" else "{0}"
        return b.try_add(fn, f"F.{fn}({data}, {p}, 2, {rng.choice([1, 2])}, ceil_mode={rng.random() < 0.3})", (x,))
    if kind == "interpolate":
        return _interpolate(b, x)
    if kind == "pad_mode":
        mode = rng.choice(["reflect", "replicate", "circular"])
        nd = rng.choice([1, 2]) if xt.dim() >= 3 else 1
        limit = min(xt.shape[-1], xt.shape[-2] if nd == 2 else xt.shape[-1]) - 1
        pads = [rng.randint(0, max(0, min(3, limit))) for _ in range(2 * nd)]
        if mode == "circular":
            pads = [min(p, limit + 1) for p in pads]
        if rng.random() < 0.2:
            pads[0] = -1  # a negative pad crops
        return b.try_add("pad_" + mode, f"F.pad({{0}}, {tuple(pads)!r}, mode='{mode}')", (x,))
    if kind == "conv_transpose":
        two = four and rng.random() < 0.6
        channels = xt.shape[1] if xt.dim() == 3 or two else 1
        data = "{0}" if xt.dim() == 3 or two else "{0}.reshape(-1, 1, {0}.shape[-1])"
        groups = 2 if channels % 2 == 0 and rng.random() < 0.3 else 1
        out_per_group = rng.choice([1, 2, 3])
        k = rng.choice([1, 2, 3])
        stride, padding, dilation = rng.choice([1, 2, 3]), rng.choice([0, 1]), rng.choice([1, 2])
        out_pad = rng.choice([0, 1]) if max(stride, dilation) > 1 else 0
        w = b.new_input((channels, out_per_group, k, k) if two else (channels, out_per_group, k), dtype_name(xt.dtype))
        bias = b.new_input((out_per_group * groups,), dtype_name(xt.dtype)) if rng.random() < 0.5 else None
        fn = "conv_transpose2d" if two else "conv_transpose1d"
        rest = f"stride={stride}, padding={padding}, output_padding={out_pad}, groups={groups}, dilation={dilation}"
        if bias is None:
            return b.try_add(fn, f"F.{fn}({data}, {{1}}, None, {rest})", (x, w))
        return b.try_add(fn, f"F.{fn}({data}, {{1}}, {{2}}, {rest})", (x, w, bias))
    if kind == "conv_same":
        two = four
        channels = xt.shape[1] if xt.dim() == 3 or two else 1
        data = "{0}" if xt.dim() == 3 or two else "{0}.reshape(-1, 1, {0}.shape[-1])"
        k = rng.choice([2, 3, 4])
        out_ch = rng.choice([1, 3])
        w_shape = (out_ch, channels, k, rng.choice([1, k])) if two else (out_ch, channels, k)
        w = b.new_input(w_shape, dtype_name(xt.dtype))
        fn = "conv2d" if two else "conv1d"
        if two and rng.random() < 0.5:
            data = data.replace("{0}", "{0}.contiguous(memory_format=torch.channels_last)", 1) if data == "{0}" else data
        return b.try_add(fn + "_same", f"F.{fn}({data}, {{1}}, padding='same', dilation={rng.choice([1, 2])})", (x, w))
    if kind == "unfold":
        if not four:
            return False
        k, s = rng.choice([(2, 1), (2, 2), (3, 1)]), rng.choice([1, 2])
        pad, dil = rng.choice([0, 1]), rng.choice([1, 2])
        template = f"F.unfold({{0}}, {k[0]}, dilation={dil}, padding={pad}, stride={s})"
        if rng.random() < 0.4:
            # fold(unfold(x)) sums each pixel over the windows covering it.
            template = (f"F.fold({template}, ({{0}}.size(2), {{0}}.size(3)), {k[0]}, dilation={dil}, padding={pad}, "
                        f"stride={s})")
            return b.try_add("fold_unfold", template, (x,))
        return b.try_add("im2col", template, (x,))
    if kind == "pixel_shuffle":
        if not four:
            return False
        if rng.random() < 0.5:
            return b.try_add("pixel_unshuffle", "F.pixel_unshuffle({0}, 2)", (x,))
        return b.try_add("pixel_shuffle", "F.pixel_shuffle({0}, 2)", (x,))
    if xt.dim() < 3 or not well_scaled(xt):
        return False
    spread = xt.detach().double().flatten(2).var(-1, correction=0)
    if spread.numel() == 0 or not bool((spread > 1e-3).all()):
        # A (nearly) constant instance (an expanded input) has rstd = eps ** -0.5: its gradient is
        # a cancellation of rounding errors 300 times over, zero in eager only by summation order.
        return False
    c = xt.shape[1]
    dtype = dtype_name(xt.dtype)
    mean = b.new_input((c,), dtype, layout="contiguous", requires_grad=False)
    var = b.new_input((c,), dtype, "positive", layout="contiguous", requires_grad=False)
    weight, bias = b.new_input((c,), dtype), b.new_input((c,), dtype)
    return b.try_add("instance_norm", "F.instance_norm({0}, {1}, {2}, {3}, {4}, use_input_stats=True, momentum=0.3)",
                     (x, mean, var, weight, bias))


def _interpolate(b: Builder, x: str) -> bool:
    xt = b.tensor(x)
    rng = b.rng
    modes = {3: ["nearest", "nearest-exact", "linear", "area"],
             4: ["nearest", "nearest-exact", "bilinear", "bicubic", "area"]}.get(xt.dim(), ["nearest", "nearest-exact"])
    mode = rng.choice(modes)
    spatial = xt.dim() - 2
    if rng.random() < 0.5:
        size = tuple(rng.choice([1, 3, 5, 8]) for _ in range(spatial))
        how = f"size={size[0] if spatial == 1 else size!r}"
    else:
        how = f"scale_factor={rng.choice(['0.5', '1.5', '2.25', '3', '0.75'])}"
        if rng.random() < 0.3:
            how += ", recompute_scale_factor=True"
    extra = ""
    if mode in ("linear", "bilinear", "bicubic"):
        extra = f", align_corners={rng.random() < 0.5}"
        if mode != "linear" and rng.random() < 0.3:
            extra += ", antialias=True"
    return b.try_add("interpolate_" + mode.replace("-", "_"), f"F.interpolate({{0}}, {how}, mode='{mode}'{extra})", (x,))
