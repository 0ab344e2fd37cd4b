"""Grammar rules for tensors made inside the program and for memory formats.

Factories (zeros_like, full, arange, linspace, eye, new_full, 0-d ``torch.tensor``) with explicit
dtypes meet the program's values in a binary op, so their dtype enters type promotion (a 0-d
float64 tensor does not widen a float16 value; an int64 arange does widen an int8 one). Layout
rules change strides without changing values: ``.to(memory_format=...)``, ``contiguous()``,
``clone()`` of a non-contiguous view, then sometimes a ``view`` that only a contiguous result allows.
"""

from __future__ import annotations

from tools.fuzz.builder import Builder

FACTORY_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")

FACTORIES: tuple[tuple[str, str], ...] = (
    ("zeros_like", "{0} + torch.zeros_like({0}, dtype=torch.{dt})"),
    ("ones_like", "{0} * torch.ones_like({0}, dtype=torch.{dt})"),
    ("full_like", "torch.full_like({0}, {s}) - {0}"),
    ("full", "{0} + torch.full({0}.shape, {s}, dtype=torch.{dt})"),
    ("full_row", "torch.full(({0}.size(-1),), {s}, dtype=torch.{dt}) * {0}"),
    ("arange", "{0} + torch.arange({0}.size(-1), dtype=torch.{dt})"),
    ("arange_step", "{0} * torch.arange(0, {0}.size(-1) * 3, 3)"),
    ("arange_float", "torch.arange(-1.5, -1.5 + 0.25 * {0}.size(-1), 0.25)[:{0}.size(-1)] + {0}"),
    ("arange_mask", "torch.where(torch.arange({0}.size(-1)) % 2 == 0, {0}, {s})"),
    ("arange_col", "{0} - torch.arange({0}.size(0), dtype=torch.{dt}).reshape(-1, *[1] * ({0}.dim() - 1))"),
    ("linspace", "{0} + torch.linspace(-2, 2, {0}.size(-1), dtype=torch.{fdt})"),
    ("eye", "{0} * torch.eye({0}.size(-2), {0}.size(-1), dtype=torch.{dt})"),
    ("tril_mask", "{0}.masked_fill(torch.ones({0}.size(-2), {0}.size(-1), dtype=torch.bool).triu(1), {s})"),
    ("new_full", "{0}.new_full(({0}.size(-1),), {s}) + {0}"),
    ("new_zeros", "torch.cat([{0}, {0}.new_zeros({0}.shape)], -1)"),
    ("empty_fill", "torch.empty_like({0}).fill_({s}) * {0}"),
    ("tensor_0d", "{0} * torch.tensor({s}, dtype=torch.{dt})"),
    ("tensor_0d_default", "torch.tensor({s}) + {0}"),
    ("scalar_tensor", "{0} - torch.scalar_tensor({s}, dtype=torch.{dt})"),
    ("tensor_list", "{0} + torch.tensor([{s}, 0, 1][:1] * {0}.size(-1), dtype=torch.{dt})"),
    ("zeros_0d", "torch.zeros((), dtype=torch.{dt}) + {0}"),
)

LAYOUTS: tuple[tuple[str, str], ...] = (
    ("to_channels_last", "{0}.to(memory_format=torch.channels_last)"),
    ("contiguous_channels_last", "{0}.contiguous(memory_format=torch.channels_last)"),
    ("clone_channels_last", "{0}.clone(memory_format=torch.channels_last)"),
    ("to_channels_last_dtype", "{0}.to(torch.{dt}, memory_format=torch.channels_last)"),
    ("to_contiguous_format", "{0}.to(memory_format=torch.contiguous_format)"),
    ("clone_preserve", "{0}.permute({perm}).clone()"),
    ("clone_contiguous", "{0}.permute({perm}).clone(memory_format=torch.contiguous_format)"),
    ("contiguous_view", "{0}.transpose(0, -1).contiguous().view(-1)"),
    ("stepped_clone", "{0}[..., ::2].clone()"),
    ("stepped_contiguous", "{0}.flip(0)[::2].contiguous()"),
    ("empty_like_copy", "torch.empty_like({0}.transpose(0, -1)).copy_({0}.transpose(0, -1))"),
    ("zeros_like_add", "torch.zeros_like({0}.mT) + {0}.mT"),
)


def create(b: Builder) -> bool:
    """A tensor made in the program (with a dtype) combined with a value, or a value in another
    memory format or made contiguous."""
    x = b.pick()
    if x is None:
        return False
    xt = b.tensor(x)
    rng = b.rng
    table = LAYOUTS if xt.dim() >= 2 and rng.random() < 0.4 else FACTORIES
    name, template = rng.choice(table)
    perm = list(range(xt.dim()))
    rng.shuffle(perm)
    filled = (template.replace("{dt}", rng.choice(FACTORY_DTYPES)).replace("{s}", b.scalar(xt.dtype))
              .replace("{fdt}", rng.choice(["float32", "float64", "float16"])).replace("{perm}", repr(tuple(perm))))
    return b.try_add(name, filled, (x,))
