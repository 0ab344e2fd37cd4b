"""Sets, frozensets and the `collections` containers (deque, OrderedDict, defaultdict, Counter) in the region."""

from __future__ import annotations

import collections

import torch

from ._registry import args, module, program, randn, stateful, x, xy

F = "collections_types"


@program(F, x(4))
def set_comprehension_dedup(a: torch.Tensor) -> torch.Tensor:
    widths = {n // 2 for n in range(7)}
    return a * len(widths) + sum(widths)


@program(F, x(4))
def set_add_discard_remove(a: torch.Tensor) -> torch.Tensor:
    s = set()
    for k in (3, 1, 3, 2):
        s.add(k)
    s.discard(5)
    s.remove(1)
    return a * sum(s) + len(s)


@program(F, x(4))
def set_union_difference_symmetric(a: torch.Tensor) -> torch.Tensor:
    left, right = {1, 2, 3}, {3, 4}
    u = left | right
    d = left - right
    x_ = left ^ right
    return a * len(u) + len(d) * 10 + sorted(x_)[-1]


@program(F, x(4))
def set_inplace_operators(a: torch.Tensor) -> torch.Tensor:
    s = {1, 2}
    alias = s
    s |= {5}
    s &= {1, 5, 7}
    s -= {1}
    return a * len(alias) + max(alias)


@program(F, x(4))
def set_comparisons(a: torch.Tensor) -> torch.Tensor:
    small, big = {1, 2}, {1, 2, 3}
    out = a
    if small <= big and small < big and not big <= small:
        out = out + 1
    if small.issubset(big) and big.issuperset(small) and small.isdisjoint({9}):
        out = out * 2
    return out


@program(F, x(4))
def set_methods_returning_sets(a: torch.Tensor) -> torch.Tensor:
    s = {"relu", "tanh"}
    t = s.union(["gelu"]).intersection({"gelu", "tanh", "silu"})
    return a.tanh() if "tanh" in t and "relu" not in t else a


@program(F, x(4))
def set_of_strings_drives_branches(a: torch.Tensor) -> torch.Tensor:
    enabled = set("ab")
    enabled.update(["c"])
    out = a
    for name in sorted(enabled):
        out = out * 2 if name == "a" else out + 1
    return out


@program(F, x(4))
def set_pop_and_clear(a: torch.Tensor) -> torch.Tensor:
    s = {7}
    got = s.pop()
    s.update({1, 2})
    n = len(s)
    s.clear()
    return a * got + n + len(s)


@program(F, x(4))
def frozenset_as_constant_key(a: torch.Tensor) -> torch.Tensor:
    table = {frozenset({1, 2}): 3.0, frozenset({3}): -1.0}
    return a * table[frozenset([2, 1])] + table[frozenset((3,))]


@program(F, x(4))
def set_returned_with_tensor(a: torch.Tensor) -> tuple[torch.Tensor, set[int]]:
    s = {n % 4 for n in range(9)}
    return a + len(s), s


@program(F, x(4))
def set_from_shape(a: torch.Tensor) -> torch.Tensor:
    dims = set(a.view(2, 2).shape)
    return a * len(dims) + min(dims)


@program(F, x(5))
def deque_sliding_window(a: torch.Tensor) -> torch.Tensor:
    window: collections.deque[torch.Tensor] = collections.deque(maxlen=3)
    for k in range(5):
        window.append(a * k)
    return sum(window) / len(window)


@program(F, x(4))
def deque_rotate_and_index(a: torch.Tensor) -> torch.Tensor:
    q = collections.deque([a, a * 2, a * 3])
    q.rotate(1)
    return q[0] - q[-1]


@program(F, x(4))
def deque_extendleft_popleft(a: torch.Tensor) -> torch.Tensor:
    q: collections.deque[torch.Tensor] = collections.deque()
    q.extendleft([a, a.sin()])
    first = q.popleft()
    return first + q.pop() * len(q)


@program(F, x(4))
def deque_of_constants_count(a: torch.Tensor) -> torch.Tensor:
    q = collections.deque([1, 2, 2, 3], maxlen=4)
    q.appendleft(2)
    return a * q.count(2) + q.maxlen + q.index(1)


@program(F, x(4))
def deque_returned(a: torch.Tensor) -> collections.deque[torch.Tensor]:
    q = collections.deque([a.exp()], maxlen=2)
    q.append(a.cos())
    q.append(a.sin())
    return q


@program(F, x(4))
def ordered_dict_popitem_last(a: torch.Tensor) -> torch.Tensor:
    d = collections.OrderedDict([("x", a), ("y", a * 2), ("z", a * 3)])
    key, value = d.popitem()
    first_key, first = d.popitem(last=False)
    return value - first + len(d) + len(key + first_key)


@program(F, x(4))
def ordered_dict_move_to_front(a: torch.Tensor) -> torch.Tensor:
    d = collections.OrderedDict(a=a, b=a.exp())
    d.move_to_end("b", last=False)
    keys = list(d.keys())
    return d[keys[0]] * 2 - d[keys[1]]


@program(F, x(4))
def ordered_dict_returned(a: torch.Tensor) -> collections.OrderedDict[str, torch.Tensor]:
    d: collections.OrderedDict[str, torch.Tensor] = collections.OrderedDict()
    d["mean"] = a.mean()
    d["max"] = a.max()
    return d


@program(F, x(6))
def defaultdict_int_counts(a: torch.Tensor) -> torch.Tensor:
    counts: collections.defaultdict[str, int] = collections.defaultdict(int)
    for word in ("a", "b", "a", "a"):
        counts[word] += 1
    return a * counts["a"] - counts["b"] + counts["missing"]


@program(F, x(4))
def defaultdict_list_of_tensors(a: torch.Tensor) -> torch.Tensor:
    groups: collections.defaultdict[int, list[torch.Tensor]] = collections.defaultdict(list)
    for k in range(5):
        groups[k % 2].append(a + k)
    return torch.stack(groups[0]).sum(0) - torch.stack(groups[1]).sum(0)


@program(F, x(4))
def defaultdict_lambda_factory(a: torch.Tensor) -> torch.Tensor:
    scales: collections.defaultdict[str, float] = collections.defaultdict(lambda: 0.5)
    scales["w"] = 3.0
    return a * scales["w"] + a * scales["unset"] + len(scales)


@program(F, x(4))
def defaultdict_returned(a: torch.Tensor) -> collections.defaultdict[str, list[torch.Tensor]]:
    d: collections.defaultdict[str, list[torch.Tensor]] = collections.defaultdict(list)
    d["x"].append(a * 2)
    return d


@program(F, x(4))
def counter_most_common(a: torch.Tensor) -> torch.Tensor:
    c = collections.Counter("abracadabra")
    (letter, count), = c.most_common(1)
    return a * count + len(c) + (1 if letter == "a" else 0)


@program(F, x(4))
def counter_update_subtract(a: torch.Tensor) -> torch.Tensor:
    c = collections.Counter({"x": 2})
    c.update(["x", "y"])
    c.subtract({"y": 1})
    return a * c["x"] + c["y"] + c["zzz"]


@program(F, x(4))
def counter_arithmetic(a: torch.Tensor) -> torch.Tensor:
    c = collections.Counter(a=3, b=1) + collections.Counter(a=1, c=2)
    d = c - collections.Counter(a=2)
    return a * c.total() + d["a"] + len(list(d.elements()))


@program(F, xy((4,)))
def counter_of_layer_kinds(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    kinds = collections.Counter(["linear", "relu", "linear"])
    out = a
    for _ in range(kinds["linear"]):
        out = out @ torch.eye(4) + b
    return out.relu() if kinds["relu"] else out


@program(F, args(lambda: [randn(3) for _ in range(3)]))
def set_of_lengths_of_list_input(items: list[torch.Tensor]) -> torch.Tensor:
    sizes = {t.shape[0] for t in items}
    return torch.stack(items).sum(0) * len(sizes)


@program(F, x(4))
def containers_live_across_a_graph_break(a: torch.Tensor) -> torch.Tensor:
    ordered = collections.OrderedDict(first=a * 2)
    groups: collections.defaultdict[str, list[torch.Tensor]] = collections.defaultdict(list)
    groups["x"].append(a.sin())
    counts = collections.Counter("aab")
    window = collections.deque([a], maxlen=2)
    if a.sum() > 0:  # a graph break: every container is rebuilt for the rest of the function
        a = a + 1
    groups["y"].append(a)  # a missing key after the break: the rebuilt defaultdict's factory runs
    ordered.move_to_end("first", last=False)
    window.append(a * 3)
    return ordered["first"] + sum(groups["x"] + groups["y"]) * counts["a"] + window[0]


@program(F, x(4))
def set_live_across_a_graph_break(a: torch.Tensor) -> torch.Tensor:
    names = {"relu", "tanh"}
    if a.mean() > 0:
        names.add("sigmoid")
    out = a
    for name in sorted(names):
        out = getattr(torch, name)(out)
    return out


_SHARED_COUNTS: collections.Counter[str] = collections.Counter()


@program(F, x(4))
def module_level_ordered_dict_read(a: torch.Tensor) -> torch.Tensor:
    return a * _SCALES["w"] + _SCALES["b"] + len(_SCALES)


_SCALES = collections.OrderedDict(w=2.0, b=-1.0)


@stateful(F, x(4))
def global_counter_updated_each_call():  # type: ignore[no-untyped-def]
    _SHARED_COUNTS.clear()

    def fn(a: torch.Tensor) -> torch.Tensor:
        _SHARED_COUNTS["calls"] += 1
        return a * _SHARED_COUNTS["calls"]

    return fn


@module(F, x(4))
class ModuleWithDequeHistory(torch.nn.Module):
    """A module holding a deque of constants read in forward, and an OrderedDict of scales."""

    def __init__(self) -> None:
        super().__init__()
        self.history = collections.deque([1.0, 2.0, 3.0], maxlen=3)
        self.scales = collections.OrderedDict(first=0.5, second=2.0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        total = sum(self.history) / len(self.history)
        out = self.lin(a) * total
        for scale in self.scales.values():
            out = out * scale
        return out


@module(F, x(4))
class RunningHistoryDeque(torch.nn.Module):
    """A module keeping the last outputs in a deque attribute, mutated in forward (streaming models do)."""

    def __init__(self) -> None:
        super().__init__()
        self.history: collections.deque[torch.Tensor] = collections.deque(maxlen=2)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        out = self.lin(a)
        self.history.append(out.detach())
        return out + sum(self.history)
