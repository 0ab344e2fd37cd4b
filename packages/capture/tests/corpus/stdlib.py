"""Standard-library helpers inside the region: enum, dataclasses, operator getters, functools, dict views,
`match` statements, object.__new__, str methods on lists. Each has tensor work on both sides of it."""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import math
import operator
import os
import sys
import typing

import torch

from ._registry import program, x, xy

F = "stdlib"


class Mode(enum.Enum):
    """An Enum configuring a computation."""

    SUM = 1
    MEAN = 2
    MAX = 3


@dataclasses.dataclass
class Scales:
    """A dataclass of constants."""

    weight: float = 2.0
    bias: float = 1.0


@dataclasses.dataclass
class Pair:
    """A dataclass holding tensors."""

    first: torch.Tensor
    second: torch.Tensor


class Holder:
    """A plain class for attrgetter and object.__new__."""

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value


@functools.lru_cache(maxsize=16)
def _cached_width(n: int) -> int:
    return n * 2 + 1


@program(F, x(4))
def enum_member_by_value(a: torch.Tensor) -> torch.Tensor:
    b = a.sin()
    mode = Mode(2)
    return b.mean() + b if mode is Mode.MEAN else b.sum() + b


@program(F, x(4))
def enum_iteration_and_len(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    total = sum(member.value for member in Mode)
    return b * total + len(Mode)


@program(F, x(4))
def enum_name_lookup(a: torch.Tensor) -> torch.Tensor:
    b = a.exp()
    mode = Mode["MAX"]
    return b.amax() - b if mode.name == "MAX" else b


@program(F, x(4))
def dataclass_replace_constants(a: torch.Tensor) -> torch.Tensor:
    b = a.cos()
    scales = dataclasses.replace(Scales(), bias=-1.0)
    return b * scales.weight + scales.bias


@program(F, xy((4,)))
def dataclass_replace_tensor_field(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    pair = Pair(a * 2, b)
    swapped = dataclasses.replace(pair, second=a.sin())
    return swapped.first + swapped.second


@program(F, x(4))
def dataclass_fields_names(a: torch.Tensor) -> torch.Tensor:
    b = a + 1
    names = [field.name for field in dataclasses.fields(Scales)]
    return b * len(names) + len(names[0])


@program(F, x(4))
def itemgetter_on_list(a: torch.Tensor) -> torch.Tensor:
    parts = [a, a * 2, a * 3]
    first, last = operator.itemgetter(0, -1)(parts)
    return first - last


@program(F, x(4))
def attrgetter_on_object(a: torch.Tensor) -> torch.Tensor:
    holder = Holder(a.tanh())
    return operator.attrgetter("value")(holder) * 2


@program(F, x(3, 4))
def methodcaller_on_tensor(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    return operator.methodcaller("sum", 1)(b) + 1


@program(F, x(4))
def sorted_with_itemgetter_key(a: torch.Tensor) -> torch.Tensor:
    pairs = [(3, a), (1, a * 2), (2, a * 3)]
    ordered = sorted(pairs, key=operator.itemgetter(0))
    return ordered[0][1] - ordered[-1][1]


@program(F, x(4))
def dict_fromkeys_shared_value(a: torch.Tensor) -> torch.Tensor:
    b = a * 3
    d = dict.fromkeys(["x", "y"], b)
    return d["x"] + d["y"]


@program(F, x(4))
def object_new_without_init(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    holder = object.__new__(Holder)
    holder.value = b
    return holder.value + 1


@program(F, x(4))
def class_new_then_init(a: torch.Tensor) -> torch.Tensor:
    b = a.exp()
    holder = Holder.__new__(Holder)
    Holder.__init__(holder, b)
    return holder.value * 2


@program(F, x(4))
def lru_cached_helper(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    return b * _cached_width(3) + 1


@program(F, x(4))
def functools_wraps_decorator(a: torch.Tensor) -> torch.Tensor:
    def doubled(fn):  # type: ignore[no-untyped-def]
        @functools.wraps(fn)
        def wrapper(t: torch.Tensor) -> torch.Tensor:
            return fn(t) * 2

        return wrapper

    @doubled
    def step(t: torch.Tensor) -> torch.Tensor:
        return t + 1

    return step(a.sin())


@program(F, x(4))
def dict_keys_set_operations(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    weights = {"w": 1.0, "b": 2.0}
    shared = weights.keys() & {"w", "z"}
    missing = {"w", "z"} - weights.keys()
    return b * len(shared) + len(missing)


@program(F, x(4))
def sorted_dict_items_with_tensors(a: torch.Tensor) -> torch.Tensor:
    d = {"b": a * 2, "a": a.cos()}
    return sum(value * index for index, (_, value) in enumerate(sorted(d.items())))


@program(F, x(4))
def dict_items_view_returned(a: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
    d = {"x": a * 2, "y": a.sin()}
    keys = d.keys()
    return d["x"] + d["y"], list(keys)


@program(F, x(4))
def str_join_and_format_on_lists(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    name = "-".join(["layer", str(3)])
    return b * len(name) + len("{}:{}".format(*["a", "bc"]))


@program(F, x(4))
def math_functions_on_lists(a: torch.Tensor) -> torch.Tensor:
    b = a + 1
    return b * math.prod([2, 3]) + math.fsum([0.5, 0.25]) + math.dist([0, 0], [3, 4])


@program(F, x(4))
def match_sequence_pattern(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    match [1, 2, 3]:
        case [first, *rest]:
            return b * first + len(rest)
    return b


@program(F, x(4))
def match_mapping_pattern(a: torch.Tensor) -> torch.Tensor:
    b = a.exp()
    config = {"act": "relu", "scale": 2.0}
    match config:
        case {"act": "relu", "scale": scale}:
            return b.relu() * scale
        case _:
            return b


@program(F, x(4))
def match_class_pattern(a: torch.Tensor) -> torch.Tensor:
    b = a.sin()
    spec = Scales(3.0, 0.5)
    match spec:
        case Scales(weight=w, bias=0.5):
            return b * w
        case Scales():
            return b
    return b * 0


@program(F, x(4))
def match_literal_and_guard(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    match a.dim():
        case 0:
            return b
        case n if n > 0:
            return b.sum() + n
    return b


@program(F, lambda: (torch.randn(4), 2))
def match_on_python_int_input(a: torch.Tensor, k: int) -> torch.Tensor:
    match k:
        case int(value) if value > 1:
            return a * value
        case _:
            return a


@program(F, x(4))
def environ_flag_with_default(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    if os.environ.get("KILN_CORPUS_UNSET_FLAG", "0") == "1":
        return b
    return b + int(os.getenv("KILN_CORPUS_UNSET_LEVEL", "3"))


@program(F, x(4))
def sys_version_branch(a: torch.Tensor) -> torch.Tensor:
    b = a.sin()
    if sys.version_info < (3, 99):
        return b * 2
    return b


@program(F, x(4))
def inspect_predicates(a: torch.Tensor) -> torch.Tensor:
    b = a * 2

    def helper(t: torch.Tensor) -> torch.Tensor:
        return t + 1

    if inspect.isfunction(helper) and not inspect.isclass(helper):
        return helper(b)
    return b


@program(F, x(4))
def jit_annotate_typed_containers(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    parts = torch.jit.annotate(typing.List[torch.Tensor], [])  # noqa: UP006 (TorchScript-style code)
    scales = torch.jit.annotate(dict[str, float], {})
    extra = torch.jit.annotate(typing.Optional[torch.Tensor], None)  # noqa: UP045
    parts.append(b)
    scales["s"] = 3.0
    out = parts[0] * scales["s"]
    return out if extra is None else out + extra


@program(F, x(4))
def dict_view_follows_later_insertions(a: torch.Tensor) -> torch.Tensor:
    d = {"x": a}
    keys, values = d.keys(), d.values()
    d["y"] = a * 2
    return a * len(keys) + sum(values)
