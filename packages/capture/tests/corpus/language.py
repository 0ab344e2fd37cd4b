"""Assorted Python language features: walrus, match, chained comparisons, enums, ABCs, unpacking, operator."""

from __future__ import annotations

import abc
import enum
import functools
import operator
import typing

import torch

from ._registry import args, program, randn, x

F = "language"


class Mode(enum.Enum):
    """An enum read inside the region."""

    FAST = 1
    SLOW = 2


class Kind(enum.IntEnum):
    """An IntEnum used in arithmetic."""

    SMALL = 2
    LARGE = 5


class Activation(abc.ABC):
    """An abstract base with two implementations."""

    @abc.abstractmethod
    def __call__(self, t: torch.Tensor) -> torch.Tensor: ...


class Relu(Activation):
    """A concrete implementation."""

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        return t.relu()


class Scaled:
    """A functools.cached_property."""

    def __init__(self, k: float) -> None:
        self.k = k

    @functools.cached_property
    def squared(self) -> float:
        return self.k * self.k


@program(F, x(6))
def walrus_operator(a: torch.Tensor) -> torch.Tensor:
    if (n := a.shape[0]) > 4:
        return a * n
    return a


@program(F, args(lambda: randn(4), lambda: "double"))
def match_statement_on_string(a: torch.Tensor, op: str) -> torch.Tensor:
    match op:
        case "double":
            return a * 2
        case "square":
            return a * a
        case _:
            return a


@program(F, x(2, 3))
def match_statement_on_shape(a: torch.Tensor) -> torch.Tensor:
    match tuple(a.shape):
        case (rows, 3):
            return a.sum(1) * rows
        case _:
            return a.sum()


@program(F, x(5))
def chained_comparison(a: torch.Tensor) -> torch.Tensor:
    k = a.shape[0]
    return a + 1 if 0 < k < 10 else a


@program(F, x(4))
def enum_values(a: torch.Tensor) -> torch.Tensor:
    mode = Mode.FAST
    out = a * mode.value
    if mode is Mode.FAST:
        out = out + 1
    return out * Kind.LARGE


@program(F, x(4))
def abstract_base_dispatch(a: torch.Tensor) -> torch.Tensor:
    act: Activation = Relu()
    return act(a) if isinstance(act, Activation) else a


@program(F, x(4))
def cached_property_read(a: torch.Tensor) -> torch.Tensor:
    s = Scaled(3.0)
    return a * s.squared + s.squared


@program(F, x(4))
def typing_cast(a: torch.Tensor) -> torch.Tensor:
    b = typing.cast(torch.Tensor, a * 2)
    return b + 1


@program(F, x(4))
def sorted_with_key(a: torch.Tensor) -> torch.Tensor:
    names = sorted(["ccc", "a", "bb"], key=len)
    return a * len(names[-1]) + len(min(names, key=len))


@program(F, x(3, 2))
def zip_star_transpose(a: torch.Tensor) -> torch.Tensor:
    pairs = [(r[0], r[1]) for r in a]
    firsts, seconds = zip(*pairs)
    return torch.stack(firsts) - torch.stack(seconds)


@program(F, x(4))
def dict_from_zip(a: torch.Tensor) -> torch.Tensor:
    table = dict(zip(["a", "b"], [a, a * 2]))
    return table["a"] + table["b"]


@program(F, x(4))
def dict_and_list_unpacking_literals(a: torch.Tensor) -> torch.Tensor:
    base = {"x": a}
    merged = {**base, "y": a * 3}
    items = [*merged.values(), a.sin()]
    return sum(items)


@program(F, x(4))
def import_inside_function(a: torch.Tensor) -> torch.Tensor:
    import math

    return a * math.tau


@program(F, x(4))
def del_local_and_reassign(a: torch.Tensor) -> torch.Tensor:
    tmp = a * 2
    out = tmp + 1
    del tmp
    tmp = out.exp()
    return tmp


@program(F, x(6))
def slice_objects(a: torch.Tensor) -> torch.Tensor:
    head = slice(0, 3)
    tail = slice(3, None)
    return a[head] * a[tail]


@program(F, x(2, 3, 4))
def ellipsis_object(a: torch.Tensor) -> torch.Tensor:
    idx = (Ellipsis, 0)
    return a[idx] + a[..., -1]


@program(F, args(lambda: (randn(3), randn(3), randn(3))))
def operator_itemgetter(items: tuple[torch.Tensor, ...]) -> torch.Tensor:
    first, last = operator.itemgetter(0, 2)(items)
    return first * last


@program(F, x(4))
def operator_attrgetter(a: torch.Tensor) -> torch.Tensor:
    s = Scaled(2.0)
    return a * operator.attrgetter("k")(s)


@program(F, x(4))
def augmented_assignment_on_attribute(a: torch.Tensor) -> torch.Tensor:
    s = Scaled(1.0)
    s.k += 2.5
    s.k *= 2
    return a * s.k


@program(F, x(4))
def is_not_none_chains(a: torch.Tensor) -> torch.Tensor:
    bias = None
    scale = 2.0
    out = a * scale if scale is not None else a
    return out + bias if bias is not None else out


@program(F, x(4))
def conditional_expression_chain(a: torch.Tensor) -> torch.Tensor:
    k = a.dim()
    return a * (1 if k == 0 else 2 if k == 1 else 3)


@program(F, x(4))
def lambda_in_sorted_dict_items(a: torch.Tensor) -> torch.Tensor:
    d = {"b": 2.0, "a": 5.0}
    first = sorted(d.items(), key=lambda kv: kv[1])[0]
    return a * first[1]


@program(F, x(4))
def torch_assert(a: torch.Tensor) -> torch.Tensor:
    torch._assert(a.dim() == 1, "expects a vector")
    return a + 1


@program(F, x(4))
def cuda_available_branch(a: torch.Tensor) -> torch.Tensor:
    if torch.cuda.is_available() and a.is_cuda:
        return a.cuda() * 2
    return a * 3


@program(F, x(4))
def global_function_via_module_attribute(a: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.relu(a) + torch.special.expm1(a)
