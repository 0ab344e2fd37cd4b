"""str methods and f-strings on constants inside the traced region."""

from __future__ import annotations

import torch

from ._registry import args, program, randn, x

F = "strings"


@program(F, x(4))
def fstring_key(a: torch.Tensor) -> torch.Tensor:
    d = {f"layer_{i}": a * i for i in range(3)}
    return d["layer_2"] - d[f"layer_{1}"]


@program(F, x(4))
def fstring_format_spec(a: torch.Tensor) -> torch.Tensor:
    name = f"{3.14159:.2f}-{7:03d}"
    return a * len(name)


@program(F, x(4))
def str_methods(a: torch.Tensor) -> torch.Tensor:
    s = "  Hello_World  ".strip().lower()
    parts = s.split("_")
    if s.startswith("hello") and parts[1] == "world":
        return a + len(parts)
    return a


@program(F, x(4))
def str_join_and_replace(a: torch.Tensor) -> torch.Tensor:
    s = "-".join(["a", "b", "c"]).replace("-", "")
    return a * len(s)


@program(F, x(4))
def str_format_method(a: torch.Tensor) -> torch.Tensor:
    key = "{}_{}".format("w", 2)
    table = {"w_2": 3.0}
    return a * table[key]


@program(F, x(4))
def percent_format(a: torch.Tensor) -> torch.Tensor:
    key = "%s.%d" % ("block", 4)  # noqa: UP031
    return a * len(key)


@program(F, args(lambda: randn(4), lambda: "gelu"))
def string_argument_dispatch(a: torch.Tensor, act: str) -> torch.Tensor:
    if act == "relu":
        return a.relu()
    if act == "gelu":
        return torch.nn.functional.gelu(a)
    return a


@program(F, x(4))
def str_of_int_constant(a: torch.Tensor) -> torch.Tensor:
    return a * int(str(12)[::-1])


@program(F, x(4))
def str_in_and_find(a: torch.Tensor) -> torch.Tensor:
    s = "encoder.layer.3.weight"
    idx = s.find("layer")
    return a * idx if "weight" in s else a


@program(F, x(4))
def str_isdigit_upper(a: torch.Tensor) -> torch.Tensor:
    n = sum(1 for c in "a1b2c3" if c.isdigit())
    return a * n + len("abc".upper())


@program(F, x(4))
def fstring_of_shape(a: torch.Tensor) -> torch.Tensor:
    label = f"{a.shape[0]}x{a.dim()}"
    return a * len(label)


@program(F, x(4))
def repr_and_str_of_constant(a: torch.Tensor) -> torch.Tensor:
    return a * len(repr((1, 2))) + len(str(None))
