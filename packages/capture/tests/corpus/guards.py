"""Programs whose non-tensor inputs or shapes change between the two calls: the guards must notice.

The harness calls every program twice, with input seeds 0 and 1; here the seed also picks Python scalars,
strings, flags, list lengths and tensor shapes (`_variant` makes the two calls differ for sure), so a missing
guard gives a wrong second result.
"""

from __future__ import annotations

from typing import Any

import torch

from ._registry import program

F = "guards"


def _variant(options: list[Any]) -> Any:
    """The option picked by the input seed: the harness's two calls (seeds 0 and 1) get different ones."""
    return options[torch.initial_seed() % len(options)]


def _small_int(low: int, high: int) -> int:
    return _variant(list(range(low, high)))


def _seeded_shape() -> torch.Tensor:
    return torch.randn(_small_int(2, 9), 3)


def _flag() -> bool:
    return _variant([False, True])


@program(F, lambda: (torch.randn(4), _small_int(1, 100)))
def python_int_argument(a: torch.Tensor, k: int) -> torch.Tensor:
    return a * k + k // 3


@program(F, lambda: (torch.randn(4), _variant([0.5, 1.5, 2.5])))
def python_float_argument(a: torch.Tensor, scale: float) -> torch.Tensor:
    return a * scale


@program(F, lambda: (torch.randn(4), _variant(["relu", "tanh", "sigmoid"])))
def string_argument(a: torch.Tensor, act: str) -> torch.Tensor:
    return getattr(torch, act)(a)


@program(F, lambda: (torch.randn(4), _flag()))
def bool_flag_argument(a: torch.Tensor, flag: bool) -> torch.Tensor:
    return a.exp() if flag else a.neg()


@program(F, lambda: (_seeded_shape(),))
def varying_first_dimension(a: torch.Tensor) -> torch.Tensor:
    return a.sum(0) / a.shape[0]


@program(F, lambda: (_seeded_shape(),))
def varying_shape_reshape(a: torch.Tensor) -> torch.Tensor:
    return a.reshape(-1, a.shape[0]).softmax(-1)


@program(F, lambda: ([torch.randn(3) for _ in range(_small_int(1, 6))],))
def varying_list_length(items: list[torch.Tensor]) -> torch.Tensor:
    out = items[0]
    for t in items[1:]:
        out = out + t
    return out * len(items)


@program(F, lambda: (torch.randn(4), {"scale": _variant([0.5, 2.0]), "steps": _small_int(1, 4)}))
def dict_of_scalars_argument(a: torch.Tensor, options: dict[str, Any]) -> torch.Tensor:
    for _ in range(options["steps"]):
        a = a * options["scale"] + 1
    return a


@program(F, lambda: (torch.randn(4).to(_variant([torch.float32, torch.float64])),))
def varying_dtype(a: torch.Tensor) -> torch.Tensor:
    return (a * 2).to(torch.float32) + (1 if a.dtype == torch.float64 else 0)


@program(F, lambda: (torch.randn(3, 4) if _flag() else torch.randn(4, 3).t(),))
def varying_contiguity(a: torch.Tensor) -> torch.Tensor:
    return a.view(-1) if a.is_contiguous() else a.reshape(-1) * 2


@program(F, lambda: (torch.randn(4, requires_grad=_flag()),))
def varying_requires_grad(a: torch.Tensor) -> torch.Tensor:
    return (a * 3).detach() + (1.0 if a.requires_grad else 0.0)


@program(F, lambda: (torch.randn(4), None if _flag() else torch.rand(4)))
def optional_tensor_argument(a: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    return a if mask is None else a * mask


@program(F, lambda: (torch.randn(5), tuple(range(_small_int(1, 4)))))
def tuple_of_ints_argument(a: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    for d in dims:
        a = a.roll(d)
    return a + len(dims)


@program(F, lambda: (torch.randn(2, _small_int(2, 6), 4),))
def varying_middle_dimension_attention(a: torch.Tensor) -> torch.Tensor:
    scores = a @ a.transpose(-1, -2) / a.shape[-1] ** 0.5
    return scores.softmax(-1) @ a


def _maybe_aliased_pair() -> tuple[list[torch.Tensor]]:
    """Two list items that are one tensor for input seed 0 and two tensors for seed 1."""
    first = torch.randn(4)
    second = torch.randn(4)
    return ([first, _variant([first, second])],)


@program(F, _maybe_aliased_pair)
def aliasing_of_list_items_changes(items: list[torch.Tensor]) -> torch.Tensor:
    return items[0] * 2 + items[1]
