"""dict, list, set and tuple methods on Python containers inside the traced region."""

from __future__ import annotations

import collections

import torch

from ._registry import args, program, randn, x

F = "containers"


@program(F, x(4))
def list_append_extend(a: torch.Tensor) -> torch.Tensor:
    parts = [a]
    parts.append(a * 2)
    parts.extend([a * 3, a * 4])
    return torch.stack(parts).sum(0)


@program(F, x(4))
def list_insert_pop(a: torch.Tensor) -> torch.Tensor:
    parts = [a, a + 1, a + 2]
    parts.insert(1, a * 10)
    last = parts.pop()
    first = parts.pop(0)
    return last - first + parts[0]


@program(F, x(4))
def list_slice_and_reverse(a: torch.Tensor) -> torch.Tensor:
    parts = [a * k for k in range(5)]
    parts.reverse()
    return sum(parts[1:4]) + parts[-1]


@program(F, x(4))
def list_index_count(a: torch.Tensor) -> torch.Tensor:
    keys = ["x", "y", "z", "y"]
    return a * keys.index("z") + keys.count("y")


@program(F, x(4))
def list_sort_constants(a: torch.Tensor) -> torch.Tensor:
    sizes = [3, 1, 2]
    sizes.sort()
    return a * sizes[0] + sorted(sizes, reverse=True)[0]


@program(F, x(4))
def list_concat_and_repeat(a: torch.Tensor) -> torch.Tensor:
    parts = [a] * 2 + [a.sin()]
    return torch.cat(parts)


@program(F, x(4))
def list_del_and_clear(a: torch.Tensor) -> torch.Tensor:
    parts = [a, a * 2, a * 3]
    del parts[1]
    out = parts[0] + parts[1]
    parts.clear()
    return out + len(parts)


@program(F, x(4))
def list_copy_is_independent(a: torch.Tensor) -> torch.Tensor:
    parts = [a, a * 2]
    copy = parts.copy()
    copy.append(a * 3)
    return sum(copy) - len(parts)


@program(F, x(4))
def dict_get_setdefault(a: torch.Tensor) -> torch.Tensor:
    d = {"w": a}
    d.setdefault("b", a * 0.5)
    return d.get("w") + d.get("missing", a) + d["b"]


@program(F, x(4))
def dict_update_pop(a: torch.Tensor) -> torch.Tensor:
    d = {"a": a, "b": a * 2}
    d.update({"c": a * 3}, b=a * 4)
    c = d.pop("c")
    return d["b"] + c + len(d)


@program(F, x(4))
def dict_iteration_order(a: torch.Tensor) -> torch.Tensor:
    d = {"z": 1.0, "a": 2.0, "m": 3.0}
    out = a
    for key, value in d.items():
        out = out * value + len(key)
    return out + sum(d.values()) + len(list(d.keys()))


@program(F, x(4))
def dict_contains(a: torch.Tensor) -> torch.Tensor:
    d = {"scale": 2.0}
    return a * d["scale"] if "scale" in d else a


@program(F, args(lambda: {"x": randn(4), "y": randn(4)}))
def dict_input(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return inputs["x"] * inputs["y"]


@program(F, args(lambda: {"x": randn(4), "y": randn(4)}))
def dict_input_returned(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.relu() for k, v in inputs.items()}


@program(F, x(4))
def ordered_dict(a: torch.Tensor) -> torch.Tensor:
    d = collections.OrderedDict()
    d["first"] = a
    d["second"] = a.exp()
    d.move_to_end("first")
    return list(d.values())[0] - list(d.values())[1]  # noqa: RUF015


@program(F, x(4))
def defaultdict_accumulate(a: torch.Tensor) -> torch.Tensor:
    d: collections.defaultdict[str, list[torch.Tensor]] = collections.defaultdict(list)
    for k in range(4):
        d["even" if k % 2 == 0 else "odd"].append(a * k)
    return sum(d["even"]) - sum(d["odd"])


@program(F, x(4))
def counter_of_strings(a: torch.Tensor) -> torch.Tensor:
    c = collections.Counter(["a", "b", "a"])
    return a * c["a"] + c["b"]


@program(F, x(4))
def set_operations(a: torch.Tensor) -> torch.Tensor:
    s = {1, 2, 3}
    s.add(4)
    s.discard(1)
    common = s & {2, 4, 6}
    return a * len(common) + len(s | {9})


@program(F, x(4))
def set_membership(a: torch.Tensor) -> torch.Tensor:
    allowed = {"relu", "gelu"}
    return a.relu() if "relu" in allowed else a


@program(F, x(4))
def frozenset_membership(a: torch.Tensor) -> torch.Tensor:
    return a + 1 if 3 in frozenset(range(5)) else a


@program(F, x(6))
def tuple_methods(a: torch.Tensor) -> torch.Tensor:
    t = (1, 2, 2, 3)
    return a * t.count(2) + t.index(3)


@program(F, x(4))
def tuple_unpacking_star(a: torch.Tensor) -> torch.Tensor:
    first, *middle, last = (a, a * 2, a * 3, a * 4)
    return first + last + len(middle)


@program(F, x(4))
def tuple_concat_and_compare(a: torch.Tensor) -> torch.Tensor:
    shape = (2,) + (2,)
    if shape == (2, 2):
        return a.reshape(shape)
    return a


@program(F, args(lambda: (randn(3), randn(3)), lambda: [randn(3)]))
def nested_container_inputs(
    pair: tuple[torch.Tensor, torch.Tensor], extra: list[torch.Tensor]
) -> torch.Tensor:
    return pair[0] * pair[1] + extra[0]


@program(F, x(4))
def deque_ops(a: torch.Tensor) -> torch.Tensor:
    q: collections.deque[torch.Tensor] = collections.deque([a])
    q.append(a * 2)
    q.appendleft(a * 3)
    return q.popleft() - q.pop()


@program(F, x(5))
def min_max_len_builtins(a: torch.Tensor) -> torch.Tensor:
    sizes = [4, 9, 2]
    return a * max(sizes) - min(sizes) + len(sizes)
